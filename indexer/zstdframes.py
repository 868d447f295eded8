"""Zstandard frame scanning for the log reader.

The scanner itself is shared with the export (``readmodel.zstdframes``); here its
damage errors become the reader's corrupt-log errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

from readmodel import zstdframes as _frames
from readmodel.zstdframes import DEFAULT_MAX_FRAME_PLAINTEXT, ZSTD_MAGIC, FrameSpan, TornFrame, ZstdFrameError

from .records import LogFormatError

__all__ = [
    "DEFAULT_MAX_FRAME_PLAINTEXT",
    "ZSTD_MAGIC",
    "FrameSpan",
    "FrameTooLarge",
    "TornFrame",
    "decode_frame",
    "decode_torn_frame",
    "scan_frames",
]


class FrameTooLarge(LogFormatError):
    """A frame's plaintext exceeds the configured bound."""


def _as_log_error(exc: ZstdFrameError) -> LogFormatError:
    if isinstance(exc, _frames.FrameTooLarge):
        return FrameTooLarge(exc.message)
    return LogFormatError(exc.message)


def scan_frames(fh: BinaryIO, start: int = 0, size: int | None = None) -> Iterator[FrameSpan | TornFrame]:
    """See :func:`readmodel.zstdframes.scan_frames`; damage is a corrupt log."""
    try:
        yield from _frames.scan_frames(fh, start, size)
    except ZstdFrameError as exc:
        raise _as_log_error(exc) from None


def decode_frame(fh: BinaryIO, span: FrameSpan, sink: Callable[[bytes], None], max_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT) -> int:
    """See :func:`readmodel.zstdframes.decode_frame`; failures are a corrupt log."""
    try:
        return _frames.decode_frame(fh, span, sink, max_plaintext)
    except ZstdFrameError as exc:
        raise _as_log_error(exc) from None


decode_torn_frame = _frames.decode_torn_frame
