"""Unit tests of the daemon's plumbing: event classification, the debounced queue, the lock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
)

from indexer.daemon import DaemonError, IndexLock, WorkQueue
from indexer.layout import Compression
from indexer.reconcile import Reconciler
from indexer.watching import TranscriptEventHandler
from readmodel.store.database import open_writer
from tests.daemon.support import append_turn, new_session, query
from tests.indexstate import index_state


class Recorder:
    def __init__(self) -> None:
        self.touched: list[str] = []
        self.full = 0

    def touch(self, path: str) -> None:
        self.touched.append(path)

    def request_full(self) -> None:
        self.full += 1


ROOT = "/r"
T = "/r/p/s/session.jsonl.zstd"


@pytest.mark.parametrize(
    ("event", "touched", "full"),
    [
        (FileModifiedEvent(T), [T], 0),
        (FileClosedEvent(T), [T], 0),
        (FileCreatedEvent(T), [T], 0),
        (FileDeletedEvent(T), [T], 0),
        (FileMovedEvent("/r/p/s/session.jsonl.zstd.tmp", T), [T], 0),  # atomic replace
        (FileModifiedEvent("/r/p/s/session.jsonl.zstd.tmp"), [], 0),
        (FileModifiedEvent("/r/p/s/session.jsonl"), [], 1),  # opposite suffix: mixed-encoding
        (FileCreatedEvent("/r/p/x.jsonl.zstd"), [], 1),  # flat file
        (FileDeletedEvent("/r/p/x.jsonl"), [], 1),
        (FileModifiedEvent("/r/p/notes.txt"), [], 0),
        (FileModifiedEvent("/r/top.jsonl.zstd"), [], 0),  # directly in the root: not a layout artifact
        (FileModifiedEvent("/r/p/s/deeper/session.jsonl.zstd"), [], 0),
        (FileModifiedEvent("/elsewhere/p/s/session.jsonl.zstd"), [], 0),
        (DirCreatedEvent("/r/p/s"), [T], 0),  # new session dir: look at its transcript
        (DirDeletedEvent("/r/p/s"), [T], 0),
        (DirCreatedEvent("/r/p"), [], 1),  # new project dir
        (DirDeletedEvent("/r/p"), [], 1),
        (DirMovedEvent("/r/p/s", "/r/p/t"), [], 1),
        (DirMovedEvent("/r/p/s/a", "/r/p/s/b"), [], 0),
        (DirCreatedEvent("/r/p/s/deeper"), [], 0),
    ],
)
def test_classification(event: object, touched: list[str], full: int) -> None:
    sink = Recorder()
    TranscriptEventHandler(ROOT, Compression.ZSTD, sink).dispatch(event)  # type: ignore[arg-type]
    assert (sink.touched, sink.full) == (touched, full)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_notification_of_a_burst_is_due_at_once() -> None:
    clock = FakeClock()
    queue = WorkQueue(quiet=0.02, max_delay=0.1, clock=clock)
    queue.touch("/a")
    work = queue.take(timeout=0)
    assert work is not None and work.paths == ["/a"] and work.reason == "change"
    assert queue.take(timeout=0) is None


def test_the_rest_of_a_burst_is_one_trailing_piece_of_work() -> None:
    clock = FakeClock()
    queue = WorkQueue(quiet=0.02, max_delay=0.1, clock=clock)
    queue.touch("/a")
    assert queue.take(timeout=0) is not None  # the leading edge
    for _ in range(5):
        clock.now += 0.01  # each write within the quiet period of the previous one
        queue.touch("/a")
    assert queue.take(timeout=0) is None
    clock.now += 0.02
    work = queue.take(timeout=0)
    assert work is not None and work.paths == ["/a"] and not work.full
    assert queue.take(timeout=0) is None
    clock.now += 0.02  # quiet for a quiet period: the next write starts a new burst
    queue.touch("/a")
    work = queue.take(timeout=0)
    assert work is not None and work.paths == ["/a"]


def test_a_change_to_a_path_already_due_does_not_delay_it() -> None:
    clock = FakeClock()
    queue = WorkQueue(quiet=0.02, max_delay=0.1, clock=clock)
    queue.touch("/a")
    clock.now += 0.001
    queue.touch("/a")  # the writer has not taken the first yet: one piece of work, still due
    work = queue.take(timeout=0)
    assert work is not None and work.paths == ["/a"]
    assert queue.take(timeout=0) is None


def test_a_notification_during_a_held_tail_recheck_wait_is_a_leading_edge() -> None:
    clock = FakeClock()
    queue = WorkQueue(quiet=0.02, max_delay=0.1, clock=clock)
    queue.schedule("/held", 1.0)
    queue.touch("/held")
    work = queue.take(timeout=0)
    assert work is not None and work.paths == ["/held"] and work.reason == "change"


def test_a_path_that_keeps_changing_is_still_reconciled_within_max_delay() -> None:
    clock = FakeClock()
    queue = WorkQueue(quiet=0.05, max_delay=0.1, clock=clock)
    queue.touch("/busy")
    assert queue.take(timeout=0) is not None  # the leading edge
    start = clock.now
    work = None
    while work is None:
        clock.now += 0.01
        queue.touch("/busy")
        work = queue.take(timeout=0)
    assert clock.now - start <= 0.1 + 0.01 + 1e-9


def test_a_full_pass_absorbs_due_paths_and_keeps_quiet_ones() -> None:
    clock = FakeClock()
    queue = WorkQueue(quiet=0.02, max_delay=0.1, clock=clock)
    queue.touch("/quiet")
    assert queue.take(timeout=0) is not None  # its burst's leading edge
    queue.touch("/due")
    clock.now += 0.01
    queue.touch("/quiet")  # the same burst: waits for quiet
    queue.request_full(0)
    work = queue.take(timeout=0)
    assert work is not None and work.full
    clock.now += 0.03
    work = queue.take(timeout=0)
    assert work is not None and work.paths == ["/quiet"]


def test_timed_rechecks_and_stop() -> None:
    clock = FakeClock()
    queue = WorkQueue(quiet=0.02, clock=clock)
    queue.schedule("/held", 1.0)
    queue.schedule("/held", 0.5)  # the earlier time wins
    clock.now += 0.5
    work = queue.take(timeout=0)
    assert work is not None and work.paths == ["/held"]
    queue.request_full(10)
    queue.stop()
    assert queue.take() is None  # returns at once when stopped


def test_the_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    db = str(tmp_path / "index.db")
    first = IndexLock(db)
    first.acquire()
    with pytest.raises(DaemonError, match=f"pid {os.getpid()}"):
        IndexLock(db).acquire()
    first.release()
    with IndexLock(db):
        pass


def test_a_targeted_pass_respects_a_mixed_encoding_session_dir(tmp_path: Path) -> None:
    """Regression: the opposite-suffix transcript excludes the dir in targeted passes too."""
    root = tmp_path / "root"
    path, seq = new_session(root, "mixed", "hello there")
    (path.parent / "session.jsonl").write_bytes(b"")
    db = str(tmp_path / "index.db")
    engine = open_writer(db)
    try:
        reconciler = Reconciler(engine, root, Compression.ZSTD, settle_seconds=0)
        reconciler.reconcile()
        append_turn(path, seq, "more words")
        reconciler.reconcile_paths([str(path)])
        assert query(db, 'SELECT count(*) FROM "sessions"') == [(0,)]
        targeted = index_state(db)
        reconciler.reconcile()
        assert index_state(db) == targeted
    finally:
        engine.dispose()
