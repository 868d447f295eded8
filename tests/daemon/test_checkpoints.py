"""Checkpoints run beside the writer, never inside its commits.

The daemon turns SQLite's automatic checkpoint off on its connections and a
:class:`Checkpointer` thread copies committed WAL frames into the database file
with passive checkpoints, so a large transaction's checkpoint never stalls the
commit of the next appended frame.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from indexer.daemon import Checkpointer


def _wal_frames(path: Path) -> tuple[int, int]:
    """(frames in the WAL, frames already copied into the database file)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return row[1], row[2]
    finally:
        conn.close()


def _writer(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute('CREATE TABLE IF NOT EXISTS "blob" ("id" INTEGER PRIMARY KEY, "data" BLOB)')
    return conn


@pytest.mark.exclusive  # bounds a wall time within a second or two
def test_the_checkpointer_copies_committed_frames_while_the_writer_keeps_its_connection(tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    writer = _writer(db)
    checkpointer = Checkpointer(str(db), wal_bytes=64 * 1024, interval=0.02)
    checkpointer.start()
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.executemany('INSERT INTO "blob" ("data") VALUES (?)', [(os.urandom(4096),) for _ in range(200)])
        writer.execute("COMMIT")
        deadline = time.monotonic() + 5
        while checkpointer.checkpoints == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert checkpointer.checkpoints >= 1
        # The writer commits again while the checkpointer runs: nothing blocks it.
        started = time.monotonic()
        writer.execute('INSERT INTO "blob" ("data") VALUES (x\'00\')')
        assert time.monotonic() - started < 1.0
    finally:
        checkpointer.stop()
    logged, copied = _wal_frames(db)
    assert logged == copied  # the final checkpoint left nothing behind
    assert writer.execute('SELECT count(*) FROM "blob"').fetchone() == (201,)
    writer.close()


def test_a_small_wal_is_left_alone_until_it_grows(tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    writer = _writer(db)
    writer.execute('INSERT INTO "blob" ("data") VALUES (x\'01\')')
    checkpointer = Checkpointer(str(db), wal_bytes=1 << 30, interval=0.01)
    checkpointer.start()
    time.sleep(0.1)
    assert checkpointer.checkpoints == 0
    checkpointer.stop()
    assert checkpointer.checkpoints == 1  # the last one, on the way out
    writer.close()
