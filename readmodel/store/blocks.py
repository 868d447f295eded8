"""Raw event blocks: consecutive events' compact JSON, LF-joined, zstd-compressed.

The index keeps every event's exact JSON this way (``event_blocks``), so reads
return events byte-for-byte as decoded from the log while the index stays close
to the size of the logs.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from itertools import accumulate, groupby
from operator import sub
from typing import Any, Final

import msgspec
import zstandard

from readmodel.core.accelerators import RUNPACK, accelerated

BLOCK_EVENTS: Final = 256
BLOCK_BYTES: Final = 256 * 1024
DICTIONARY_MIN_BYTES: Final = 8 * 1024 * 1024
"""A cold build of fewer bytes of logs trains no block dictionary (too little to gain);
``status`` suggests a rebuild for dictionary-less blocks of at least this size."""


class MissingDictionary(LookupError):
    """A block was compressed with a dictionary this process has not registered yet.

    The caller loads it from the index (``block_dictionaries``), passes it to
    :func:`register_dictionary` and decodes again.
    """

    def __init__(self, dict_id: int) -> None:
        super().__init__(f"zstd dictionary {dict_id} is not registered")
        self.dict_id = dict_id


# Dictionaries by zstd dictionary id, shared by every thread of the process.  An
# index stores each one it uses (``block_dictionaries``), and a block's frame
# header names its dictionary, so blocks written with and without one mix freely.
_dictionaries: dict[int, bytes] = {}
_registry_lock: Final = threading.Lock()
_active: list[int] = [0]  # the id new blocks are compressed with; 0: none


def register_dictionary(dict_id: int, data: bytes) -> None:
    """Make dictionary ``dict_id`` known to this process (idempotent)."""
    with _registry_lock:
        known = _dictionaries.get(dict_id)
        if known is not None and known != data:
            raise ValueError(f"two different zstd dictionaries carry id {dict_id}")
        _dictionaries[dict_id] = bytes(data)


def use_dictionary(dict_id: int, data: bytes) -> None:
    """Compress new blocks with this dictionary (registering it); ``dict_id`` 0: without one."""
    if dict_id:
        register_dictionary(dict_id, data)
    _active[0] = dict_id


def active_dictionary() -> tuple[int, bytes] | None:
    """The dictionary new blocks are compressed with, if any."""
    dict_id = _active[0]
    return (dict_id, _dictionaries[dict_id]) if dict_id else None


def frame_dictionary(data: bytes) -> int:
    """The dictionary id a zstd frame header names (0: none)."""
    if len(data) < 6:
        return 0
    descriptor = data[4]
    width = (0, 1, 2, 4)[descriptor & 3]
    if not width:
        return 0
    at = 5 if descriptor & 0x20 else 6  # single-segment frames have no window descriptor
    return int.from_bytes(data[at : at + width], "little")


TRAINING_SEGMENT: Final = 8000
"""zstd's (fast)cover ``k``: the bytes of one dictionary segment chosen from the samples."""
TRAINING_DMER: Final = 8
"""zstd's ``d``: the length of the byte strings whose frequency ranks segments."""


SMALL_TRAINING_BYTES: Final = 4 * 1024 * 1024
"""Samples below this size (roots under ≈ 32 MB) train with a :data:`SMALL_TRAINING_FREQUENCY_LOG` table."""
SMALL_TRAINING_FREQUENCY_LOG: Final = 17
"""zstd's fastcover ``f`` (log2 of its d-mer frequency table's entries) for small samples.

The default (20: a 4 MiB table, cleared and filled at random) made most of the training
time on small samples: on the 10 MB root's 2.1 MB of samples (session 12, issue 21)
f=20 trained in 39 ms and f=17 in 13–19 ms, the root's real blocks recompressed 0.4%
larger (f=16: 2.1%, f=18: 1.7%); on three 10–15 MB slices of the 160 MB root, whole
logs in 256 KiB pieces compressed within ±0.6% of f=20 for f=16–18.  Larger samples
keep the default, and with it the dictionaries of the larger roots.
"""


def training_frequency_log(sample_bytes: int) -> int:
    """The fastcover ``f`` to train ``sample_bytes`` of samples with (0: zstd's default)."""
    return SMALL_TRAINING_FREQUENCY_LOG if sample_bytes < SMALL_TRAINING_BYTES else 0


def train_dictionary(samples: Sequence[bytes], size: int = 256 * 1024) -> tuple[int, bytes]:
    """A dictionary for raw blocks trained on ``samples`` (deterministic for the same samples).

    With fixed ``k`` and ``d`` zstd trains once instead of searching ~40 parameter
    pairs (``k=d=0``), and the search's objective (how well the samples, pieces of
    log heads, compress) is not the blocks' anyway.  Blocks of real indexes decompressed
    and compressed again (session 10, issue 21): the search took 0.10 / 0.48 / 0.55
    CPU-s on the 10 MB root, the 160 MB root and the 100 MB log and picked k=1998 or
    1511, d=8; ``k=8000, d=8`` took 0.03 / 0.12 / 0.15 and gave blocks 4.0%, 4.2% and
    1.6% smaller (k=2000: 1.0%, 1.4%, 0%; k=4000: 3.4%, 3.2%, 1.4%; k=16000: 4.8%,
    1.8%, 2.7%; d=6 no better), decompressing as fast.
    """
    samples = list(samples)
    trained = zstandard.train_dictionary(
        size, samples, k=TRAINING_SEGMENT, d=TRAINING_DMER, f=training_frequency_log(sum(map(len, samples))), level=BLOCK_LEVEL, threads=0
    )
    return _identified(trained.as_bytes())



_DICT_ID_AT: Final = slice(4, 8)
"""Where a zstd dictionary keeps its id (little-endian, after the 4-byte magic)."""
_DICT_ID_LOW: Final = 32768
_DICT_ID_SPAN: Final = (1 << 31) - _DICT_ID_LOW
"""zstd reserves ids below 32768 and from 2**31 on; a trainer's own ids lie between."""


def _identified(data: bytes) -> tuple[int, bytes]:
    """``data`` with an id derived from all its other bytes, and that id.

    zstd derives a trained dictionary's id from its content segments alone, so two
    trainings on nearly the same samples (a root before and after an append) can give
    dictionaries that differ only in their entropy tables yet carry one id — and a
    process keeps its dictionaries by id (:func:`register_dictionary`).  Hashing the
    whole dictionary makes equal ids mean equal dictionaries (up to a 31-bit hash).
    """
    digest = hashlib.blake2b(data[: _DICT_ID_AT.start] + data[_DICT_ID_AT.stop :], digest_size=8).digest()
    dict_id = int.from_bytes(digest, "little") % _DICT_ID_SPAN + _DICT_ID_LOW
    return dict_id, data[: _DICT_ID_AT.start] + dict_id.to_bytes(4, "little") + data[_DICT_ID_AT.stop :]


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
        # Level 1 without a dictionary: blocks are re-read often and written once.
        self.compress = zstandard.ZstdCompressor(level=1).compress
        self.decompress = zstandard.ZstdDecompressor().decompress
        self.compressors: dict[int, Any] = {}
        self.decompressors: dict[int, Any] = {}

    def compressor(self, small: bool) -> Any:
        """The compress method with the active dictionary (``small``: :data:`SMALL_PAYLOAD_TABLES`)."""
        dict_id = _active[0]
        if not dict_id:
            return self.compress
        methods = self.compressors.get(dict_id)
        if methods is None:
            methods = self.compressors[dict_id] = _dictionary_compressors(_dictionaries[dict_id])
        return methods[not small]

    def decompressor(self, block: bytes) -> Any:
        dict_id = frame_dictionary(block)
        if not dict_id:
            return self.decompress
        method = self.decompressors.get(dict_id)
        if method is None:
            data = _dictionaries.get(dict_id)
            if data is None:
                raise MissingDictionary(dict_id)
            method = self.decompressors[dict_id] = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(data)).decompress
        return method


BLOCK_LEVEL: Final = 3
"""zstd level of blocks compressed with a dictionary (as fast as level 1 without one)."""
SMALL_PAYLOAD_BYTES: Final = 128 * 1024
"""Payloads below this size are compressed with :data:`SMALL_PAYLOAD_TABLES`."""
SMALL_PAYLOAD_TABLES: Final = {"hash_log": 15, "chain_log": 13}
"""Match tables (log2 of their entries) for payloads under :data:`SMALL_PAYLOAD_BYTES`:
smaller than level 3's, at level 3's strategy (``dfast``).

zstd prepares a dictionary's match tables once, but for every frame above 16 KB
(``dfast``) it copies them into the compression context, and level 3's tables
for a 256 KB dictionary are large: with most blocks 16–64 KB, the copy was a
good part of their compression.  Smaller tables lose almost nothing on payloads
this small (larger ones lost 2–10% with them, so they keep level 3's).  Real
blocks compressed again (session 12, ms of CPU, best of several runs; MB of
blocks): 10 MB root 53.6 → 47.5 (2.5908 → 2.5960), 160 MB root 1166 → 809
(39.063 → 39.067), 100 MB log 863 → 791 (37.780 → 37.787).  Frames of either
kind decompress as fast, with the same dictionary.
"""


def _dictionary_compressors(dictionary: bytes) -> tuple[Any, Any]:
    """The compress methods for payloads under :data:`SMALL_PAYLOAD_BYTES` and for the others."""
    # Explicit parameters leave the dictionary's id out of the frame unless asked:
    # readers find a block's dictionary by that id (frame_dictionary).
    small = zstandard.ZstdCompressionParameters.from_level(
        BLOCK_LEVEL, strategy=zstandard.STRATEGY_DFAST, write_dict_id=True, **SMALL_PAYLOAD_TABLES
    )
    return (
        zstandard.ZstdCompressor(dict_data=zstandard.ZstdCompressionDict(dictionary), compression_params=small).compress,
        zstandard.ZstdCompressor(level=BLOCK_LEVEL, dict_data=zstandard.ZstdCompressionDict(dictionary)).compress,
    )


_contexts: Final = _Contexts()
# msgspec Encoders and Decoders keep no per-call state (thread-safe since
# msgspec 0.16), so this module shares one of each between all threads.
_encode = msgspec.json.Encoder().encode


def compress_block(lines: Sequence[bytes]) -> bytes:
    """One raw block from the events' compact JSON lines (thread-safe; the active dictionary)."""
    return compress_payload(b"\n".join(lines))


def compress_payload(payload: bytes) -> bytes:
    """One raw block from its lines already LF-joined (``compress_block`` of ``payload.split(b"\\n")``)."""
    return _contexts.compressor(len(payload) < SMALL_PAYLOAD_BYTES)(payload)


def compress_text(data: bytes) -> bytes:
    """One document text's UTF-8 as a frame with the active dictionary, if any (thread-safe).

    Always level 3's tables: texts are mostly under 16 KB, where zstd references
    the dictionary's tables instead of copying them, so smaller tables saved no
    time on real texts (session 12) and compressed them ~0.3% larger.
    """
    return _contexts.compressor(False)(data)


def decompress_payload(data: bytes) -> bytes:
    """The LF-joined lines of one raw block (thread-safe: this thread's context).

    Raises :class:`MissingDictionary` for a block whose dictionary is not registered.
    """
    return _contexts.decompressor(data)(data)


def decompress_block(data: bytes) -> list[bytes]:
    """The raw JSON lines of one block, in seq order (thread-safe; see :func:`decompress_payload`)."""
    return decompress_payload(data).split(b"\n") if data else []


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


# The C packers of run members (readmodel/core/_runpack.c): None where the Python paths decide.
_pack_times_c: Final = accelerated(RUNPACK, "pack_run_times")
_pack_types_c: Final = accelerated(RUNPACK, "pack_run_types")


def _c_or_python(in_c: Any, in_python: Any, members: Sequence[Any]) -> bytearray:
    """``in_c(members)`` when it is built and takes them (not ``None``), else ``in_python(members)``."""
    packed = in_c(members) if in_c is not None else None
    return packed if packed is not None else in_python(members)  # type: ignore[no-any-return]


def pack_run_times(times: Sequence[int]) -> bytearray:
    """The members' times of one run (:func:`pack_run_times_python`; in C when built)."""
    return _c_or_python(_pack_times_c, pack_run_times_python, times)


def pack_run_times_python(times: Sequence[int]) -> bytearray:
    """The members' times of one run: msgpack ``[t0, t1 - t0, t2 - t1, ...]``.

    Contract: ``times`` is non-empty and holds safe integers (|t| < 2**53), so
    every delta fits msgpack's integer range.  Chunk times are milliseconds
    apart, so most deltas take one byte.  A ``bytearray`` because the
    ``sqlite3`` module binds it several times faster than ``bytes``.
    """
    deltas = [times[0]]
    deltas += map(sub, times[1:], times)  # later - earlier, in C
    out = bytearray()
    _pack_into(deltas, out)
    return out


def unpack_run_times(data: bytes) -> list[int]:
    """The times :func:`pack_run_times` packed, in member order."""
    return list(accumulate(_unpack_ints(data)))


_unpack_list = msgspec.msgpack.Decoder(list[Any]).decode


def pack_run_types(types: Sequence[str]) -> bytearray:
    """The members' types of one run (:func:`pack_run_types_python`; in C when built)."""
    return _c_or_python(_pack_types_c, pack_run_types_python, types)


def pack_run_types_python(types: Sequence[str]) -> bytearray:
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
