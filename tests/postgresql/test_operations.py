"""Operating a PostgreSQL index: its generation without a hot row, and ``db upgrade`` beside running indexers."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import psycopg
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from indexer.cli import main
from indexer.pgwriter import SourceLock
from readmodel.store.postgres import LOCK_CLASS, source_key
from tests.daemon.support import append_turn
from tests.postgresql.test_indexing import index
from tests.sources.test_many_sources import make_root


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args))


def status(url: str) -> dict:  # type: ignore[type-arg]
    result = run("status", "--json", "--db", url)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def counters(url: str) -> tuple[int, dict[str, int]]:
    with psycopg.connect(url) as conn:
        (base,) = conn.execute('SELECT "global_generation" FROM "index_meta"').fetchone()
        return base, dict(conn.execute('SELECT "source", "generation" FROM "sources"').fetchall())


def test_status_generation_on_postgresql_counts_every_sources_commits_and_never_goes_back(postgres_url: str, tmp_path: Path) -> None:
    from readmodel.store.pgreader import PostgresIndexStore

    paths = make_root(tmp_path / "a", "a", 3)
    make_root(tmp_path / "b", "b", 2)
    index(tmp_path / "a", postgres_url, "host-a")
    index(tmp_path / "b", postgres_url, "host-b")
    first = status(postgres_url)
    base, per_source = counters(postgres_url)
    assert base == 0 and per_source["host-a"] > 0 and per_source["host-b"] > 0  # no global row written per batch
    assert first["generation"] == sum(per_source.values())
    assert {entry["source"]: entry["generation"] for entry in first["sources"]} == per_source
    assert first["lastReconcileAt"] >= max(entry["lastReconcileAt"] for entry in first["sources"])
    assert "generation " in run("status", "--db", postgres_url).output

    index(tmp_path / "b", postgres_url, "host-b")  # nothing changed: nothing bumped
    assert status(postgres_url)["generation"] == first["generation"]
    append_turn(paths[0], 1, "omega appended")
    index(tmp_path / "a", postgres_url, "host-a")
    second = status(postgres_url)["generation"]
    assert second == first["generation"] + 1

    store = PostgresIndexStore.open(postgres_url)
    try:
        with store.read() as reader:
            vector, number = reader.generation(), reader.generation_number()
        assert number == second
        # A prune moves the source's counter into index_meta (plus one): the number still grows, and
        # the source indexed again from 0 never repeats a vector a cursor was signed under.
        assert run("prune", "--db", postgres_url, "--source", "host-b", "--yes").exit_code == 0
        assert status(postgres_url)["generation"] == second + 1
        index(tmp_path / "b", postgres_url, "host-b")
        with store.read() as reader:
            assert reader.generation_number() > second + 1
            assert counters(postgres_url)[1]["host-b"] == per_source["host-b"]  # the same counter as before …
            assert reader.generation() != vector  # … yet another vector
    finally:
        store.close()


def test_the_event_feed_announces_a_growing_number_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    from readmodel.http.events import read_generation
    from readmodel.query import SessionQuery

    paths = make_root(tmp_path / "a", "a", 2)
    index(tmp_path / "a", postgres_url, "host-a")
    engine = SessionQuery.open(postgres_url)
    try:
        before = read_generation(engine)
        assert isinstance(before, int) and before > 0
        append_turn(paths[1], 1, "omega appended")
        index(tmp_path / "a", postgres_url, "host-a")
        assert read_generation(engine) == before + 1
    finally:
        engine.close()


def running(url: str, source: str) -> SourceLock:
    """The locks of a running indexer of ``source`` (taken as ``sessionq index`` does)."""
    lock = SourceLock(url, source)
    lock.acquire()
    lock.settle()
    return lock


def downgrade_one_revision(url: str) -> str:
    from alembic import command

    from readmodel.store.postgres import connect
    from readmodel.store.revisions import alembic_config, current_revision

    engine, conn = connect(url)
    try:
        with conn.begin():
            command.downgrade(alembic_config(conn), "-1")
        return current_revision(conn) or ""
    finally:
        conn.close()
        engine.dispose()


def test_db_upgrade_refuses_in_one_line_naming_the_sources_whose_indexers_run(postgres_url: str, tmp_path: Path) -> None:
    make_root(tmp_path / "a", "a", 1)
    make_root(tmp_path / "b", "b", 1)
    index(tmp_path / "a", postgres_url, "host-a")
    index(tmp_path / "b", postgres_url, "host-b")
    held = [running(postgres_url, "host-a"), running(postgres_url, "host-b")]
    try:
        assert "already at" in run("db", "upgrade", "--db", postgres_url).output  # nothing to change: no refusal
        older = downgrade_one_revision(postgres_url)
        result = run("db", "upgrade", "--db", postgres_url)
        assert result.exit_code == 1
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "the indexers of sources host-a, host-b are running; stop them first" in lines[0], result.output
        assert make_url(postgres_url).password not in result.output
        held.pop().release()
        result = run("db", "upgrade", "--db", postgres_url)
        assert result.exit_code == 1 and "sources host-a are running" in result.output
    finally:
        for lock in held:
            lock.release()
    result = run("db", "upgrade", "--db", postgres_url)
    assert result.exit_code == 0 and f"upgraded {older} ->" in result.output, result.output


def test_db_upgrade_refuses_an_older_indexer_holding_only_its_source_lock_but_not_one_starting(postgres_url: str, tmp_path: Path) -> None:
    make_root(tmp_path / "a", "a", 1)
    index(tmp_path / "a", postgres_url, "host-a")
    downgrade_one_revision(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as old:  # an indexer from before the index lock
        old.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, source_key("host-a")))
        result = run("db", "upgrade", "--db", postgres_url)
        assert result.exit_code == 1 and "the indexers of sources host-a are running" in result.output, result.output
        old.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, source_key("not-indexed-yet")))
        result = run("db", "upgrade", "--db", postgres_url)
        assert "a source not in the index yet" in result.output
    starting = SourceLock(postgres_url, "host-b")
    starting.acquire()  # before its schema check: it checks again when it settles
    try:
        result = run("db", "upgrade", "--db", postgres_url)
        assert result.exit_code == 0 and "upgraded" in result.output, result.output
        starting.settle()  # the schema it finds is the one it writes
    finally:
        starting.release()


def test_an_indexer_settling_during_an_upgrade_waits_for_its_commit(postgres_url: str, tmp_path: Path) -> None:
    from readmodel.store.postgres import INDEX_LOCK_KEY

    make_root(tmp_path / "a", "a", 1)
    index(tmp_path / "a", postgres_url, "host-a")
    taken = threading.Event()
    lock = SourceLock(postgres_url, "host-a")
    lock.acquire()
    try:
        with psycopg.connect(postgres_url) as upgrading:  # an upgrade's transaction: the index lock exclusively
            upgrading.execute("SELECT pg_advisory_xact_lock(%s)", (INDEX_LOCK_KEY,))
            waiter = threading.Thread(target=lambda: (lock.settle(), taken.set()))
            waiter.start()
            time.sleep(0.5)
            assert not taken.is_set()  # waiting, not writing into a schema being changed
            upgrading.commit()
            assert taken.wait(10)
        waiter.join()
    finally:
        lock.release()


def test_indexers_of_three_sources_starting_at_once_on_an_empty_database_all_index(postgres_url: str, tmp_path: Path) -> None:
    """Each creates the schema if it finds none (serialised; the later ones find it made): a
    starting indexer never makes another's creation refuse."""
    import subprocess
    import sys

    for name in "abc":
        make_root(tmp_path / name, name, 2)
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "indexer.cli", "index", "--once", "--root", str(tmp_path / name), "--db", postgres_url, "--source", f"host-{name}", "--workers", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in "abc"
    ]
    outcomes = [(process.wait(120), process.stderr.read().decode()) for process in processes]  # type: ignore[union-attr]
    assert [code for code, _ in outcomes] == [0, 0, 0], outcomes
    assert sorted(entry["source"] for entry in status(postgres_url)["sources"]) == ["host-a", "host-b", "host-c"]


def test_search_while_live_sessions_exist_answers_on_postgresql_and_reads_still_work(postgres_url: str, tmp_path: Path) -> None:
    """Issue #18: the live overlay is searched on PostgreSQL too (tests/postgresql/test_live_search.py
    compares every answer with SQLite's); a live session without the word hides nothing else."""
    from readmodel.live import InMemoryLiveSource
    from readmodel.query import SessionQuery

    make_root(tmp_path / "a", "a", 2)
    index(tmp_path / "a", postgres_url, "host-a")
    live = InMemoryLiveSource()
    engine = SessionQuery.open(postgres_url, live=live)
    try:
        before = engine.search_sessions({"query": "alpha"})
        assert before.items  # no live session: searched as without one
        live.create({"version": 0, "id": "live-1", "createdAt": 1_800_000_000_000})
        assert engine.search_sessions({"query": "alpha"}).items == before.items
        assert engine.search_events({"sessionId": "a-000", "query": "alpha"}).items
        assert engine.search_events({"sessionId": "live-1", "query": "alpha"}).items == []
        assert "live-1" in [record.header["id"] for record in engine.list_sessions()]  # reads overlay them
    finally:
        engine.close()


def test_readers_reconnect_after_a_server_restart_and_a_sound_connection_costs_no_check_statement(postgres_server, postgres_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from readmodel.query import SessionQuery

    make_root(tmp_path / "a", "a", 2)
    index(tmp_path / "a", postgres_url, "host-a")
    engine = SessionQuery.open(postgres_url)
    statements: list[str] = []
    original = psycopg.Cursor.execute

    def counting(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        statements.append(str(query))
        return original(self, query, params, **kwargs)

    try:
        before = [record.header["id"] for record in engine.list_sessions()]
        psycopg.Cursor.execute = counting  # type: ignore[method-assign]
        try:
            assert [record.header["id"] for record in engine.list_sessions()] == before
        finally:
            psycopg.Cursor.execute = original  # type: ignore[method-assign]
        assert statements and not any(query.strip() in ("SELECT 1", ";") for query in statements)  # no ping
        postgres_server.restart()  # every pooled connection dies
        assert [record.header["id"] for record in engine.list_sessions()] == before
        assert engine.search_sessions({"query": "alpha"}).items
    finally:
        engine.close()
