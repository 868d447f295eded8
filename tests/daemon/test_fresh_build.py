"""A missing index is built in a file of its own and published whole (indexer.freshbuild).

The build writes ``DB.building-SOURCE`` without a write-ahead log or syncs and
links it at the final path only once the pass is complete, in WAL mode.  A
SIGKILL at any moment of it leaves no index at the final path; the next run
discards the stale file and builds the same index as one written in place.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from indexer.freshbuild import Superseded, building, building_path
from readmodel.store.database import open_writer
from tests.corpus import ZSTD_ROOT, replicated_root, require_corpus
from tests.daemon.support import Processes, wait_for
from tests.indexstate import diff_states, fts_consistent, index_state

SOURCE = "fresh-test"


def _once(processes: Processes, db: Path, *extra: str) -> str:
    result = processes.run("index", "--once", "--root", str(ZSTD_ROOT), "--db", str(db), "--source", SOURCE, "--log-level", "warning", *extra)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def _leftovers(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if ".building" in path.name)


def _journal_mode(db: Path) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


def test_a_missing_index_is_published_whole_and_equals_one_built_in_place(tmp_path: Path, processes: Processes) -> None:
    require_corpus()
    fresh = tmp_path / "fresh.db"
    in_place = tmp_path / "in-place.db"
    open_writer(str(in_place)).dispose()  # an existing (empty) index: written in place, through the WAL
    assert "indexed 125 sessions" in _once(processes, fresh)
    _once(processes, in_place)
    assert _leftovers(tmp_path) == []
    assert _journal_mode(fresh) == "wal"  # readers and later writers open it as every index
    differences = diff_states(index_state(str(fresh)), index_state(str(in_place)))
    assert not differences, "\n".join(differences)
    assert fts_consistent(str(fresh))


@pytest.fixture(scope="module")
def larger_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus replicated to 6 MB: a build by the writer alone takes a few seconds."""
    return replicated_root(tmp_path_factory.mktemp("larger"), 6)


@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_during_a_fresh_build_leaves_no_index_and_the_next_run_builds_it(tmp_path: Path, processes: Processes, larger_root: Path, seed: int) -> None:
    db = tmp_path / "index.db"
    building_file = Path(building_path(str(db), SOURCE))
    args = ("--root", str(larger_root), "--source", SOURCE, "--log-level", "warning")
    # The writer alone: a slower build, so the kill lands inside it.
    proc = processes.start("index", "--once", "--db", str(db), *args, "--workers", "0")
    wait_for(building_file.exists, timeout=30, interval=0.002, what="the fresh build to start")
    # The writer alone builds this root in ~0.7 s on a quiet machine (session 11): the kill lands
    # in its first 0.3 s, well before publishing (a kill after the link is no test of this).
    time.sleep(random.Random(seed).uniform(0, 0.3))
    assert proc.popen.poll() is None, "the build ended before the kill"
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert not db.exists(), "a killed fresh build published its file"
    assert building_file.exists()  # the stale build, discarded by the next run

    if seed % 2:
        assert processes.run("index", "--once", "--db", str(db), *args).returncode == 0
    else:  # a daemon discards the stale file too, and writes the index in place
        daemon = processes.daemon(larger_root, db, "--source", SOURCE)
        assert daemon.stop() == 0
    assert _leftovers(tmp_path) == []
    reference = tmp_path / "reference.db"
    open_writer(str(reference)).dispose()  # an existing index: written in place
    assert processes.run("index", "--once", "--db", str(reference), *args).returncode == 0
    differences = diff_states(index_state(str(db)), index_state(str(reference)))
    assert not differences, "\n".join(differences)


def test_a_fresh_build_never_replaces_an_index_published_meanwhile(tmp_path: Path) -> None:
    final = tmp_path / "index.db"
    with pytest.raises(Superseded):
        with building(str(final), root=str(tmp_path), compression="zstd", source=SOURCE) as build:
            open_writer(str(final)).dispose()  # another source's daemon published first
            build.complete()
    assert _leftovers(tmp_path) == []
    conn = sqlite3.connect(final)
    try:
        assert conn.execute('SELECT count(*) FROM "sessions"').fetchone() == (0,)
    finally:
        conn.close()


def test_an_unfinished_fresh_build_is_discarded(tmp_path: Path) -> None:
    final = tmp_path / "index.db"
    with building(str(final), root=str(tmp_path), compression="zstd", source=SOURCE):
        pass  # never completed: an interrupted pass
    with pytest.raises(RuntimeError):
        with building(str(final), root=str(tmp_path), compression="zstd", source=SOURCE) as build:
            build.complete()
            raise RuntimeError("the pass failed")
    assert not final.exists()
    assert _leftovers(tmp_path) == []


def test_a_daemon_on_a_missing_index_writes_it_in_place(tmp_path: Path, processes: Processes) -> None:
    """Readers of a daemon's index see sessions as they are committed, so it builds no file aside."""
    require_corpus()
    db = tmp_path / "index.db"
    daemon = processes.daemon(ZSTD_ROOT, db, "--source", SOURCE)
    assert _journal_mode(db) == "wal" and _leftovers(tmp_path) == []
    assert daemon.stop() == 0
    conn = sqlite3.connect(db)
    try:
        assert conn.execute('SELECT count(*) FROM "sessions"').fetchone() == (125,)
    finally:
        conn.close()


def test_an_empty_file_at_the_path_counts_as_missing_and_is_replaced(tmp_path: Path) -> None:
    from indexer.freshbuild import fresh_target

    final = tmp_path / "index.db"
    final.touch()
    assert fresh_target(str(final)) == str(final)
    with building(str(final), root=str(tmp_path), compression="zstd", source=SOURCE) as build:
        build.complete()
    assert final.stat().st_size > 0 and _journal_mode(final) == "wal"
    assert fresh_target(str(final)) is None  # an index now: later passes write it in place
    assert _leftovers(tmp_path) == []


def _schema(db: Path) -> list[tuple[str, str, str, str]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return sorted(conn.execute("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master").fetchall())
    finally:
        conn.close()


def test_indexes_a_fresh_build_creates_after_its_rows_are_those_of_a_new_index_verbatim(tmp_path: Path) -> None:
    """The deferred indexes (indexer.freshbuild.DEFERRED_INDEXES) are absent while the pass writes and
    published with the very statements a new index holds, over every row written meanwhile."""
    from indexer.freshbuild import DEFERRED_INDEXES

    reference = tmp_path / "reference.db"
    open_writer(str(reference)).dispose()
    final = tmp_path / "index.db"
    with building(str(final), root=str(tmp_path), compression="zstd", source=SOURCE) as build:
        with build.engine.connect() as conn:
            cur = conn.connection.driver_connection.cursor()
            present = {row[0] for row in cur.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
            assert present.isdisjoint(DEFERRED_INDEXES)
            cur.execute("BEGIN IMMEDIATE")
            cur.executemany(
                'INSERT INTO "sessions" ("sid", "id", "path", "header_json", "id_key", "revision", "size", "event_count", "stored_count", '
                '"tail_state", "status", "generation", "indexed_at", "cwd", "parent_session", "created_at", "last_activity") '
                "VALUES (?, ?, ?, x'7b7d', x'00', 'r', 0, 0, 0, 'clean', 'ok', 0, 0, ?, ?, ?, ?)",
                [(sid, f"s{sid}", f"/p/{sid}", f"/cwd/{sid % 3}", f"s{sid - 1}", sid * 7 % 11, sid) for sid in range(1, 50)],
            )
            cur.execute("COMMIT")
        build.complete()
    assert _schema(final) == _schema(reference)
    conn = sqlite3.connect(final)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]  # every index holds every row
        plan = conn.execute("EXPLAIN QUERY PLAN SELECT id FROM sessions WHERE parent_session = 's3'").fetchall()
        assert "sessions_parent" in str(plan)
    finally:
        conn.close()


def test_the_building_file_is_synced_behind_as_it_grows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexer import freshbuild

    monkeypatch.setattr(freshbuild, "WRITE_BEHIND_BYTES", 64 * 1024)
    monkeypatch.setattr(freshbuild, "WRITE_BEHIND_SECONDS", 0.001)
    synced: list[int] = []
    real_fdatasync = os.fdatasync

    def counted(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real_fdatasync(fd)

    monkeypatch.setattr(freshbuild.os, "fdatasync", counted)
    path = tmp_path / "growing"
    path.write_bytes(b"")
    behind = freshbuild.WriteBehind(str(path))
    behind.start()
    with open(path, "ab") as fh:
        for _ in range(4):
            fh.write(b"x" * 100 * 1024)  # more than the threshold: at least one sync each time
            fh.flush()
            wait_for(lambda: path.stat().st_size - behind.synced < 64 * 1024, timeout=10, what="a sync behind the writes")
    behind.stop()
    assert not behind.is_alive()
    assert len(synced) == behind.syncs >= 4
    assert all(later - earlier >= 64 * 1024 for earlier, later in zip([0, *synced], synced))  # never for less growth


def test_a_write_behind_whose_file_is_gone_ends_quietly(tmp_path: Path) -> None:
    from indexer.freshbuild import WriteBehind

    behind = WriteBehind(str(tmp_path / "never-created"))
    behind.start()
    behind.join(timeout=10)
    assert not behind.is_alive() and behind.syncs == 0
    behind.stop()  # idempotent on an ended thread


def test_a_published_build_was_switched_to_wal_and_synced_once_by_us(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexer import freshbuild

    fsynced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(freshbuild.os, "fsync", lambda fd: (fsynced.append(fd), real_fsync(fd))[1])
    final = tmp_path / "index.db"
    with building(str(final), root=str(tmp_path), compression="zstd", source=SOURCE) as build:
        build.complete()
    assert _journal_mode(final) == "wal" and _leftovers(tmp_path) == []
    assert len(fsynced) == 2  # the file, then its directory: what makes the published index durable
