"""The head of a cold build: the workers list the root, and the first and last worker tasks are small.

``indexer.coldstart.ColdStart`` hands the listing (every transcript's stat and
header) to the forked workers while the index is created, and
``indexer.preparation.ramped_chunks`` splits the first and last chunk of new
sessions into smaller tasks.  Neither may change the index: the same
observations reach the reconciler, the same sessions reach the writer in the
same order under the same sids.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer import coldstart, preparation
from indexer.coldstart import ColdStart, listing_chunk
from indexer.layout import Compression
from indexer.observation import Listing, Observed, observe
from indexer.preparation import CHUNK_BYTES, CHUNK_SESSIONS, RAMP_SESSIONS, ChunkResult, Prepared, Preparer, PrepTask, _chunked, ramped_chunks
from indexer.reconcile import Reconciler
from readmodel.store.database import open_writer
from tests.index.test_cold_start import _elsewhere_if_not_alone
from tests.index.test_parallel_preparation import build, damaged_root
from tests.indexstate import index_state
from tests.logfactory import header, simple_turn, write_log

_SIZES = st.lists(st.integers(min_value=0, max_value=CHUNK_BYTES // 3), max_size=400)


def _tasks(sizes: list[int]) -> list[PrepTask]:
    return [PrepTask(f"/root/{index}/session.jsonl.zstd", index + 1, {"id": str(index)}, True, size) for index, size in enumerate(sizes)]


@settings(max_examples=300, deadline=None)
@given(_SIZES)
def test_ramped_chunks_hold_every_task_in_order_smaller_at_both_ends(sizes: list[int]) -> None:
    tasks = _tasks(sizes)
    ramped = ramped_chunks(tasks)
    assert [task for chunk in ramped for task in chunk] == tasks
    assert all(chunk for chunk in ramped)
    # Every piece is within the chunk bounds; the first pieces grow, the last ones shrink.
    assert all(len(chunk) <= CHUNK_SESSIONS and sum(task.size for task in chunk) - max(task.size for task in chunk) < CHUNK_BYTES for chunk in ramped)
    if not ramped:
        return
    assert len(ramped[0]) <= RAMP_SESSIONS
    first = len(_chunked(tasks)[0])
    ups = _pieces_covering(ramped, first)
    assert ups == sorted(ups) and sum(ups) == first
    if len(tasks) > first:
        assert len(ramped[-1]) <= RAMP_SESSIONS
        downs = _pieces_covering(ramped[::-1], len(_chunked(tasks[first:][::-1])[0]))
        assert downs == sorted(downs) and len(ramped) >= len(ups) + len(downs)


def _pieces_covering(chunks: list[list[PrepTask]], count: int) -> list[int]:
    """The lengths of the leading ``chunks`` that hold exactly ``count`` tasks."""
    lengths: list[int] = []
    while sum(lengths) < count:
        lengths.append(len(chunks[len(lengths)]))
    assert sum(lengths) == count
    return lengths


def test_a_pass_ramps_up_and_down_by_halves_with_its_short_chunk_in_the_middle() -> None:
    tasks = _tasks([1] * (CHUNK_SESSIONS * 3 + 5))
    assert [len(chunk) for chunk in ramped_chunks(tasks)] == [4, 4, 8, 16, 32, 5, 64, 32, 16, 8, 4, 4]


class _InlinePool:
    """A pool that answers each chunk at once with a recording of its tasks; remembers the chunks."""

    def __init__(self) -> None:
        self.chunks: list[list[PrepTask]] = []

    def submit(self, function: Any, tasks: list[PrepTask], *args: Any) -> Future[ChunkResult]:
        assert function is preparation.prepare_chunk
        self.chunks.append(list(tasks))
        future: Future[ChunkResult] = Future()
        sessions = [Prepared(task.path, task.sid, [("INSERT", (task.sid, task.size), False)]) for task in tasks]
        future.set_result(ChunkResult(sessions, 0.0, 0))
        return future


@settings(max_examples=200, deadline=None)
@given(_SIZES, st.sets(st.integers(min_value=0, max_value=399)))
def test_a_preparer_hands_the_writer_each_planned_session_in_order_with_its_sid(sizes: list[int], unplanned: set[int]) -> None:
    tasks = _tasks(sizes)
    pool = _InlinePool()
    preparer = Preparer(tasks, Compression.ZSTD, "/root", pool)  # type: ignore[arg-type]
    try:
        extra = [f"/elsewhere/{index}" for index in sorted(unplanned)]
        for task in tasks:
            if extra and task.sid % 3 == 0:
                assert preparer.take(extra.pop()) is None  # a session the writer ingests itself, in between
            prepared = preparer.take(task.path)
            assert prepared is not None and (prepared.path, prepared.sid, prepared.calls) == (task.path, task.sid, [("INSERT", (task.sid, task.size), False)])
    finally:
        preparer.close()
    assert pool.chunks == ramped_chunks(tasks)


def test_a_listing_task_is_a_few_per_worker_within_bounds() -> None:
    assert listing_chunk(865, 2) == 109
    assert listing_chunk(10, 2) == coldstart.MIN_LISTING_CHUNK
    assert listing_chunk(100_000, 4) == 512


def _many_sessions(root: Path, count: int) -> None:
    for index in range(count):
        write_log(root, header(f"s{index:03d}"), [simple_turn(), simple_turn(9, f"turn {index}")])


def test_a_build_in_small_ramped_tasks_equals_one_by_the_writer_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    damaged_root(root)
    _many_sessions(root, 40)
    monkeypatch.setattr(preparation, "CHUNK_SESSIONS", 8)
    monkeypatch.setattr(preparation, "RAMP_SESSIONS", 1)
    helped = build(root, tmp_path / "helped.db", Compression.ZSTD, workers=2)
    build(root, tmp_path / "alone.db", Compression.ZSTD, workers=0)
    assert helped.prepared == 45
    assert index_state(str(tmp_path / "helped.db")) == index_state(str(tmp_path / "alone.db"))


def _cold_build(root: Path, db: Path) -> tuple[Any, ColdStart, int]:
    """A cold build begun by :class:`ColdStart` with 2 workers, once they ran every listing task.

    Returns the report, the start, and how often the reconciler observed a transcript itself."""
    calls = [0]
    real = Reconciler._observe

    def counted(self: Reconciler, path: str) -> Observed:
        calls[0] += 1
        return real(self, path)

    begun = ColdStart(root, Compression.ZSTD, 2)
    assert begun.pool is not None
    if begun._listing is not None:  # noqa: SLF001
        wait(begun._listing.futures)  # noqa: SLF001 - no task left for the writer to take over
    engine = open_writer(str(db))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Reconciler, "_observe", counted)
            report = Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, workers=2, parallel_min_bytes=0, cold_start=begun).reconcile()
    finally:
        engine.dispose()
        begun.close()
    return report, begun, calls[0]


def _root_for_worker_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root of 17 sessions and a layout problem, which a ColdStart's workers list."""
    root = tmp_path / "root"
    damaged_root(root)
    _many_sessions(root, 12)
    monkeypatch.setattr(coldstart, "WORKER_LISTING", 1)
    return root


def test_a_cold_build_whose_workers_list_the_root_equals_one_by_the_writer_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if _elsewhere_if_not_alone(request):
        return
    root = _root_for_worker_listing(tmp_path, monkeypatch)
    monkeypatch.setattr(coldstart, "MIN_LISTING_CHUNK", 2)
    report, _, observed_here = _cold_build(root, tmp_path / "index.db")
    assert observed_here == 0  # the workers' listing was used
    alone = build(root, tmp_path / "alone.db", Compression.ZSTD, workers=0)
    assert (report.prepared, report.problems, report.scanned) == (17, alone.problems, alone.scanned)
    assert index_state(str(tmp_path / "index.db")) == index_state(str(tmp_path / "alone.db"))


def _failing_task(*_args: Any) -> Any:
    """A worker task (listing or training) that fails in its worker (module-level: it is pickled by name)."""
    raise RuntimeError("a worker lost its way")


def test_a_cold_build_whose_listing_fails_in_a_worker_lists_in_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    if _elsewhere_if_not_alone(request):
        return
    root = _root_for_worker_listing(tmp_path, monkeypatch)
    monkeypatch.setattr("indexer.observation.observe_chunk", _failing_task)  # before the workers are forked
    with caplog.at_level(logging.WARNING, logger="sessionq.indexer"):
        report, _, observed_here = _cold_build(root, tmp_path / "index.db")
    assert "listing in worker processes failed (RuntimeError: a worker lost its way); listing here" in caplog.text
    assert observed_here == report.scanned  # the writer read every header itself
    build(root, tmp_path / "alone.db", Compression.ZSTD, workers=0)
    assert report.prepared == 17
    assert index_state(str(tmp_path / "index.db")) == index_state(str(tmp_path / "alone.db"))


def test_a_small_root_is_listed_by_the_writer(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if _elsewhere_if_not_alone(request):
        return
    damaged_root(tmp_path / "root")
    report, begun, observed_here = _cold_build(tmp_path / "root", tmp_path / "index.db")
    assert begun.listing() is None
    assert observed_here > 0 and report.prepared == 5


def test_the_pass_gives_its_begun_workers_back_and_close_waits_for_them_to_exit(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if _elsewhere_if_not_alone(request):
        return
    damaged_root(tmp_path / "root")
    begun = ColdStart(tmp_path / "root", Compression.ZSTD, 2)
    assert begun.pool is not None
    processes = list(begun.pool._processes.values())  # noqa: SLF001 - forked on the first task
    engine = open_writer(str(tmp_path / "index.db"))
    try:
        Reconciler(engine, tmp_path / "root", Compression.ZSTD, settle_seconds=0, workers=2, parallel_min_bytes=0, cold_start=begun).reconcile()
        assert begun.pool is None and begun._stopping is not None  # noqa: SLF001 - shutting down on its own thread
    finally:
        engine.dispose()
        begun.close()
    assert begun._stopping is None and len(processes) == 2  # noqa: SLF001
    assert all(process.exitcode is not None for process in processes)


def test_the_caller_lists_the_tasks_no_worker_began_and_the_order_holds(tmp_path: Path) -> None:
    root = tmp_path / "root"
    damaged_root(root)
    _many_sessions(root, 12)
    from indexer.layout import discover

    paths = [ref.path for ref in discover(str(root), Compression.ZSTD).transcripts]
    expected = [observe(path, str(root), Compression.ZSTD) for path in paths]
    with ProcessPoolExecutor(max_workers=1) as pool:
        pool.submit(time.sleep, 1.0)  # the one worker is busy: at most two tasks queue behind it
        listing = Listing(pool, paths, str(root), Compression.ZSTD, 2)
        helped = listing.result()  # waits for the tasks that began behind the busy one, if any
        began = sum(1 for future in listing.futures if not future.cancelled())
        assert began <= 2 and listing.listed_here == len(paths) - sum(len(chunk) for chunk in listing.chunks[:began])
        assert listing.listed_here >= len(paths) - 4
        waited = Listing(pool, paths, str(root), Compression.ZSTD, 2)
        wait(waited.futures)
        assert _seen(waited.result()) == _seen(helped) == _seen(expected) and waited.listed_here == 0


def _seen(items: list[Observed]) -> list[tuple[Any, ...]]:
    """What a pass uses of observations (a read may move a file's access time)."""
    return [(item.path, item.header, item.problem, item.stat and (item.stat.st_ino, item.stat.st_size, item.stat.st_mtime_ns)) for item in items]


def _trainable_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """:func:`_root_for_worker_listing`, small enough to train a dictionary on (set before the workers are forked)."""
    from indexer import dictionary as block_dictionary

    monkeypatch.setattr(block_dictionary, "MIN_BYTES", 0)
    monkeypatch.setattr(block_dictionary, "SAMPLE_PIECE", 256)
    return _root_for_worker_listing(tmp_path, monkeypatch)


def _trained_alone(root: Path) -> tuple[int, bytes] | None:
    """The dictionary the writer alone trains for ``root``."""
    from indexer import dictionary as block_dictionary

    paths = sorted(str(path) for path in root.glob("*/*/session.jsonl.zstd"))
    return block_dictionary.train_for(paths, sum(Path(path).stat().st_size for path in paths), Compression.ZSTD)


def _niceness(pids: list[int]) -> list[int]:
    """How much nicer than this process each of ``pids`` runs."""
    return [os.getpriority(os.PRIO_PROCESS, pid) - os.getpriority(os.PRIO_PROCESS, 0) for pid in pids]


def test_a_cold_starts_workers_train_and_list_at_the_writers_priority_then_run_nicer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """The training is the workers' first task; they run at the writer's priority until it and the listing are done."""
    if _elsewhere_if_not_alone(request):
        return
    root = _trainable_root(tmp_path, monkeypatch)
    trained: list[Any] = []
    monkeypatch.setattr(coldstart.Training, "run", lambda self: trained.append(self))
    begun = ColdStart(root, Compression.ZSTD, 2)
    try:
        assert begun.pool is not None and isinstance(begun.training, coldstart.WorkerTraining)
        pids = list(begun.pool._processes)  # noqa: SLF001
        dictionary = begun.training.result()
        assert _niceness(pids) == [0, 0]  # trained, but the listing is not taken yet
        assert begun.listing() is not None
        assert _niceness(pids) == [min(preparation.WORKER_NICENESS, 19 - os.getpriority(os.PRIO_PROCESS, 0))] * 2  # niceness stops at 19
    finally:
        begun.close()
    assert trained == []  # no thread of the writer's trained
    assert dictionary is not None and dictionary == _trained_alone(root)


def test_a_cold_start_without_workers_trains_on_a_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _trainable_root(tmp_path, monkeypatch)
    begun = ColdStart(root, Compression.ZSTD, 0)
    try:
        assert begun.pool is None and isinstance(begun.training, coldstart.Training)
        assert begun.training.result() == _trained_alone(root) is not None and begun.listing() is None  # the writer lists
    finally:
        begun.close()


def test_a_training_that_fails_in_a_worker_is_done_again_in_the_writer_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    if _elsewhere_if_not_alone(request):
        return
    root = _trainable_root(tmp_path, monkeypatch)
    monkeypatch.setattr(coldstart, "train_in_worker", _failing_task)
    begun = ColdStart(root, Compression.ZSTD, 2)
    try:
        with caplog.at_level(logging.WARNING, logger="sessionq.indexer"):
            dictionary = begun.training.result()
    finally:
        begun.close()
    assert "training in a worker process failed (RuntimeError: a worker lost its way); training here" in caplog.text
    assert dictionary is not None and dictionary == _trained_alone(root)


def test_the_writer_builds_its_gram_tables_after_handing_out_the_first_chunks_before_taking_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexer import reconcile

    order: list[str] = []
    take = Preparer.take
    start = Preparer.__init__

    def started(self: Preparer, *args: Any, **kwargs: Any) -> None:
        start(self, *args, **kwargs)
        order.append("submitted")

    def taken(self: Preparer, path: str) -> Prepared | None:
        order.append("take")
        return take(self, path)

    monkeypatch.setattr(Preparer, "__init__", started)
    monkeypatch.setattr(Preparer, "take", taken)
    monkeypatch.setattr(reconcile, "warm_up_grams", lambda: order.append("warm"))
    root = tmp_path / "root"
    for index in range(3):
        write_log(root, header(f"s{index}"), [simple_turn(0, f"turn {index}")])
    report = build(root, tmp_path / "index.db", Compression.ZSTD, workers=2)
    assert report.prepared == 3
    assert order[:3] == ["submitted", "warm", "take"] and order.count("warm") == 1
