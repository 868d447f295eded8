"""Raw event blocks: consecutive events' compact JSON, LF-joined, zstd-compressed.

The index keeps every event's exact JSON this way (``event_blocks``), so reads
return events byte-for-byte as decoded from the log while the index stays close
to the size of the logs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import msgspec
import zstandard

BLOCK_EVENTS: Final = 256
BLOCK_BYTES: Final = 256 * 1024

# Level 1: blocks are re-read often and written once; speed matters more than
# the last few percent of size (the logs themselves are the archive).
_compressor = zstandard.ZstdCompressor(level=1)
_encode = msgspec.json.Encoder().encode
_decompressor = zstandard.ZstdDecompressor()


def compress_block(lines: Sequence[bytes]) -> bytes:
    """One raw block from the events' compact JSON lines."""
    return _compressor.compress(b"\n".join(lines))


def decompress_block(data: bytes) -> list[bytes]:
    """The raw JSON lines of one block, in seq order."""
    return _decompressor.decompress(data).split(b"\n") if data else []


_decode_array = msgspec.json.Decoder().decode


def encode_event(event: Any) -> bytes:
    """Compact JSON of one event for a raw block.

    msgspec cannot encode a lone surrogate (which a JSON log may carry as an
    escape); such an event falls back to the standard library with ASCII
    escapes, which :func:`decode_events` reads back exactly.
    """
    try:
        return _encode(event)
    except UnicodeEncodeError:
        return json.dumps(event, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def decode_events(data: bytes) -> list[Any]:
    """Every event of one raw block, in seq order (one decoder call in the common case)."""
    lines = decompress_block(data)
    if not lines:
        return []
    try:
        return _decode_array(b"[" + b",".join(lines) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return [json.loads(line) for line in lines]
