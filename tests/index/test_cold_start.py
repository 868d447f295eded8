"""A cold build's workers start cheaply and safely, and a streamed log's recording arrives intact.

``indexer.preparation.forked_pool`` forks a cold pass's workers from the
writer when it runs no other thread (else they come from the fork server);
``StreamingCursor`` compresses a long log's raw blocks and sends its chunks on
a thread of its own; ``indexer.storedtexts.stored_text`` remembers the stored
form of texts seen last.  Each must leave the index exactly as before.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer import preparation, storedtexts, streaming
from indexer.layout import Compression
from indexer.streaming import StreamingCursor
from indexer.projection import INSERT_BLOCK
from indexer.storedtexts import sanitize_document, stored_text
from indexer.reconcile import Reconciler
from readmodel.projection.secrets import redact
from readmodel.projection.texthash import text_hash
from readmodel.store.blocks import compress_payload
from tests.index.test_parallel_preparation import assert_workers_end_with_their_writer, build, damaged_root
from tests.indexstate import index_state


_ALONE: Final = "SESSIONQ_TEST_ONE_THREAD"
"""Set in the fresh pytest process :func:`_elsewhere_if_not_alone` starts."""


def _elsewhere_if_not_alone(request: pytest.FixtureRequest) -> bool:
    """Whether the calling test already ran, in a fresh pytest process of one thread.

    Forking needs the test's thread to be the process's only one.  Stop the thread an earlier
    stream left (multiprocessing's descriptor sharer serves for the life of the process); if
    others remain — an earlier test's event-loop portal or worker threads in the full suite —
    run this test alone in a new process, where nothing else has run, and pass when it passes."""
    from multiprocessing import resource_sharer

    resource_sharer.stop()
    if threading.active_count() == 1:
        return False
    assert _ALONE not in os.environ, threading.enumerate()
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
        cwd=repo, env={**os.environ, _ALONE: "1"}, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]
    return True


def _pools(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every pool a reconciler starts during the test, in order."""
    started: list[Any] = []
    real_forked, real_worker_pool = preparation.forked_pool, Reconciler._worker_pool

    def forked(workers: int) -> Any:
        pool = real_forked(workers)
        if pool is not None:
            started.append(pool)
        return pool

    def worker_pool(self: Reconciler) -> Any:
        known = self._pool
        pool = real_worker_pool(self)
        if pool is not known:
            started.append(pool)
        return pool

    monkeypatch.setattr("indexer.reconcile.forked_pool", forked)
    monkeypatch.setattr(Reconciler, "_worker_pool", worker_pool)
    return started


def test_a_cold_pass_forks_its_workers_when_it_runs_no_other_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if _elsewhere_if_not_alone(request):
        return
    damaged_root(tmp_path / "root")
    pools = _pools(monkeypatch)
    _built_as_by_the_writer_alone(tmp_path, pools, "fork")


def test_a_cold_pass_beside_another_thread_starts_its_workers_from_the_fork_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    damaged_root(tmp_path / "root")
    pools = _pools(monkeypatch)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, name="a daemon's watcher, say")
    other.start()
    try:
        _built_as_by_the_writer_alone(tmp_path, pools, "forkserver")
    finally:
        stop.set()
        other.join()


def _built_as_by_the_writer_alone(tmp_path: Path, pools: list[Any], start_method: str, workers: int = 2) -> None:
    """Build ``tmp_path/root`` with workers, then alone: one pool of ``start_method``, equal indexes."""
    report = build(tmp_path / "root", tmp_path / "index.db", Compression.ZSTD, workers=workers)
    assert [pool._mp_context.get_start_method() for pool in pools] == [start_method]  # noqa: SLF001
    assert report.prepared == 5
    build(tmp_path / "root", tmp_path / "alone.db", Compression.ZSTD, workers=0)
    assert index_state(str(tmp_path / "index.db")) == index_state(str(tmp_path / "alone.db"))


def test_a_long_log_streamed_by_forked_workers_lands_as_the_writer_writes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if _elsewhere_if_not_alone(request):
        return
    damaged_root(tmp_path / "root")
    monkeypatch.setattr("indexer.reconcile.PREPARE_MAX_BYTES", 0)  # every log streams
    monkeypatch.setattr(streaming, "STREAM_CHUNK_ROWS", 3)
    pools = _pools(monkeypatch)
    _built_as_by_the_writer_alone(tmp_path, pools, "fork", workers=1)


_FORKING_WRITER = """
import time
from indexer.layout import Compression
from indexer.preparation import Preparer, PrepTask, forked_pool

pool = forked_pool(2)
assert pool is not None and pool._mp_context.get_start_method() == "fork"
preparer = Preparer([PrepTask("/nonexistent/session.jsonl.zstd", 1, {"id": "x"}, True, 1)], Compression.ZSTD, "/", pool)
assert preparer.take("/nonexistent/session.jsonl.zstd").failure[1] == "SESSION_QUERY_SESSION_NOT_FOUND"
print(" ".join(str(pid) for pid in pool._processes), flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from /proc")
def test_forked_workers_end_when_the_writer_is_killed() -> None:
    assert_workers_end_with_their_writer(_FORKING_WRITER)


class _Connection:
    """A connection that keeps what is sent (slowly, as a busy writer takes it), or fails;
    a message arrives as a pipe carries it (pickled and read back)."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.sent: list[Any] = []
        self.fail_after = fail_after

    def send(self, message: Any) -> None:
        if self.fail_after is not None and len(self.sent) >= self.fail_after:
            raise BrokenPipeError("the writer stopped listening")
        time.sleep(0.002)
        self.sent.append(pickle.loads(ForkingPickler.dumps(message)))


def test_a_streamed_recording_arrives_in_order_with_its_blocks_compressed() -> None:
    connection = _Connection()
    cursor = StreamingCursor(connection, chunk_rows=3)
    expected: list[tuple[Any, Any, bool]] = []
    for index in range(20):
        payload = b'{"seq":%d}\n' % index * (index + 1)
        cursor.execute('INSERT INTO "t" VALUES (?)', (index,))
        cursor.insert_block((1, index, index + 1, 0), payload)
        expected += [('INSERT INTO "t" VALUES (?)', (index,), False), (INSERT_BLOCK, (1, index, index + 1, 0, bytearray(compress_payload(payload))), False)]
    cursor.send()
    cursor.post(("failed", ("corrupt", "CODE", "after every chunk")))
    cursor.finish()
    *chunks, last = connection.sent
    assert last == ("failed", ("corrupt", "CODE", "after every chunk"))
    assert all(kind == "calls" and 0 < len(calls) <= 3 for kind, calls in chunks)
    assert [call for _, calls in chunks for call in calls] == expected
    assert not cursor._outbox._thread.is_alive()  # noqa: SLF001


def test_a_streamed_chunk_goes_once_its_uncompressed_blocks_reach_their_bound() -> None:
    connection = _Connection()
    cursor = StreamingCursor(connection, chunk_rows=1_000_000)
    payload = b"x" * (streaming.CHUNK_PAYLOAD_BYTES // 2 + 1)
    for index in range(6):
        cursor.insert_block((1, index, 1, 0), payload)
    cursor.finish()
    assert [len(calls) for _, calls in connection.sent] == [2, 2, 2]  # memory: a few MB per chunk, compressed or not


def test_a_stream_whose_writer_stops_listening_fails_in_the_workers_thread() -> None:
    cursor = StreamingCursor(_Connection(fail_after=1), chunk_rows=1)
    with pytest.raises(BrokenPipeError):
        for index in range(1000):
            cursor.execute('INSERT INTO "t" VALUES (?)', (index,))
    with pytest.raises(BrokenPipeError):
        cursor.finish()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=40),
            st.sampled_from(["AKIAIOSFODNN7EXAMPLE in a log", "password=hunter2hunter2 ok", "x\x00y\ufdd0z", "lone \ud800 surrogate"]),
        ),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
)
def test_a_stored_text_is_the_same_remembered_or_derived(texts: list[str], redact_documents: bool) -> None:
    for text in texts + texts:  # every text seen twice: the second time from the cache
        derived = sanitize_document(text)
        if redact_documents:
            derived = redact(derived)
        assert stored_text(text, redact_documents) == (derived, text_hash(derived))


def test_the_stored_texts_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = storedtexts._stored_texts[True]  # noqa: SLF001
    for index in range(2000):
        stored_text(f"{index:08d}" * 2000, True)
    assert cache.size <= storedtexts.STORED_TEXTS_CHARS
    huge = "y" * (storedtexts.STORED_TEXTS_CHARS // 32)
    assert stored_text(huge, True) == (huge, text_hash(huge))
    assert cache.get(huge, True) is None  # too large to keep: it would push out everything else


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["AKIAIOSFODNN7EXAMPLE key", "x\x00y\ufdd0z", "lone \ud800 surrogate", "plain words ", "\u00e9t\u00e9 \U0001f600 "]),
            st.integers(min_value=0, max_value=3),
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_a_long_stored_text_is_the_same_remembered_or_derived(pieces: list[tuple[str, int]], redact_documents: bool) -> None:
    # Texts over LONG_TEXT_CHARS go to a cache of their own; the pieces make a few distinct ones.
    filler = "y" * (storedtexts.LONG_TEXT_CHARS + 1)
    texts = [f"{piece}{index}{filler}" for piece, index in pieces]
    for text in texts + texts:  # every text seen twice: the second time from the cache
        derived = sanitize_document(text)
        if redact_documents:
            derived = redact(derived)
        assert stored_text(text, redact_documents) == (derived, text_hash(derived))


def test_long_texts_are_remembered_within_their_own_bound() -> None:
    cache = storedtexts._long_texts[True]  # noqa: SLF001
    long_text = "z" * (storedtexts.LONG_TEXT_CHARS + 10)
    assert stored_text(long_text, True) == (long_text, text_hash(long_text))
    assert cache.get(long_text, True) is not None  # remembered: the next copy costs a comparison
    short = storedtexts._stored_texts[True]  # noqa: SLF001
    assert short.get(long_text, True) is None  # and it pushed out no short text
    for index in range(200):
        stored_text(f"{index:08d}" * (storedtexts.LONG_TEXT_CHARS // 8 + 1), True)
    assert cache.size <= storedtexts.LONG_TEXTS_BYTES
    too_large = "w" * (storedtexts.LONG_TEXTS_BYTES // 2)
    assert stored_text(too_large, True) == (too_large, text_hash(too_large))
    assert cache.get(too_large, True) is None


def test_a_pass_begun_before_its_index_existed_builds_the_same_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if _elsewhere_if_not_alone(request):
        return
    from indexer import dictionary as block_dictionary
    from indexer.coldstart import ColdStart
    from readmodel.store.database import open_writer

    damaged_root(tmp_path / "root")
    monkeypatch.setattr(block_dictionary, "MIN_BYTES", 0)  # a dictionary is trained even for this small root
    pools = _pools(monkeypatch)
    begun = ColdStart(tmp_path / "root", Compression.ZSTD, 2)
    assert begun.pool is not None
    engine = open_writer(str(tmp_path / "index.db"))  # the schema, created while the training runs
    try:
        reconciler = Reconciler(engine, tmp_path / "root", Compression.ZSTD, settle_seconds=0, workers=2, parallel_min_bytes=0, cold_start=begun)
        report = reconciler.reconcile()
    finally:
        engine.dispose()
        begun.close()
    assert pools == [] and begun.pool is None  # the begun workers were taken, none started anew
    assert report.prepared == 5
    build(tmp_path / "root", tmp_path / "alone.db", Compression.ZSTD, workers=0)
    assert index_state(str(tmp_path / "index.db")) == index_state(str(tmp_path / "alone.db"))
    dictionaries = [_dictionaries(tmp_path / name) for name in ("index.db", "alone.db")]
    assert dictionaries[0] == dictionaries[1] and len(dictionaries[0]) == 1  # trained alike, on the same samples


def _dictionaries(db: Path) -> list[tuple[int, bytes]]:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return conn.execute('SELECT "id", "data" FROM "block_dictionaries"').fetchall()
    finally:
        conn.close()


def test_what_was_begun_for_another_index_is_closed_and_ignored(tmp_path: Path) -> None:
    from indexer.coldstart import ColdStart
    from readmodel.store.database import open_writer

    damaged_root(tmp_path / "root")
    build(tmp_path / "root", tmp_path / "index.db", Compression.ZSTD, workers=0)
    before = index_state(str(tmp_path / "index.db"))
    begun = ColdStart(tmp_path / "root", Compression.ZSTD, 2)
    engine = open_writer(str(tmp_path / "index.db"))
    try:
        report = Reconciler(engine, tmp_path / "root", Compression.ZSTD, settle_seconds=0, workers=2, cold_start=begun).reconcile()
    finally:
        engine.dispose()
    assert begun.pool is None  # not cold: closed, not used
    assert report.changed == 0
    assert index_state(str(tmp_path / "index.db")) == before
