"""Sources: daemons of different sources share one index, each owning its own sessions.

Two reconcilers (two roots, two sources) write one SQLite index at the same
time; whatever the interleaving of their transactions, the index equals a
cold build of both roots, and each one's later changes (appends, deletions)
touch only its own sessions.  A session id another source already holds is
an identity problem of the newcomer, never merged.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.store.database import open_writer
from readmodel.store.status import read_status
from tests.daemon.support import append_turn, new_session
from tests.indexstate import index_state

PROBES = ("alpha", "omega", "hello", "turn", "shared")


def make_root(root: Path, prefix: str, count: int) -> list[Path]:
    paths = []
    for n in range(count):
        path, seq = new_session(root, f"{prefix}-{n:03d}", f"alpha {prefix} session {n} shared words", created_at=1_700_000_000_000 + n)
        for turn in range(n % 3):
            seq = append_turn(path, seq, f"omega turn {turn} of {prefix} {n}")
        paths.append(path)
    return paths


def reconcile(db: Path, root: Path, source: str, *, workers: int = 0) -> None:
    engine = open_writer(str(db))
    try:
        Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, batch_events=40, workers=workers, parallel_min_bytes=0, source=source).reconcile()
    finally:
        engine.dispose()


def concurrently(db: Path, jobs: list[tuple[Path, str, int]]) -> None:
    """Run one reconcile per job at once (each with its own connection); re-raise the first failure."""
    open_writer(str(db)).dispose()  # created once, before the race
    errors: list[BaseException] = []

    def run(root: Path, source: str, workers: int) -> None:
        try:
            reconcile(db, root, source, workers=workers)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def cold(tmp_path: Path, name: str, roots: list[tuple[Path, str]]) -> dict:
    db = tmp_path / f"{name}.db"
    for root, source in roots:
        reconcile(db, root, source)
    return index_state(str(db), PROBES)


def test_two_sources_writing_one_index_at_once_equal_a_cold_build_of_both_roots(tmp_path: Path) -> None:
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    paths_a = make_root(root_a, "a", 24)
    paths_b = make_root(root_b, "b", 24)
    db = tmp_path / "shared.db"
    # One writes alone, the other with preparation workers (sids handed out before its transactions).
    concurrently(db, [(root_a, "host-a", 0), (root_b, "host-b", 2)])
    state = index_state(str(db), PROBES)
    assert state == cold(tmp_path, "cold1", [(root_a, "host-a"), (root_b, "host-b")])
    assert {s["source"] for s in state["sessions"].values()} == {"host-a", "host-b"}

    # Each source's changes: appends, a deleted log, a new session; again at once.
    append_turn(paths_a[0], 9, "alpha appended to a")
    append_turn(paths_b[5], 9, "alpha appended to b")
    shutil.rmtree(paths_a[3].parent)
    new_session(root_b, "b-new", "omega brand new")
    concurrently(db, [(root_a, "host-a", 2), (root_b, "host-b", 0)])
    assert index_state(str(db), PROBES) == cold(tmp_path, "cold2", [(root_a, "host-a"), (root_b, "host-b")])


def test_a_daemon_deletes_only_its_own_sources_sessions(tmp_path: Path) -> None:
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    make_root(root_a, "a", 3)
    make_root(root_b, "b", 2)
    db = tmp_path / "index.db"
    reconcile(db, root_a, "host-a")
    reconcile(db, root_b, "host-b")
    # host-b's root vanishes entirely: host-b's daemon removes its own sessions, never host-a's.
    shutil.rmtree(root_b)
    root_b.mkdir()
    reconcile(db, root_b, "host-b")
    conn = sqlite3.connect(db)
    assert conn.execute('SELECT "source", count(*) FROM "sessions" GROUP BY "source"').fetchall() == [("host-a", 3)]
    # A host that stopped keeps its sessions: host-a's logs are gone here, but no pass of host-a ran.
    shutil.rmtree(root_a)
    reconcile(db, root_b, "host-b")
    assert conn.execute('SELECT count(*) FROM "sessions" WHERE "source" = \'host-a\'').fetchone() == (3,)


def test_a_session_id_another_source_holds_is_an_identity_problem_never_merged(tmp_path: Path) -> None:
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    new_session(root_a, "same-id", "alpha from host a")
    new_session(root_b, "same-id", "omega from host b")
    new_session(root_b, "b-own", "omega of b")
    db = tmp_path / "index.db"
    reconcile(db, root_a, "host-a")
    before = index_state(str(db), PROBES)["sessions"]["same-id"]
    reconcile(db, root_b, "host-b")
    state = index_state(str(db), PROBES)
    assert state["sessions"]["same-id"] == before  # host-a's row, untouched
    assert state["sessions"]["b-own"]["source"] == "host-b"
    status = read_status(str(db))
    (problem,) = [p for p in status["layoutProblems"] if p["kind"] == "identity"]
    assert problem["source"] == "host-b" and "host-a" in problem["message"] and "same-id" in problem["message"]
    by_source = {entry["source"]: entry for entry in status["sources"]}
    assert by_source["host-b"]["identityProblems"] == 1 and by_source["host-b"]["sessions"] == 1
    assert by_source["host-a"]["identityProblems"] == 0 and by_source["host-a"]["sessions"] == 1
    assert by_source["host-a"]["root"] == str(root_a) and "lastReconcileAt" in by_source["host-a"]
    # A targeted pass (a watch event on the clashing log) agrees with the full one.
    engine = open_writer(str(db))
    try:
        Reconciler(engine, root_b, Compression.ZSTD, settle_seconds=0, workers=0, source="host-b").reconcile_paths([str(next(root_b.rglob("same-id/session.jsonl.zstd")))])
    finally:
        engine.dispose()
    assert index_state(str(db), PROBES)["sessions"]["same-id"] == before
    # Once host-a's session is pruned, host-b's next pass indexes its own copy.
    from indexer.pruning import prune_source

    engine = open_writer(str(db))
    try:
        assert prune_source(engine, "host-a") == 1
    finally:
        engine.dispose()
    reconcile(db, root_b, "host-b")
    state = index_state(str(db), PROBES)
    assert state["sessions"]["same-id"]["source"] == "host-b"
    assert state == cold(tmp_path, "cold", [(root_b, "host-b")])


def test_an_invalid_source_name_is_refused(tmp_path: Path) -> None:
    engine = open_writer(str(tmp_path / "index.db"))
    try:
        with pytest.raises(ValueError, match="invalid source name"):
            Reconciler(engine, tmp_path, Compression.ZSTD, source="a/b")
    finally:
        engine.dispose()


def test_two_sources_may_report_problems_at_the_same_path(tmp_path: Path) -> None:
    """Hosts with the same root path: each source's layout problems are its own, none overwrites another's."""
    root = tmp_path / "root"
    (root / "project").mkdir(parents=True)
    (root / "project" / "stray.jsonl").write_text("{}\n")  # not a session directory: a layout problem
    db = tmp_path / "index.db"
    reconcile(db, root, "host-a")
    reconcile(db, root, "host-b")
    rows = sqlite3.connect(db).execute('SELECT "source", "kind" FROM "layout_problems" ORDER BY "source"').fetchall()
    assert [source for source, _ in rows] == ["host-a", "host-b"] and rows[0][1] == rows[1][1]
    generation = sqlite3.connect(db).execute('SELECT "global_generation" FROM "index_meta"').fetchone()
    reconcile(db, root, "host-a")
    reconcile(db, root, "host-b")  # nothing changed: no generation bump, no ping-pong
    assert sqlite3.connect(db).execute('SELECT "global_generation" FROM "index_meta"').fetchone() == generation


def test_an_id_another_source_commits_after_the_pass_looked_is_caught_in_the_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: host-b's pass read the owners before host-a committed the id; its transaction still refuses it."""
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    new_session(root_a, "raced", "alpha from host a")
    new_session(root_b, "raced", "omega from host b")
    db = tmp_path / "index.db"
    reconcile(db, root_a, "host-a")
    before = index_state(str(db), PROBES)["sessions"]["raced"]
    monkeypatch.setattr(Reconciler, "_other_owners", lambda self: {})  # what host-b saw before host-a's commit
    reconcile(db, root_b, "host-b")
    assert index_state(str(db), PROBES)["sessions"]["raced"] == before
    (problem,) = read_status(str(db))["layoutProblems"]
    assert problem["kind"] == "identity" and problem["source"] == "host-b" and "host-a" in problem["message"]
