"""Sessions prepared in worker processes land in the index exactly as the writer would write them.

The reconciler hands sessions new to the index to preparation workers, which
record the writes and the writer replays them (``indexer/preparation.py``).
These tests hold a build with workers equal, row for row, to a build by the
writer alone, on the shared corpus and on damaged roots, and show that a
failing worker costs nothing but time.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest

from indexer import preparation, streaming
from indexer.layout import Compression
from indexer.preparation import PrepTask, Preparer, RecordingCursor, prepare_chunk
from indexer.reconcile import ReconcileReport, Reconciler
from readmodel.store.database import open_writer
from tests.corpus import RAW_ROOT, REPO, SYNTHETIC_ROOT, ZSTD_ROOT, require_corpus
from tests.index.test_incremental_equals_cold import World
from tests.indexstate import fts_consistent, index_state
from tests.logfactory import assistant, ev, frame, header, header_bytes, line, simple_turn, user, write_log


def build(root: Path, db: Path, compression: Compression, *, workers: int, settle: float = 0) -> ReconcileReport:
    engine = open_writer(str(db))
    try:
        return Reconciler(engine, root, compression, settle_seconds=settle, workers=workers, parallel_min_bytes=0).reconcile()
    finally:
        engine.dispose()


def damaged_root(root: Path) -> int:
    """A root of good, bad and odd logs; returns how many sessions it holds."""
    write_log(root, header("good"), [simple_turn(), simple_turn(9, "a second turn")])
    corrupt = write_log(root, header("corrupt"), [simple_turn()[:4], simple_turn()[4:], simple_turn(9)])
    data = bytearray(corrupt.read_bytes())
    data[len(frame(header_bytes(header("corrupt")))) + 40] ^= 0x55  # inside the first event frame
    corrupt.write_bytes(bytes(data))
    future = write_log(root, header("future"), [simple_turn()])
    with open(future, "ab") as fh:
        fh.write(frame(line({"type": "future/kind", "seq": 9, "time": 1, "data": {}})))
    second = simple_turn(9, "cut short")
    torn = write_log(root, header("torn"), [simple_turn(), second[:4], second[4:]])  # the cut leaves a turn open
    torn.write_bytes(torn.read_bytes()[:-7])
    # A compaction: the replacement shadows two earlier nodes, one of them flushed long before.
    events = [user(0, "first question"), assistant(1, "first answer")]
    events += [ev("assistant/chunk", seq, {"text": "x"}) for seq in range(2, 5000)]
    events.append(user(5000, "summary of the above", surface_op={"op": "replace", "start": 0, "end": 1}, sources=[0, 1]))
    write_log(root, header("compacted"), [events[:2], events[2:4000], events[4000:]])
    (corrupt.parent.parent / "stray.jsonl.zstd").write_bytes(b"")  # a layout problem
    return 5


@pytest.mark.parametrize(
    ("root", "compression"),
    [(ZSTD_ROOT, Compression.ZSTD), (SYNTHETIC_ROOT, Compression.ZSTD), (RAW_ROOT, Compression.NONE)],
    ids=["zstd-root", "synthetic", "raw-root"],
)
def test_a_build_with_preparation_workers_equals_one_by_the_writer_alone(tmp_path: Path, root: Path, compression: Compression) -> None:
    require_corpus()
    alone = build(root, tmp_path / "alone.db", compression, workers=0)
    helped = build(root, tmp_path / "helped.db", compression, workers=2)
    assert alone.prepared == 0 and helped.prepared == helped.scanned > 0
    assert (helped.events, helped.failed) == (alone.events, alone.failed)
    assert index_state(str(tmp_path / "helped.db")) == index_state(str(tmp_path / "alone.db"))


@pytest.mark.parametrize("settle", [0, 3600], ids=["settled-tails", "held-tails"])
def test_bad_logs_torn_tails_and_replacements_prepare_like_the_writer_writes_them(tmp_path: Path, settle: float) -> None:
    sessions = damaged_root(tmp_path / "root")
    alone = build(tmp_path / "root", tmp_path / "alone.db", Compression.ZSTD, workers=0, settle=settle)
    helped = build(tmp_path / "root", tmp_path / "helped.db", Compression.ZSTD, workers=2, settle=settle)
    assert helped.prepared == sessions and helped.failed == alone.failed == 2
    assert helped.held == alone.held == (1 if settle else 0)
    state = index_state(str(tmp_path / "helped.db"))
    assert state == index_state(str(tmp_path / "alone.db"))
    assert {sid: row["status"] for sid, row in state["sessions"].items()} == {
        "good": "ok", "torn": "ok", "compacted": "ok", "corrupt": "corrupt", "future": "unsupported",
    }  # fmt: skip


def test_a_prepared_session_resumes_like_any_other(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    world = World(tmp_path / "root")
    for sid in ("alpha", "beta"):
        for _ in range(3):
            world.append(sid, torn=0)
    db = tmp_path / "live.db"
    engine = open_writer(str(db))
    first = Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=0, workers=2, parallel_min_bytes=0).reconcile()
    assert first.prepared == 2
    world.finish_torn()
    world.append("alpha", torn=0)
    world.append("beta", torn=0)
    later = Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=0, workers=2, parallel_min_bytes=0).reconcile()
    engine.dispose()
    assert later.prepared == 0 and later.appended == 2  # stored sessions are the writer's to continue
    build(world.root, tmp_path / "cold.db", Compression.ZSTD, workers=0)
    assert index_state(str(db)) == index_state(str(tmp_path / "cold.db"))


def test_a_listing_by_the_workers_finds_what_the_writer_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    damaged_root(root)
    misplaced = write_log(root, header("elsewhere"), [simple_turn()])
    target = misplaced.parent.parent / "not-its-dir" / "session.jsonl.zstd"
    target.parent.mkdir()
    misplaced.rename(target)  # an identity problem
    alone = build(root, tmp_path / "alone.db", Compression.ZSTD, workers=0)
    monkeypatch.setattr("indexer.reconcile.PARALLEL_LISTING", 1)
    monkeypatch.setattr("indexer.reconcile.LISTING_CHUNK", 2)
    helped = build(root, tmp_path / "helped.db", Compression.ZSTD, workers=2)
    assert helped.problems == alone.problems == 2 and helped.prepared == 5
    state = index_state(str(tmp_path / "helped.db"))
    assert state == index_state(str(tmp_path / "alone.db"))
    assert sorted(kind for _, kind, _ in state["layout_problems"]) == ["flat-file", "identity"]


def test_small_passes_and_large_logs_stay_with_the_writer(tmp_path: Path) -> None:
    damaged_root(tmp_path / "root")
    engine = open_writer(str(tmp_path / "index.db"))
    report = Reconciler(engine, tmp_path / "root", Compression.ZSTD, settle_seconds=0, workers=2).reconcile()  # default threshold
    engine.dispose()
    assert report.prepared == 0 and report.reloaded == 5 - report.failed


@pytest.mark.parametrize("settle", [0, 3600], ids=["settled-tails", "held-tails"])
def test_long_logs_stream_from_a_worker_in_chunks_and_land_as_the_writer_writes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settle: float) -> None:
    damaged_root(tmp_path / "root")
    # Every log is "long": each streams from a worker, in chunks of a few rows.
    monkeypatch.setattr("indexer.reconcile.PREPARE_MAX_BYTES", 0)
    monkeypatch.setattr(streaming, "STREAM_CHUNK_ROWS", 7)
    report = build(tmp_path / "root", tmp_path / "index.db", Compression.ZSTD, workers=2, settle=settle)
    alone = build(tmp_path / "root", tmp_path / "alone.db", Compression.ZSTD, workers=0, settle=settle)
    assert report.prepared == 5 and (report.failed, report.held, report.events) == (alone.failed, alone.held, alone.events)
    assert index_state(str(tmp_path / "index.db")) == index_state(str(tmp_path / "alone.db"))


def kill_after_first_chunk(monkeypatch: pytest.MonkeyPatch, victims: Callable[[list[int]], list[int]]) -> list[int]:
    """SIGKILL the workers ``victims`` picks from the pool's sorted pids once the writer has
    replayed its first streamed chunk; returns the sizes of the chunks replayed."""
    real_replay = preparation.replay
    replayed: list[int] = []
    pool_of: list[Any] = []
    real_pool = Reconciler._worker_pool

    def replay_then_kill(cur: Any, calls: Any, fts: Any) -> None:
        real_replay(cur, calls, fts)
        replayed.append(len(calls))
        if len(replayed) == 1:
            for pid in victims(sorted(process.pid for process in pool_of[0]._processes.values())):  # noqa: SLF001 - the test's sabotage
                os.kill(pid, signal.SIGKILL)

    def remember_pool(self: Reconciler) -> Any:
        pool = real_pool(self)
        pool_of[:] = [pool]
        return pool

    monkeypatch.setattr("indexer.reconcile.replay", replay_then_kill)
    monkeypatch.setattr(Reconciler, "_worker_pool", remember_pool)
    return replayed


def test_a_streaming_worker_that_dies_hands_its_log_back_to_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    damaged_root(tmp_path / "root")
    monkeypatch.setattr("indexer.reconcile.PREPARE_MAX_BYTES", 0)
    monkeypatch.setattr(streaming, "STREAM_CHUNK_ROWS", 7)
    # After the compacted log's first chunk, its worker dies mid-stream.
    replayed = kill_after_first_chunk(monkeypatch, lambda pids: pids)
    with caplog.at_level(logging.WARNING, logger="sessionq.indexer"):
        report = build(tmp_path / "root", tmp_path / "index.db", Compression.ZSTD, workers=1)
    assert replayed and "ingesting it in the writer" in caplog.text
    assert report.reloaded + report.failed == 5 and report.prepared < 5
    build(tmp_path / "root", tmp_path / "alone.db", Compression.ZSTD, workers=0)
    assert index_state(str(tmp_path / "index.db")) == index_state(str(tmp_path / "alone.db"))


def test_a_dead_worker_hands_its_sessions_back_to_the_writer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    damaged_root(tmp_path / "root")
    engine = open_writer(str(tmp_path / "index.db"))
    reconciler = Reconciler(engine, tmp_path / "root", Compression.ZSTD, settle_seconds=0, workers=1, parallel_min_bytes=0)
    real_start = Reconciler._start_preparer

    def start_then_kill(self: Reconciler, *args: Any) -> Preparer | None:
        preparer = real_start(self, *args)
        assert preparer is not None
        for process in list(preparer._pool._processes.values()):  # noqa: SLF001 - the test's sabotage
            os.kill(process.pid, signal.SIGKILL)
        return preparer

    Reconciler._start_preparer = start_then_kill  # type: ignore[method-assign]
    try:
        with caplog.at_level(logging.WARNING, logger="sessionq.indexer"):
            report = reconciler.reconcile()
    finally:
        Reconciler._start_preparer = real_start  # type: ignore[method-assign]
        engine.dispose()
    assert report.prepared == 0 and report.reloaded + report.failed == 5
    assert "the writer ingests those sessions itself" in caplog.text
    assert "BrokenProcessPool" in caplog.text and "worker exit codes -9" in caplog.text  # why it broke: SIGKILL
    build(tmp_path / "root", tmp_path / "alone.db", Compression.ZSTD, workers=0)
    assert index_state(str(tmp_path / "index.db")) == index_state(str(tmp_path / "alone.db"))


def test_an_unexpected_error_in_a_worker_is_redone_by_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_log(tmp_path / "root", header("good"), [simple_turn()])

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(preparation, "ingest_log", broken)
    answer = prepare_chunk([PrepTask(str(path), 7, header("good"), True, path.stat().st_size)], "zstd", str(tmp_path / "root"))
    assert [(p.sid, p.crashed, p.outcome) for p in answer.sessions] == [(7, "RuntimeError: a bug", None)]


def test_a_bad_log_comes_back_as_its_failure_not_an_exception(tmp_path: Path) -> None:
    path = write_log(tmp_path / "root", header("future"), [simple_turn()])
    with open(path, "ab") as fh:
        fh.write(frame(line({"type": "future/kind", "seq": 9, "time": 1, "data": {}})))
    answer = prepare_chunk([PrepTask(str(path), 3, header("future"), True, path.stat().st_size)], "zstd", str(tmp_path / "root"))
    (prepared,) = answer.sessions
    assert prepared.outcome is None and prepared.calls == []
    status, code, message = prepared.failure or ("", "", "")
    assert (status, code) == ("unsupported", "SESSION_QUERY_PERSISTENCE_FAILED") and "future/kind" in message


def test_a_recording_reads_no_rows_and_keeps_call_order() -> None:
    cursor = RecordingCursor()
    assert cursor.execute('SELECT "surface_key" FROM "events" WHERE "sid" = ?', (1,)).fetchone() is None
    cursor.execute('INSERT INTO "t" VALUES (?)', (1,))
    cursor.executemany('INSERT INTO "t" VALUES (?)', iter([(2,), (3,)]))
    docs = [[5, 0, 5, "user/message", 1, 1, 4, "text", 7]]
    cursor.insert_documents(docs, None)  # documents: stored by the writer when it replays them
    assert cursor.calls == [
        ('INSERT INTO "t" VALUES (?)', (1,), False),
        ('INSERT INTO "t" VALUES (?)', [(2,), (3,)], True),
        (None, docs, True),
    ]


_WRITER_SCRIPT = """
import sys, time
from indexer.layout import Compression
from indexer.preparation import Preparer, PrepTask, start_pool

preparer = Preparer([PrepTask("/nonexistent/session.jsonl.zstd", 1, {"id": "x"}, True, 1)], Compression.ZSTD, "/", start_pool(2))
assert preparer.take("/nonexistent/session.jsonl.zstd").failure[1] == "SESSION_QUERY_SESSION_NOT_FOUND"
print(" ".join(str(pid) for pid in preparer._pool._processes), flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has ended
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from /proc")
def test_workers_end_when_the_writer_is_killed() -> None:
    assert_workers_end_with_their_writer(_WRITER_SCRIPT)


def assert_workers_end_with_their_writer(script: str) -> None:
    """Run ``script`` (it prints its workers' pids, then waits), SIGKILL it, and see every worker end."""
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    try:
        assert writer.stdout is not None
        pids = [int(pid) for pid in writer.stdout.readline().split()]
        assert pids and not any(_gone(pid) for pid in pids)
    finally:
        writer.kill()
        writer.wait(10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(_gone(pid) for pid in pids):
        time.sleep(0.05)
    assert all(_gone(pid) for pid in pids), "preparation workers outlived their writer"


def test_the_daemons_pass_log_says_what_the_workers_prepared() -> None:
    from indexer.daemon import _fields

    assert "prepared" not in _fields("full", ReconcileReport(reloaded=3))
    fields = _fields("full", ReconcileReport(reloaded=3, prepared=3, worker_cpu_seconds=1.234))
    assert (fields["prepared"], fields["worker_cpu_s"]) == (3, 1.23)


def test_a_parallel_pass_pauses_the_garbage_collector_and_restores_it_however_it_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    import indexer.reconcile as reconcile

    for name in ("a", "b", "c"):
        write_log(tmp_path / "root", header(name), [simple_turn()])
    seen: list[bool] = []
    real_replay = reconcile.replay

    def replay_and_look(*args: Any) -> None:
        seen.append(gc.isenabled())
        real_replay(*args)

    monkeypatch.setattr(reconcile, "replay", replay_and_look)
    assert gc.isenabled()
    report = build(tmp_path / "root", tmp_path / "index.db", Compression.ZSTD, workers=1)
    assert report.prepared == 3 and seen == [False, False, False]
    assert gc.isenabled()

    def fail(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(reconcile, "replay", fail)
    with pytest.raises(KeyboardInterrupt):
        build(tmp_path / "root", tmp_path / "again.db", Compression.ZSTD, workers=1)
    assert gc.isenabled()
    gc.disable()  # a caller's choice is kept
    try:
        build(tmp_path / "root", tmp_path / "third.db", Compression.ZSTD, workers=0)
        monkeypatch.setattr(reconcile, "replay", real_replay)
        build(tmp_path / "root", tmp_path / "fourth.db", Compression.ZSTD, workers=1)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_worker_prepares_a_chunk_with_the_collector_paused_and_restores_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    path = write_log(tmp_path / "root", header("good"), [simple_turn()])
    seen: list[bool] = []
    real_ingest = preparation.ingest_log

    def ingest_and_look(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real_ingest(*args, **kwargs)

    monkeypatch.setattr(preparation, "ingest_log", ingest_and_look)
    answer = prepare_chunk([PrepTask(str(path), 1, header("good"), True, path.stat().st_size)], "zstd", str(tmp_path / "root"))
    assert answer.sessions[0].outcome is not None and seen == [False] and gc.isenabled()


@pytest.mark.parametrize("group", [64, 1], ids=["in-a-group", "alone"])
def test_a_prepared_session_failing_in_its_group_fails_alone_and_its_group_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group: int) -> None:
    """Prepared sessions share a savepoint; one the database refuses halfway fails as it would alone."""
    import sqlite3

    from indexer import reconcile

    require_corpus()
    alone = build(ZSTD_ROOT, tmp_path / "alone.db", Compression.ZSTD, workers=0)
    real_replay = reconcile.replay
    refused: list[int] = []

    def refusing(cur: Any, calls: Any, fts: Any) -> None:
        sids = {args[0] for sql, args, many in calls if sql is not None and not many and sql.startswith('INSERT INTO "event')}
        sids |= {rows[0][0] for sql, rows, many in calls if sql is not None and many and rows and sql.startswith('INSERT INTO "event')}
        if 10 in sids:  # the tenth new session: rows written, then refused
            real_replay(cur, calls[: len(calls) // 2], fts)
            refused.append(10)
            raise sqlite3.DataError("a value the database refuses")
        real_replay(cur, calls, fts)

    monkeypatch.setattr(reconcile, "replay", refusing)
    monkeypatch.setattr(reconcile, "GROUP_SESSIONS", group)
    helped = build(ZSTD_ROOT, tmp_path / "helped.db", Compression.ZSTD, workers=2)
    assert refused and helped.prepared == helped.scanned == alone.scanned
    assert helped.failed == alone.failed + 1
    state, reference = index_state(str(tmp_path / "helped.db")), index_state(str(tmp_path / "alone.db"))
    failed = [session_id for session_id, row in state["sessions"].items() if row["status"] != reference["sessions"][session_id]["status"]]
    assert len(failed) == 1
    assert _without(state, failed[0]) == _without(reference, failed[0])  # the rest of its group stays
    assert fts_consistent(str(tmp_path / "helped.db"))
    assert helped.events < alone.events


def _without(state: dict[str, Any], session_id: str) -> dict[str, Any]:
    """An :func:`index_state` without what mentions one session."""
    out: dict[str, Any] = {}
    for section, content in state.items():
        if section == "fts_rows":
            continue  # a count: fts_consistent checks the rows against the documents
        if section == "fts":  # which documents match, not their ranks (one session fewer moves every rank)
            content = {term: [hit[1:] for hit in hits] for term, hits in content.items()}
        if isinstance(content, dict):
            out[section] = {key: _without_items(value, session_id) for key, value in content.items() if session_id not in repr(key)}
        else:
            out[section] = _without_items(content, session_id)
    return out


def _without_items(content: Any, session_id: str) -> Any:
    return [item for item in content if session_id not in repr(item)] if isinstance(content, list) else content
