"""Raw lines of a batch of events taken from the log's own bytes.

A raw block stores each event as its compact JSON, one LF-terminated line
(:func:`readmodel.store.blocks.encode_events`), and a log's projector used to
encode every event it was handed: a sixth of a long log's reading stage.  The
line an event was decoded from is, in the logs harnesses write, already that
encoding; the C accelerator (``indexer/_rawlines.c``) proves it line by line
(its ``canonical``: no white space, msgspec's own escapes, integers only, no
repeated key) and copies the proven lines, encoding only the others.

Contract: :meth:`RegionLines.lines` returns exactly
:func:`~indexer.projection.encode_items` of the items (``None``: the caller
encodes them itself, as without the accelerator).  It relies on one invariant
of the reader: no stage changes a decoded event in place (an upgrade, a
repair or a lazy header builds a new dict), so an item that *is* the value
decoded from a line still holds what the line says.
"""

from __future__ import annotations

from typing import Any, Final

from readmodel.core.accelerators import RAWLINES, accelerated
from readmodel.store.blocks import encode_events

from .packedrows import PackedRow

_line_starts: Final = accelerated(RAWLINES, "line_starts")
_join_lines: Final = accelerated(RAWLINES, "join_lines")

AVAILABLE: Final = _join_lines is not None
"""Whether raw lines can be taken from the region (the accelerator is built and on)."""


def item_lines(item: Any) -> bytes:
    """One batch item's LF-terminated raw lines: an event's, or a packed row's members'."""
    if type(item) is PackedRow:
        return item.lines()
    return encode_events([item])


class RegionLines:
    """The decoded values of one region of a log, with the region, for :meth:`lines`."""

    __slots__ = ("region", "values", "starts")

    def __init__(self, region: bytes, values: list[Any]) -> None:
        """``values`` are the region's lines decoded, one per line (the scanner's fast path)."""
        self.region = region
        self.values = values
        self.starts: bytes | None = None  # each line's offset, found at the first batch

    def lines(self, items: list[Any], base: int | None) -> bytes | None:
        """The raw lines of ``items`` (``encode_items(items)``), where ``items[i]`` was handed
        on for ``values[base + i]``; ``None`` when ``base`` is (the items are not aligned
        with the lines) or the accelerator is not there."""
        if base is None or _join_lines is None:
            return None
        if self.starts is None:
            self.starts = _line_starts(self.region)
        return _join_lines(items, self.values, base, self.region, self.starts, item_lines)
