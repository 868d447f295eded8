"""The index's zstd dictionary for raw event blocks (schema 0011, ``block_dictionaries``).

Raw blocks hold a few hundred events' JSON each, compressed one by one so that
any event is read by decoding one block; on their own they compress about as
well as the logs.  Sessions repeat a great deal between blocks and between
each other (request headers carry the same system prompt and tool schemas), and
a dictionary trained on a sample of the logs lets every block use it: on the
benchmark roots the blocks shrink to a fifth.

When: a cold build (empty index) of at least 8 MiB of
logs (:data:`MIN_BYTES`) trains one before any session is prepared, from the first
:data:`SAMPLE_BYTES` of plaintext (more of each when there are few) of up to
:data:`SAMPLE_LOGS` logs spread over the root (at most :data:`SAMPLE_TOTAL`), stores it, and both the writer and the preparation workers compress
every block with it.  Later passes compress with the stored dictionary.  An
index built without one (small roots, or before schema 0011) keeps plain blocks;
the two kinds mix, since each block's zstd frame header names its dictionary.
Training is deterministic: the same root gives the same dictionary, so the
writer alone and the workers build the same index.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

import zstandard

from readmodel.store.blocks import DICTIONARY_MIN_BYTES, active_dictionary, register_dictionary, train_dictionary, use_dictionary

from .layout import Compression

log = logging.getLogger("sessionq.indexer")

SAMPLE_LOGS: Final = 1024
SAMPLE_BYTES: Final = 32 * 1024
"""Plaintext read from the start of each sampled log."""
SAMPLE_TOTAL: Final = 16 * 1024 * 1024
"""Training reads at most this much (≈ 0.15 CPU-s of training, see :func:`readmodel.store.blocks.train_dictionary`), and an eighth of the root's
bytes (at least 2 MiB) on smaller roots.  Below ≈ 15 MB zstd trains
smaller dictionaries: on the 160 MB root 8 MB of samples gave 52 KB and blocks
0.45× their plain size, 15 MB gave the full 256 KB and 0.22×."""
SAMPLE_PIECE: Final = 4 * 1024
"""Training sample size (zstd trains on many small samples better than on few large ones)."""
_MIN_SAMPLES: Final = 64
DICTIONARY_BYTES: Final = 256 * 1024
"""The largest dictionary trained (on roots of at least ≈ 64 MB: 8 MiB of samples or more)."""
SAMPLES_PER_DICTIONARY_BYTE: Final = 32
"""Samples a dictionary byte needs.  zstd's trainer asked for a dictionary too large for its
samples returns a short one that compresses badly: on the 10 MB benchmark root, 2 MiB of
samples asked for 256 KiB gave 74 KB and blocks of 4.73 MB; asked for 64 KiB, 64 KiB and
2.70 MB (the index 12.1 → 10.1 MB)."""
_MIN_DICTIONARY_BYTES: Final = 16 * 1024
MIN_BYTES: int = DICTIONARY_MIN_BYTES
"""The cold-build size from which a dictionary is trained (a module attribute: tests lower it)."""


def load(cur: Any) -> None:
    """Register the index's dictionaries in this process and compress new blocks with its own.

    An index has at most one (trained by its cold build); with none, new
    blocks are compressed without one.
    """
    rows = cur.execute('SELECT "id" FROM "block_dictionaries" ORDER BY "id"').fetchall()
    if not rows:
        if active_dictionary() is not None:
            use_dictionary(0, b"")
        return
    dict_id = rows[0][0]
    current = active_dictionary()
    if current is not None and current[0] == dict_id:
        return
    data = cur.execute('SELECT "data" FROM "block_dictionaries" WHERE "id" = ?', (dict_id,)).fetchone()[0]
    use_dictionary(dict_id, bytes(data))


def train_for(paths: Sequence[str], total_bytes: int, compression: Compression) -> tuple[int, bytes] | None:
    """A dictionary trained on samples of ``paths`` (in the given order), or ``None`` when too small."""
    if total_bytes < MIN_BYTES or not paths:
        return None
    step = max(len(paths) // SAMPLE_LOGS, 1)
    samples: list[bytes] = []
    budget = min(SAMPLE_TOTAL, max(total_bytes // 8, SAMPLE_TOTAL // 8))  # small roots: less training
    sampled = paths[::step][:SAMPLE_LOGS]
    head = max(SAMPLE_BYTES, budget // len(sampled))  # few long logs: more of each
    read = 0
    for path in sampled:
        text = _head(path, compression, head)
        samples += [text[at : at + SAMPLE_PIECE] for at in range(0, len(text), SAMPLE_PIECE)]
        read += len(text)
        if read >= budget:
            break
    if len(samples) < _MIN_SAMPLES:
        return None
    try:
        return _train_full(samples, dictionary_size(read))
    except zstandard.ZstdError as exc:  # too little variety to train on: plain blocks
        log.info("no block dictionary trained: %s", exc)
        return None


def dictionary_size(sample_bytes: int) -> int:
    """The dictionary size to ask for from ``sample_bytes`` of samples: a power of two, at most :data:`DICTIONARY_BYTES`."""
    size = DICTIONARY_BYTES
    while size > _MIN_DICTIONARY_BYTES and size * SAMPLES_PER_DICTIONARY_BYTE > sample_bytes:
        size //= 2
    return size


def _train_full(samples: list[bytes], size: int) -> tuple[int, bytes]:
    """A dictionary of ``size`` bytes, or of half as many, ... when zstd returns a short one.

    A short dictionary is a sign of too few samples for the size asked for and compresses
    far worse than a full one half its size (see :data:`SAMPLES_PER_DICTIONARY_BYTE`).
    """
    trained = train_dictionary(samples, size)
    while len(trained[1]) < size and size > _MIN_DICTIONARY_BYTES:
        size //= 2
        trained = train_dictionary(samples, size)
    return trained


def _head(path: str, compression: Compression, size: int = SAMPLE_BYTES) -> bytes:
    """Up to ``size`` bytes of a log's plaintext (less if it cannot be read further: only a sample)."""
    pieces: list[bytes] = []
    got = 0
    try:
        with open(path, "rb") as fh:
            if compression is Compression.NONE:
                return fh.read(size)
            reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
            while got < size and (piece := reader.read(size - got)):
                pieces.append(piece)
                got += len(piece)
    except (OSError, zstandard.ZstdError):
        pass  # damage past the start: what was read is still a sample
    return b"".join(pieces)


def store(cur: Any, dictionary: tuple[int, bytes]) -> None:
    """Add ``dictionary`` to the index (inside the caller's transaction) and use it."""
    dict_id, data = dictionary
    cur.execute('INSERT OR IGNORE INTO "block_dictionaries" ("id", "data") VALUES (?, ?)', (dict_id, data))
    register_dictionary(dict_id, data)
    use_dictionary(dict_id, data)
