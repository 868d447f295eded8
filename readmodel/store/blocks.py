"""Raw event blocks: consecutive events' compact JSON, LF-joined, zstd-compressed.

The index keeps every event's exact JSON this way (``event_blocks``), so reads
return events byte-for-byte as decoded from the log while the index stays close
to the size of the logs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from itertools import accumulate, groupby
from typing import Any, Final

import msgspec
import zstandard

BLOCK_EVENTS: Final = 256
BLOCK_BYTES: Final = 256 * 1024


class _Contexts(threading.local):
    """This thread's zstd contexts.

    A zstd (de)compression context is mutable state that one call at a time
    may use: two threads sharing one (the HTTP server's pool, the MCP server,
    any embedding process) corrupt each other's output or crash the process.
    A context is also costly to create, so each thread keeps its own for good;
    ``__init__`` runs once per thread, on its first access.  The bound methods
    are kept rather than the contexts, so a call costs one thread-local lookup
    (tens of nanoseconds; decompressing a block takes microseconds).
    """

    def __init__(self) -> None:
        # Level 1: blocks are re-read often and written once; speed matters more
        # than the last few percent of size (the logs themselves are the archive).
        self.compress = zstandard.ZstdCompressor(level=1).compress
        self.decompress = zstandard.ZstdDecompressor().decompress


_contexts: Final = _Contexts()
# msgspec Encoders and Decoders keep no per-call state (thread-safe since
# msgspec 0.16), so this module shares one of each between all threads.
_encode = msgspec.json.Encoder().encode


def compress_block(lines: Sequence[bytes]) -> bytes:
    """One raw block from the events' compact JSON lines (thread-safe)."""
    return _contexts.compress(b"\n".join(lines))


def compress_payload(payload: bytes) -> bytes:
    """One raw block from its lines already LF-joined (``compress_block`` of ``payload.split(b"\\n")``)."""
    return _contexts.compress(payload)


def decompress_payload(data: bytes) -> bytes:
    """The LF-joined lines of one raw block (thread-safe: this thread's context)."""
    return _contexts.decompress(data)


def decompress_block(data: bytes) -> list[bytes]:
    """The raw JSON lines of one block, in seq order (thread-safe)."""
    return _contexts.decompress(data).split(b"\n") if data else []


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


_encode_lines = msgspec.json.Encoder().encode_lines


def encode_events(events: Sequence[Any]) -> bytes:
    """``b"".join(encode_event(e) + b"\\n" for e in events)``: one LF-terminated
    line per event, in one encoder call in the common case.

    Compact JSON never holds a raw LF (string escapes cover it), so the
    result splits back into exactly one line per event.
    """
    try:
        return _encode_lines(events)
    except UnicodeEncodeError:
        return b"".join(encode_event(event) + b"\n" for event in events)


def decode_events(data: bytes) -> list[Any]:
    """Every event of one raw block, in seq order (one decoder call in the common case)."""
    lines = decompress_block(data)
    if not lines:
        return []
    try:
        return _decode_array(b"[" + b",".join(lines) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return [json.loads(line) for line in lines]


# -- run members (``event_runs.types`` and ``event_runs.times``) -----------------------

_pack_into = msgspec.msgpack.Encoder().encode_into
_unpack_ints = msgspec.msgpack.Decoder(list[int]).decode


def pack_run_times(times: Sequence[int]) -> bytearray:
    """The members' times of one run: msgpack ``[t0, t1 - t0, t2 - t1, ...]``.

    Contract: ``times`` is non-empty and holds safe integers (|t| < 2**53), so
    every delta fits msgpack's integer range.  Chunk times are milliseconds
    apart, so most deltas take one byte.  A ``bytearray`` because the
    ``sqlite3`` module binds it several times faster than ``bytes``.
    """
    deltas = [times[0]]
    deltas += [later - earlier for earlier, later in zip(times, times[1:])]
    out = bytearray()
    _pack_into(deltas, out)
    return out


def unpack_run_times(data: bytes) -> list[int]:
    """The times :func:`pack_run_times` packed, in member order."""
    return list(accumulate(_unpack_ints(data)))


_unpack_list = msgspec.msgpack.Decoder(list[Any]).decode


def pack_run_types(types: Sequence[str]) -> bytearray:
    """The members' types of one run, run-length coded: msgpack ``[type, repeat, type, repeat, ...]``."""
    coded: list[Any] = []
    for etype, group in groupby(types):
        coded += (etype, len(list(group)))
    out = bytearray()
    _pack_into(coded, out)
    return out


def unpack_run_types(data: bytes) -> list[str]:
    """The types :func:`pack_run_types` packed, one per member."""
    coded = _unpack_list(data)
    types: list[str] = []
    for index in range(0, len(coded), 2):
        types += [coded[index]] * coded[index + 1]
    return types
