"""Raw blocks compressed with the index's zstd dictionary (schema 0011, issue 21).

A cold build of a large root trains a dictionary before preparing anything;
the writer and the workers compress every block with it; readers in any
process load it from the index; the events read back are the ones a build
without a dictionary stores, and later passes (appends reopening a tail
block) keep using it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import zstandard

from indexer import dictionary as block_dictionary
from indexer.layout import Compression
from indexer.reconcile import Reconciler
from indexer.writer import LogWriter
from readmodel.store import blocks
from readmodel.store.database import open_writer
from readmodel.store.sqlite import SqliteIndexReader
from tests.corpus import ZSTD_ROOT, require_corpus
from tests.indexstate import diff_states, index_state


@pytest.fixture
def small_roots_train(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared corpus (2 MB) counts as large: a dictionary is trained for it."""
    monkeypatch.setattr(block_dictionary, "MIN_BYTES", 1)
    monkeypatch.setattr(block_dictionary, "SAMPLE_PIECE", 1024)
    yield
    blocks.use_dictionary(0, b"")


def build(root: Path, db: Path, *, workers: int = 0) -> None:
    engine = open_writer(str(db))
    try:
        Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, workers=workers, parallel_min_bytes=0).reconcile()
    finally:
        engine.dispose()


def block_facts(db: Path) -> tuple[list[int], list[int], int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        dicts = [row[0] for row in conn.execute('SELECT "id" FROM "block_dictionaries"')]
        data = [row[0] for row in conn.execute('SELECT "data" FROM "event_blocks"')]
        return dicts, sorted({blocks.frame_dictionary(block) for block in data}), sum(map(len, data))
    finally:
        conn.close()


def raw_events(db: Path) -> dict[str, list[Any]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        reader = SqliteIndexReader(conn.cursor())
        return {sid_id: reader.raw_all(sid) for sid_id, sid in conn.execute('SELECT "id", "sid" FROM "sessions"')}
    finally:
        conn.close()


def forget_dictionaries() -> None:
    """This process as a fresh reader: no dictionary registered, none in use, no cached contexts."""
    blocks.use_dictionary(0, b"")
    blocks._dictionaries.clear()
    blocks._contexts.decompressors.clear()
    blocks._contexts.compressors.clear()


def test_a_cold_build_compresses_every_block_with_its_trained_dictionary(tmp_path: Path, small_roots_train: None) -> None:
    require_corpus()
    build(ZSTD_ROOT, tmp_path / "dict.db")
    blocks.use_dictionary(0, b"")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(block_dictionary, "MIN_BYTES", 1 << 40)
        build(ZSTD_ROOT, tmp_path / "plain.db")
    dicts, named, size = block_facts(tmp_path / "dict.db")
    plain_dicts, plain_named, plain_size = block_facts(tmp_path / "plain.db")
    assert len(dicts) == 1 and named == dicts and plain_dicts == [] and plain_named == [0]
    assert size < plain_size * 0.8
    forget_dictionaries()  # the reader loads it from the index
    assert raw_events(tmp_path / "dict.db") == raw_events(tmp_path / "plain.db")
    assert diff_states(index_state(str(tmp_path / "dict.db")), index_state(str(tmp_path / "plain.db"))) == []


def test_training_is_deterministic_and_workers_use_the_writers_dictionary(tmp_path: Path, small_roots_train: None) -> None:
    require_corpus()
    build(ZSTD_ROOT, tmp_path / "alone.db", workers=0)
    forget_dictionaries()
    build(ZSTD_ROOT, tmp_path / "helped.db", workers=2)
    alone, helped = block_facts(tmp_path / "alone.db"), block_facts(tmp_path / "helped.db")
    assert alone == helped and alone[0]
    assert diff_states(index_state(str(tmp_path / "alone.db")), index_state(str(tmp_path / "helped.db"))) == []


def test_appends_after_the_cold_build_reopen_tail_blocks_with_the_dictionary(tmp_path: Path, small_roots_train: None) -> None:
    require_corpus()
    root = tmp_path / "root"
    shutil.copytree(ZSTD_ROOT, root)
    build(root, tmp_path / "index.db")
    dict_id = block_facts(tmp_path / "index.db")[0][0]
    forget_dictionaries()  # the next pass (a new daemon) loads it from the index
    log = sorted(root.glob("*/*/session.jsonl.zstd"))[0]
    first_line = zstandard.ZstdDecompressor().stream_reader(log.read_bytes(), read_across_frames=True).read(1 << 16).split(b"\n", 1)[0]
    session_header = json.loads(first_line)
    conn = sqlite3.connect(f"file:{tmp_path / 'index.db'}?mode=ro", uri=True)
    count = conn.execute('SELECT "event_count" FROM "sessions" WHERE "id" = ?', (session_header["id"],)).fetchone()[0]
    conn.close()
    text = [{"type": "text", "text": "a late word"}]
    event = {"type": "user/message", "seq": count, "time": 1_900_000_000_000, "data": {"id": "late", "role": "user", "content": text, "source": {"kind": "user"}}, "surfaceOp": "append"}
    LogWriter.in_root(root, session_header).append([event])
    build(root, tmp_path / "index.db")
    assert block_facts(tmp_path / "index.db")[1] == [dict_id]
    forget_dictionaries()
    build(root, tmp_path / "cold.db")
    assert diff_states(index_state(str(tmp_path / "index.db")), index_state(str(tmp_path / "cold.db"))) == []


def test_readers_on_many_threads_load_the_dictionary_once_each(tmp_path: Path, small_roots_train: None) -> None:
    require_corpus()
    build(ZSTD_ROOT, tmp_path / "index.db")
    expected = raw_events(tmp_path / "index.db")
    forget_dictionaries()
    results: list[bool] = []

    def read() -> None:
        results.append(raw_events(tmp_path / "index.db") == expected)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 4


def test_a_fresh_readers_first_read_spanning_blocks_loads_the_dictionary_and_returns_every_block(tmp_path: Path, small_roots_train: None) -> None:
    """Loading the dictionary mid-read must not end the loop over the remaining blocks."""
    require_corpus()
    build(ZSTD_ROOT, tmp_path / "index.db")
    expected = raw_events(tmp_path / "index.db")
    conn = sqlite3.connect(f"file:{tmp_path / 'index.db'}?mode=ro", uri=True)
    try:
        sid, session_id, count = conn.execute(
            'SELECT "sid", "id", "event_count" FROM "sessions" WHERE "sid" IN '
            '(SELECT "sid" FROM "event_blocks" GROUP BY "sid" HAVING count(*) > 1) ORDER BY "sid" LIMIT 1'
        ).fetchone()
        assert len(expected[session_id]) == count > 1
        forget_dictionaries()
        assert SqliteIndexReader(conn.cursor()).raw_range(sid, 0, count - 1) == expected[session_id]
        forget_dictionaries()
        assert SqliteIndexReader(conn.cursor()).raw_all(sid) == expected[session_id]
    finally:
        conn.close()


def test_a_plain_jsonl_root_trains_from_its_text_too(tmp_path: Path, small_roots_train: None) -> None:
    from tests.corpus import RAW_ROOT

    require_corpus()
    engine = open_writer(str(tmp_path / "raw.db"))
    try:
        Reconciler(engine, RAW_ROOT, Compression.NONE, settle_seconds=0, workers=0).reconcile()
    finally:
        engine.dispose()
    blocks.use_dictionary(0, b"")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(block_dictionary, "MIN_BYTES", 1 << 40)
        engine = open_writer(str(tmp_path / "plain.db"))
        try:
            Reconciler(engine, RAW_ROOT, Compression.NONE, settle_seconds=0, workers=0).reconcile()
        finally:
            engine.dispose()
    dicts, named, _size = block_facts(tmp_path / "raw.db")
    assert len(dicts) == 1 and named == dicts
    forget_dictionaries()
    assert raw_events(tmp_path / "raw.db") == raw_events(tmp_path / "plain.db")


def test_the_dictionary_asked_for_shrinks_with_the_samples() -> None:
    assert block_dictionary.dictionary_size(16 << 20) == block_dictionary.DICTIONARY_BYTES == 256 << 10
    assert block_dictionary.dictionary_size(8 << 20) == 256 << 10  # roots of 64 MB and more: unchanged
    assert block_dictionary.dictionary_size(2 << 20) == 64 << 10
    assert block_dictionary.dictionary_size(1000) == 16 << 10  # never below the floor


def test_a_short_trained_dictionary_is_retrained_at_half_the_size(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def trainer(samples: list[bytes], size: int) -> tuple[int, bytes]:
        asked.append(size)
        return size, bytes(size if size <= 32 << 10 else size // 3)  # too few samples for more than 32 KiB

    monkeypatch.setattr(block_dictionary, "train_dictionary", trainer)
    assert block_dictionary._train_full([b"x"], 128 << 10) == (32 << 10, bytes(32 << 10))
    assert asked == [128 << 10, 64 << 10, 32 << 10]


def test_a_small_root_trains_a_full_dictionary_of_the_size_its_samples_allow() -> None:
    """Samples too few for 256 KiB: the dictionary is smaller and full (not zstd's short, poor one)."""
    require_corpus()
    paths = sorted(str(path) for path in ZSTD_ROOT.glob("*/*/session.jsonl.zstd"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(block_dictionary, "MIN_BYTES", 1)
        patch.setattr(block_dictionary, "SAMPLE_PIECE", 1024)
        patch.setattr(block_dictionary, "SAMPLE_TOTAL", 1 << 20)
        trained = block_dictionary.train_for(paths, 8 << 20, Compression.ZSTD)
    assert trained is not None
    assert len(trained[1]) in {16 << 10, 32 << 10}  # 1 MiB of samples: 32 KiB asked for, full or retrained at half


def test_small_samples_train_with_a_small_frequency_table_and_larger_ones_with_zstds_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only roots under ≈ 32 MB (samples under 4 MiB) get another dictionary: the larger roots' stay as they were."""
    assert blocks.training_frequency_log(blocks.SMALL_TRAINING_BYTES - 1) == blocks.SMALL_TRAINING_FREQUENCY_LOG == 17
    assert blocks.training_frequency_log(blocks.SMALL_TRAINING_BYTES) == 0  # zstd's default (20)
    asked: list[int] = []
    real = zstandard.train_dictionary

    def trainer(size: int, samples: list[bytes], **params: Any) -> Any:
        asked.append(params["f"])
        return real(size, samples, **params)

    monkeypatch.setattr(zstandard, "train_dictionary", trainer)
    small = blocks.train_dictionary(_log_like_samples(0), 16 * 1024)
    assert asked == [17] and blocks.train_dictionary(_log_like_samples(0), 16 * 1024) == small  # still deterministic
    monkeypatch.setattr(blocks, "SMALL_TRAINING_BYTES", 1)
    blocks.train_dictionary(_log_like_samples(0), 16 * 1024)
    assert asked[-1] == 0


def _log_like_samples(salt: int) -> list[bytes]:
    """Samples resembling log heads: repeated headers with varying ids and texts."""
    header = b'{"type":"session","tools":[' + b",".join(b'{"name":"tool%d","schema":{"type":"object"}}' % i for i in range(40)) + b"]}"
    return [
        header + b"\n" + b"\n".join(b'{"seq":%d,"type":"user/message","text":"word %d of %d"}' % (seq, (seq * 7919 + salt) % 1009, n) for seq in range(30))
        for n in range(600)
    ]


def test_a_trained_dictionary_carries_an_id_derived_from_all_its_bytes() -> None:
    dict_id, data = blocks.train_dictionary(_log_like_samples(0), 16 * 1024)
    again = blocks.train_dictionary(_log_like_samples(0), 16 * 1024)
    other_id, other = blocks.train_dictionary(_log_like_samples(1), 16 * 1024)
    assert again == (dict_id, data)  # deterministic
    assert 32768 <= dict_id < 1 << 31  # zstd's range for unregistered dictionaries
    assert zstandard.ZstdCompressionDict(data).dict_id() == dict_id
    frame = zstandard.ZstdCompressor(level=3, dict_data=zstandard.ZstdCompressionDict(data)).compress(_log_like_samples(2)[0])
    assert blocks.frame_dictionary(frame) == dict_id
    assert zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(data)).decompress(frame) == _log_like_samples(2)[0]
    assert other != data and other_id != dict_id
