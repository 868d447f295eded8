"""A worker's collector: off through a chunk and until its next task, and nothing for it to find.

A worker's chunk leaves the garbage collector off (its answer is still alive,
waiting to be pickled, and a pass would walk all of it); the worker's next
task turns it back on (``indexer.workergc``).  That is free only because
reading and preparing a log makes no reference cycles: everything goes when
its last reference does.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from indexer import preparation, workergc
from indexer.pipeline import Pipeline
from indexer.preparation import PrepTask, RecordingCursor, prepare_chunk
from indexer.projection import SessionProjector
from indexer.reader import LogReader
from indexer.records import LineScanner
from indexer.repair import CloserState
from readmodel.projection.surface import SurfaceFold
from indexer.workergc import chunk_stretch, settle_collector
from tests.logfactory import header, simple_turn, write_log


@pytest.fixture
def collector_on() -> Iterator[None]:
    """The collector on, no chunk owing it, and both restored afterwards."""
    was = gc.isenabled()
    gc.enable()
    workergc._owed = False
    yield
    workergc._owed = False
    (gc.enable if was else gc.disable)()


def test_a_chunk_leaves_the_collector_off_until_the_next_task_settles_it(collector_on: None) -> None:
    with chunk_stretch():
        assert not gc.isenabled()
    assert not gc.isenabled()
    settle_collector()
    assert gc.isenabled()
    settle_collector()  # nothing owed: nothing changes
    assert gc.isenabled()


def test_a_chunk_started_with_the_collector_off_leaves_it_off(collector_on: None) -> None:
    gc.disable()
    with chunk_stretch():
        pass
    settle_collector()
    assert not gc.isenabled()


def test_a_failing_chunk_still_owes_the_collector(collector_on: None) -> None:
    with pytest.raises(RuntimeError), chunk_stretch():
        raise RuntimeError("boom")
    settle_collector()
    assert gc.isenabled()


def test_a_chunk_in_a_worker_uses_the_stretch_and_the_next_chunk_settles_it(tmp_path: Path, collector_on: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preparation, "_capture", preparation._Capture())  # as _init_worker sets it
    path = write_log(tmp_path / "root", header("good"), [simple_turn()])
    task = PrepTask(str(path), 1, header("good"), True, path.stat().st_size)
    answer = prepare_chunk([task], "zstd", str(tmp_path / "root"))
    assert answer.sessions[0].outcome is not None and not gc.isenabled()
    prepare_chunk([task], "zstd", str(tmp_path / "root"))
    settle_collector()
    assert gc.isenabled()


def test_preparing_sessions_leaves_no_reference_cycles(tmp_path: Path, collector_on: None) -> None:
    tasks = []
    for index in range(3):
        path = write_log(tmp_path / "root", header(f"s{index}"), [simple_turn(), simple_turn(9, "again")])
        tasks.append(PrepTask(str(path), index + 1, header(f"s{index}"), True, path.stat().st_size))
    prepare_chunk(tasks[:1], "zstd", str(tmp_path / "root"))  # first-use caches and imports
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        answer = prepare_chunk(tasks, "zstd", str(tmp_path / "root"))
        assert all(session.outcome is not None for session in answer.sessions)
        del answer
        gc.collect()
        # Only the reading's own objects: another thread of the test process (pytest-xdist's
        # channel) may leave garbage of its own meanwhile.
        garbage = [type(thing).__name__ for thing in gc.garbage if type(thing) in _READING_TYPES]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert garbage == []


_READING_TYPES: Final = (LineScanner, Pipeline, SurfaceFold, CloserState, SessionProjector, RecordingCursor, LogReader)
