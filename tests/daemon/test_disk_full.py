"""A full disk under the index is reported as one, retried with back-off, and recovered from.

The index lives on a tiny tmpfs that a filler file fills up (see
:mod:`tests.diskfull`).  ``index --once`` exits 1 with one plain line; a daemon
logs the full disk once, keeps running without trying every change, and once
the filler is removed it recovers by itself, leaving the index equal to a cold
build of the same root.  The checkpoint thread backs off the same way.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from indexer.daemon import Checkpointer
from tests.daemon.support import Processes, append_turn, new_session, wait_for
from tests.diskfull import TinyFs, cold_build, tiny_tmpfs, write_wordy_root
from tests.indexstate import diff_states, fts_consistent, index_state

FULL = "the index's filesystem is full"


@pytest.fixture
def tinyfs(tmp_path: Path) -> Iterator[TinyFs]:
    with tiny_tmpfs(tmp_path / "fs", 4 * 1024 * 1024) as fs:
        yield fs


def test_a_full_disk_fails_index_once_plainly_and_a_daemon_logs_it_once_and_recovers_to_a_cold_build(
    tmp_path: Path, tinyfs: TinyFs, processes: Processes
) -> None:
    root = tmp_path / "root"
    write_wordy_root(root, 100)
    db = tinyfs.path / "index.db"
    tinyfs.fill(leave=300 * 1024)

    once = processes.run("index", "--once", "--root", str(root), "--db", str(db))
    assert once.returncode == 1, once.stderr
    assert re.fullmatch(rf"Error: cannot index into {re.escape(str(db))}: {FULL} \(\d+ bytes free\)\n", once.stderr), once.stderr
    assert once.stdout == ""

    growing, seq = new_session(root, "growing", "a session that keeps changing")
    daemon = processes.start("index", "--root", str(root), "--db", str(db), "--rescan", "0", "--log-level", "debug", name="daemon")
    wait_for(lambda: FULL in daemon.stderr(), 20, 0.02, "the full-disk message")
    # Changes keep coming while the disk is full: they wait for the retry, not a pass each.
    deadline = time.monotonic() + 10
    while "failures=2" not in daemon.stderr() and time.monotonic() < deadline:
        seq = append_turn(growing, seq, f"more text {seq}")
        time.sleep(0.08)
    log = daemon.stderr()
    assert daemon.popen.poll() is None, log
    failures = [line for line in log.splitlines() if "reconcile failed" in line]
    assert [line for line in failures if " ERROR " in line and FULL in line] == failures[:1], log
    assert len(failures) == 2 and "failures=2 " in failures[1] + " ", log  # the first pass and its retry after 1 s
    assert "kind=paths" not in "\n".join(failures), log
    assert "cannot rollback" not in log, log

    tinyfs.free_space()  # the daemon notices the room and retries at once (the back-off would wait 2 s)
    wait_for(lambda: re.search(r"succeeded again.*\n.* reconcile kind=full", daemon.stderr()), 10, 0.02, "the recovering pass")
    assert daemon.stop() == 0
    cold = tmp_path / "cold.db"
    cold_build(root, cold)
    differences = diff_states(index_state(str(db)), index_state(str(cold)))
    assert not differences, "\n".join(differences)
    assert fts_consistent(str(db))


def test_checkpoints_on_a_full_disk_warn_once_back_off_and_resume(tinyfs: TinyFs, caplog: pytest.LogCaptureFixture) -> None:
    db = tinyfs.path / "index.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute('CREATE TABLE "blob" ("data" BLOB)')
    writer.execute("BEGIN")
    writer.executemany('INSERT INTO "blob" VALUES (randomblob(4000))', [()] * 200)
    writer.execute("COMMIT")  # ~800 KB in the WAL that a checkpoint must copy into the (growing) database file
    tinyfs.fill(leave=64 * 1024)
    checkpointer = Checkpointer(str(db), wal_bytes=0, interval=0.02)
    with caplog.at_level(logging.DEBUG, logger="sessionq"):
        logger = logging.getLogger("sessionq")
        own_handler = not logger.propagate  # configure_logging (run by an earlier test) stops propagation
        if own_handler:
            logger.addHandler(caplog.handler)
        try:
            checkpointer.start()
            time.sleep(1.0)
            attempts = sum("checkpoint failed" in r.getMessage() for r in caplog.records)
            tinyfs.free_space()
            wait_for(lambda: checkpointer.checkpoints > 0, 5, 0.02, "a checkpoint after space returned")
        finally:
            checkpointer.stop()
            if own_handler:
                logger.removeHandler(caplog.handler)
            writer.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and FULL in warnings[0], warnings
    assert 2 <= attempts <= 6, attempts  # 0.04, 0.08, 0.16, 0.32 s apart; without the back-off every 0.02 s
    assert any("checkpoint succeeded again" in r.getMessage() for r in caplog.records)
