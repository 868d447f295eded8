"""A pass that fills the index's disk fails with that error, undoes itself, and is retried to a cold build.

A real full disk — a tiny tmpfs holding the index and a filler file — makes
SQLite fail with ``SQLITE_FULL`` when a ``COMMIT`` grows the WAL; SQLite then
rolls the transaction back itself.  The reconciler must raise that error (not
the secondary "cannot rollback - no transaction is active"), keep the
transactions committed before it, and hold no in-memory state of the failed
one (buffered FTS rows, prepared sessions), so that once space is back the
next pass leaves the index equal to a cold build, with a consistent FTS index.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from indexer.storage import is_disk_full
from readmodel.store.database import open_writer
from tests.diskfull import cold_build, tiny_tmpfs, write_wordy_root
from tests.indexstate import diff_states, fts_consistent, index_state

SESSIONS = 80


@pytest.mark.parametrize("workers", [0, 2], ids=["writer-alone", "with-workers"])
def test_a_pass_that_fills_the_disk_raises_sqlite_full_and_the_retry_equals_a_cold_build(tmp_path: Path, workers: int) -> None:
    root = tmp_path / "root"
    write_wordy_root(root, SESSIONS)
    with tiny_tmpfs(tmp_path / "fs", 4 * 1024 * 1024) as fs:
        db = fs.path / "index.db"
        engine = open_writer(str(db))
        try:
            # Small batches: several transactions commit before one no longer fits.
            reconciler = Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, batch_events=90, workers=workers, parallel_min_bytes=0)
            fs.fill(leave=250 * 1024)
            with pytest.raises(sqlite3.OperationalError) as failed:
                reconciler.reconcile()
            assert failed.value.sqlite_errorname == "SQLITE_FULL", failed.value  # the real error, not the failed ROLLBACK
            assert is_disk_full(failed.value, str(db))
            committed = index_state(str(db))["sessions"]
            assert 0 < len(committed) < SESSIONS  # the batches before the full one stay
            fs.free_space()
            reconciler.reconcile()
        finally:
            engine.dispose()
        cold = tmp_path / "cold.db"
        cold_build(root, cold)
        differences = diff_states(index_state(str(db)), index_state(str(cold)))
        assert not differences, "\n".join(differences)
        assert fts_consistent(str(db))
