"""The index's row keys and codes, without SQLAlchemy.

What rows are keyed and coded by — surface codes, document rowids, the
collation key of session ids, the longest link span — is needed by whoever
shapes rows (the indexer, its preparation workers) and by whoever reads them.
The schema itself (:mod:`readmodel.store.schema`) re-exports these; workers import
this module alone, which keeps SQLAlchemy out of their start-up.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Final

from readmodel.projection.collation import locale_compare_key

SURFACE_CODES: Final = {"log-only": 0, "current": 1, "shadowed": 2}
SURFACE_NAMES: Final = ("log-only", "current", "shadowed")

MAX_LINK_SPAN: Final = 1024
"""The longest run of consecutive sources one ``event_links`` row covers."""

_KEY_WIDTH: Final = 5


def docid(sid: int, seq: int) -> int:
    """The document rowid of an event: session and seq packed into one integer."""
    return (sid << 32) | seq


def id_sort_key(session_id: str) -> bytes:
    """Bytes that sort like the reference's ``localeCompare`` on session ids.

    The three collation levels are concatenated with an all-zero separator;
    each weight is stored as ``weight + 1`` in five big-endian bytes, so a
    shorter level that is a prefix of a longer one sorts first, as tuples do.
    """
    parts = [_char_key_parts(char) for char in unicodedata.normalize("NFD", session_id)]
    separator = bytes(_KEY_WIDTH)
    return separator.join(b"".join(part[level] for part in parts) for level in range(3)) + separator


@lru_cache(maxsize=65536)
def _char_key_parts(char: str) -> tuple[bytes, bytes, bytes]:
    """One (NFD) character's encoded weights per level: the key is their per-level concatenation."""
    primaries, secondaries, tertiaries = locale_compare_key(char)
    return tuple(b"".join((weight + 1).to_bytes(_KEY_WIDTH, "big") for weight in level) for level in (primaries, secondaries, tertiaries))  # type: ignore[return-value]
