"""Structural scanning and bounded decoding of concatenated Zstandard frames.

A zstd transcript is a plain concatenation of independent frames (format-spec
§2.3): frame 1 holds the header line, every later frame one append batch.  The
scan walks frame and block headers without decompressing, so it finds frame
boundaries of a file of any size in O(frames + blocks) small reads.  Only the
final frame can be incomplete (EOF inside it): that is a torn tail, not damage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO, Final

import msgspec
import zstandard


class ZstdFrameError(ValueError):
    """Damage in a zstd transcript's frame structure or content (always corrupt)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_READ_CHUNK: Final = 1 << 20
DEFAULT_MAX_FRAME_PLAINTEXT: Final = 256 << 20


class FrameSpan(msgspec.Struct, frozen=True):
    """A structurally complete frame occupying ``[start, end)`` of the file."""

    start: int
    end: int


class TornFrame(msgspec.Struct, frozen=True):
    """An incomplete final frame starting at ``start`` (EOF was hit inside it)."""

    start: int


class FrameTooLarge(ZstdFrameError):
    """A frame's plaintext exceeds the configured bound."""


def scan_frames(fh: BinaryIO, start: int = 0, size: int | None = None) -> Iterator[FrameSpan | TornFrame]:
    """Yield every complete frame from ``start``, then at most one :class:`TornFrame`.

    ``size`` is the byte length to treat as end of file (defaults to the
    current size).  Raises :class:`ZstdFrameError` (corrupt) for a bad magic
    number, reserved descriptor bits or a reserved block type.
    """
    if size is None:
        size = fh.seek(0, 2)
    pos = start
    while pos < size:
        frame_start = pos
        if size - pos < 4:
            yield TornFrame(frame_start)
            return
        fh.seek(pos)
        head = fh.read(18)  # magic + the largest possible frame header
        if head[:4] != ZSTD_MAGIC:
            raise ZstdFrameError(f"invalid frame magic at byte {frame_start}")
        if len(head) < 5:
            yield TornFrame(frame_start)
            return
        descriptor = head[4]
        if descriptor & 0x18:
            raise ZstdFrameError(f"reserved frame header bits set at byte {frame_start}")
        fcs_flag = descriptor >> 6
        single_segment = (descriptor >> 5) & 1
        has_checksum = (descriptor >> 2) & 1
        dict_bytes = (0, 1, 2, 4)[descriptor & 3]
        fcs_bytes = (1 if single_segment else 0) if fcs_flag == 0 else (2, 4, 8)[fcs_flag - 1]
        header_len = 1 + (0 if single_segment else 1) + dict_bytes + fcs_bytes
        pos += 4 + header_len
        if pos > size:
            yield TornFrame(frame_start)
            return
        while True:
            if size - pos < 3:
                yield TornFrame(frame_start)
                return
            fh.seek(pos)
            raw = fh.read(3)
            block = raw[0] | (raw[1] << 8) | (raw[2] << 16)
            last = block & 1
            block_type = (block >> 1) & 3
            if block_type == 3:
                raise ZstdFrameError(f"reserved block type in frame at byte {frame_start}")
            payload = 1 if block_type == 1 else block >> 3
            pos += 3 + payload
            if pos > size:
                yield TornFrame(frame_start)
                return
            if last:
                break
        if has_checksum:
            pos += 4
            if pos > size:
                yield TornFrame(frame_start)
                return
        yield FrameSpan(frame_start, pos)


def _read_range(fh: BinaryIO, start: int, end: int) -> Iterator[bytes]:
    fh.seek(start)
    remaining = end - start
    while remaining > 0:
        piece = fh.read(min(_READ_CHUNK, remaining))
        if not piece:
            break
        remaining -= len(piece)
        yield piece


def iter_frame(fh: BinaryIO, span: FrameSpan, max_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT) -> Iterator[bytes]:
    """Decompress one complete frame with full validation, yielding plaintext pieces.

    Checksum, dictionary and any decoder failure raise :class:`ZstdFrameError`;
    plaintext beyond ``max_plaintext`` raises :class:`FrameTooLarge` without
    buffering the frame.  Pull-based, so a slow consumer holds one piece at a time.
    """
    decoder = zstandard.ZstdDecompressor().decompressobj()
    produced = 0
    try:
        for piece in _read_range(fh, span.start, span.end):
            out = decoder.decompress(piece)
            if out:
                produced += len(out)
                if produced > max_plaintext:
                    raise FrameTooLarge(
                        f"frame at byte {span.start} holds more than {max_plaintext} bytes of plaintext"
                    )
                yield out
    except zstandard.ZstdError as exc:
        raise ZstdFrameError(f"frame at byte {span.start} failed validation: {exc}") from None
    if not decoder.eof:
        raise ZstdFrameError(f"frame at byte {span.start} failed validation: incomplete frame")


def decode_frame(
    fh: BinaryIO,
    span: FrameSpan,
    sink: Callable[[bytes], None],
    max_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT,
) -> int:
    """:func:`iter_frame` into ``sink``; returns the plaintext length."""
    produced = 0
    for piece in iter_frame(fh, span, max_plaintext):
        produced += len(piece)
        sink(piece)
    return produced


def decode_torn_frame(fh: BinaryIO, torn: TornFrame, size: int, max_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT) -> bytes:
    """Whatever plaintext the available bytes of an incomplete frame release.

    A decoder error yields no plaintext, as in the reference; so does output
    beyond the plaintext bound (the tail is simply not recovered).
    """
    decoder = zstandard.ZstdDecompressor().decompressobj()
    parts: list[bytes] = []
    produced = 0
    try:
        for piece in _read_range(fh, torn.start, size):
            out = decoder.decompress(piece)
            produced += len(out)
            if produced > max_plaintext:
                return b""
            parts.append(out)
    except zstandard.ZstdError:
        return b""
    return b"".join(parts)
