"""Raw event blocks: consecutive events' compact JSON, LF-joined, zstd-compressed.

The index keeps every event's exact JSON this way (``event_blocks``), so reads
return events byte-for-byte as decoded from the log while the index stays close
to the size of the logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import zstandard

BLOCK_EVENTS: Final = 256
BLOCK_BYTES: Final = 256 * 1024

_compressor = zstandard.ZstdCompressor(level=3)
_decompressor = zstandard.ZstdDecompressor()


def compress_block(lines: Sequence[bytes]) -> bytes:
    """One raw block from the events' compact JSON lines."""
    return _compressor.compress(b"\n".join(lines))


def decompress_block(data: bytes) -> list[bytes]:
    """The raw JSON lines of one block, in seq order."""
    return _decompressor.decompress(data).split(b"\n") if data else []
