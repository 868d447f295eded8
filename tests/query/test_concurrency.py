"""Many reader processes, one writer: no errors, no locking, consistent answers.

Eight reader processes run every read in a loop against the index while the
writer (this process) appends batches to a growing root and reconciles it,
again and again.  Each single answer must be internally consistent (one
committed generation): see :mod:`tests.query.concurrency` for the invariants.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from tests.query.concurrency import GrowingLog, grow, reader
from tests.query.support import build_index

READERS = 8
WRITE_SECONDS = 8.0


def test_readers_see_consistent_generations_while_the_writer_reconciles(tmp_path: Path) -> None:
    root, db = tmp_path / "root", tmp_path / "index.db"
    # A first committed state, so readers have sessions from the start.
    seed_log = GrowingLog(root, "grow-seed", 999)
    for _ in range(3):
        seed_log.append()
    build_index(root, db)

    context = multiprocessing.get_context("fork")
    stop = context.Event()
    results = context.Queue()
    processes = [context.Process(target=reader, args=(str(db), stop, results, seed)) for seed in range(READERS)]
    for process in processes:
        process.start()
    try:
        written = grow(root, db, WRITE_SECONDS)
    finally:
        stop.set()
        reports = [results.get(timeout=60) for _ in processes]
        for process in processes:
            process.join(timeout=30)
    failures = [failure for report in reports for failure in report["failures"]]
    assert failures == [], failures[0]
    assert all(process.exitcode == 0 for process in processes)
    assert written["passes"] >= 3, written
    assert all(report["reads"] > 0 for report in reports), reports
    assert not any("locked" in failure for failure in failures)
