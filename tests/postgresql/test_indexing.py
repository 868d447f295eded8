"""`sessionq index --db postgresql://…`: the indexer writes a PostgreSQL index equal to a SQLite one.

Every table row for row (sessions keyed by id, documents and events by
(session id, seq): sids may differ), raw lines decoded, and the search rows:
each (term, document)'s positions equal FTS5's own ``fts5vocab`` instance
rows of the SQLite index built from the same root, and each document's gram
keys equal its ``document_grams`` words.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from indexer.cli import main
from readmodel.query import SessionQuery
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT
from tests.daemon.support import append_turn, new_session
from tests.indexstate import diff_states, index_state
from tests.postgresql.state import pg_state, sqlite_columns, sqlite_search_rows
from tests.sources.test_many_sources import make_root

COMMON = ("sessions", "events", "raw_events", "event_links", "documents", "layout_problems", "document_hashes", "consistency")


def index(root: Path, db: str, source: str = "host-a", *extra: str) -> str:
    result = CliRunner().invoke(main, ["index", "--once", "--root", str(root), "--db", db, "--source", source, "--workers", "0", *extra])
    assert result.exit_code == 0, result.output
    return result.output


def assert_same_index(sqlite_db: Path, url: str) -> None:
    want = index_state(str(sqlite_db))
    want.update(sqlite_search_rows(str(sqlite_db)))
    have = pg_state(url, sqlite_columns(str(sqlite_db)))
    assert want["consistency"] == [] and have["consistency"] == []
    sections = (*COMMON, "postings", "gram_keys")
    differences = diff_states({k: want[k] for k in sections}, {k: have[k] for k in sections})
    assert differences == []
    assert want["sessions"], "the corpus indexed something"


@pytest.mark.parametrize("root", [ZSTD_ROOT, SYNTHETIC_ROOT], ids=["shared", "synthetic"])
def test_a_postgresql_index_equals_the_sqlite_index_of_the_same_root_row_for_row(root: Path, postgres_url: str, tmp_path: Path) -> None:
    sqlite_db = tmp_path / "index.db"
    index(root, str(sqlite_db))
    output = index(root, postgres_url)
    assert make_url(postgres_url).password not in output and "***" in output  # the summary masks the password
    assert_same_index(sqlite_db, postgres_url)


def test_incremental_indexing_into_postgresql_equals_a_cold_sqlite_build(postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    paths = make_root(root, "inc", 12)
    # The first pass prepares the new sessions in worker processes (their recorded
    # statements are replayed on the PostgreSQL cursor); later passes read in the writer.
    monkeypatch.setenv("SESSIONQ_PARALLEL_MIN_BYTES", "0")
    index(root, postgres_url, "host-a", "--workers", "2")
    for n, path in enumerate(paths[:6]):
        append_turn(path, 9 + 9 * (n % 3), f"omega appended turn {n} with tokenizer words")
    shutil.rmtree(paths[7].parent)  # a deleted session: its rows and search rows go
    new_session(root, "inc-new", "alpha a session new to the index")
    index(root, postgres_url)
    sqlite_db = tmp_path / "cold.db"
    index(root, str(sqlite_db))
    assert_same_index(sqlite_db, postgres_url)


def test_a_server_restarted_mid_pass_loses_nothing_the_next_pass_redoes_the_batch(postgres_server, postgres_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from indexer.layout import Compression
    from indexer.reconcile import Reconciler
    from readmodel.store.postgres import open_writer

    root = tmp_path / "root"
    make_root(root, "restart", 30)
    engine = open_writer(postgres_url)
    calls = []

    def restart_once(done: int, total: int, events: int) -> None:
        calls.append(done)
        if len(calls) == 12:  # mid-pass: earlier batches are committed, this one is open
            postgres_server.restart()

    reconciler = Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, batch_events=40, workers=0, source="host-a", progress=restart_once)
    try:
        with pytest.raises(Exception) as failure:  # noqa: PT011 - whatever psycopg says of the lost connection
            reconciler.reconcile()
        assert "terminat" in str(failure.value) or "connection" in str(failure.value).lower()
        reconciler.progress = None
        report = reconciler.reconcile()  # a new connection (no pool): the interrupted batch again
        assert report.failed == 0 and report.reloaded > 0
    finally:
        engine.dispose()
    sqlite_db = tmp_path / "cold.db"
    index(root, str(sqlite_db))
    assert_same_index(sqlite_db, postgres_url)


def test_three_daemons_of_three_sources_writing_one_database_at_once_while_readers_query_equal_one_cold_build(postgres_url: str, tmp_path: Path) -> None:
    roots = []
    for name in ("a", "b", "c"):
        make_root(tmp_path / name, name, 16)
        roots.append((tmp_path / name, f"host-{name}"))
    upgraded = CliRunner().invoke(main, ["db", "upgrade", "--db", postgres_url])  # the schema before the race
    assert upgraded.exit_code == 0, upgraded.output
    processes = [
        subprocess.Popen(
            [str(Path(sys.executable).parent / "sessionq"), "index", "--once", "--root", str(root), "--db", postgres_url, "--source", source, "--workers", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        for root, source in roots
    ]
    # Readers query the database while the three write (one snapshot per answer).
    stop, answers, errors = threading.Event(), [], []

    def read() -> None:
        query = SessionQuery.open(postgres_url)
        try:
            while not stop.is_set():
                try:
                    answers.append((len(query.list_sessions()), len(query.search_sessions({"query": "alpha", "limit": 5}).items)))
                except Exception as exc:  # noqa: BLE001 - counted: the test wants none
                    errors.append(exc)
        finally:
            query.close()

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    try:
        outputs = [process.communicate(timeout=120)[0] for process in processes]
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert errors == [] and answers
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    assert not any("ERROR" in output or "failed" in output.replace("0 failed", "") for output in outputs), outputs
    sqlite_db = tmp_path / "cold.db"
    for root, source in roots:
        index(root, str(sqlite_db), source)
    assert_same_index(sqlite_db, postgres_url)


def test_a_second_indexer_of_one_source_is_refused_while_other_sources_index(postgres_url: str, tmp_path: Path) -> None:
    from indexer.pgwriter import LockHeld, SourceLock

    make_root(tmp_path / "a", "a", 2)
    index(tmp_path / "a", postgres_url, "host-a")
    held = SourceLock(postgres_url, "host-a")
    held.acquire()
    try:
        result = CliRunner().invoke(main, ["index", "--once", "--root", str(tmp_path / "a"), "--db", postgres_url, "--source", "host-a"])
        assert result.exit_code == 1
        assert "another sessionq indexer" in result.output and "for source host-a" in result.output
        assert make_url(postgres_url).password not in result.output
        index(tmp_path / "a", postgres_url, "host-b")  # another source is not held up
        with pytest.raises(LockHeld):
            SourceLock(postgres_url, "host-a").acquire()
    finally:
        held.release()


def test_an_unreachable_server_is_one_line_and_exit_1_with_once(tmp_path: Path) -> None:
    url = "postgresql://sessionq:secret-pw@127.0.0.1:1/index"
    result = CliRunner().invoke(main, ["index", "--once", "--root", str(tmp_path), "--db", url])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot connect to PostgreSQL (host 127.0.0.1:1, database index)")
    assert "secret-pw" not in result.output


def test_prune_removes_a_sources_sessions_and_search_rows_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    make_root(tmp_path / "a", "a", 4)
    make_root(tmp_path / "b", "b", 4)
    index(tmp_path / "a", postgres_url, "host-a")
    index(tmp_path / "b", postgres_url, "host-b")
    result = CliRunner().invoke(main, ["prune", "--db", postgres_url, "--source", "host-b", "--yes"])
    assert result.exit_code == 0, result.output
    assert "removed 4 sessions of source host-b" in result.output and make_url(postgres_url).password not in result.output
    with psycopg.connect(postgres_url) as conn:
        held = conn.execute('SELECT count(DISTINCT "hash") FROM "text_documents"').fetchone()[0]
        for table in ("search_texts", "text_postings", "text_grams", "text_prefixes"):
            # host-b's own texts are gone with its sessions; texts host-a holds too stay
            orphans = conn.execute(f'SELECT count(*) FROM "{table}" t WHERE NOT EXISTS (SELECT 1 FROM "text_documents" d WHERE d."hash" = t."hash")').fetchone()[0]
            assert orphans == 0, table
        assert conn.execute('SELECT count(*) FROM "search_texts"').fetchone()[0] == held > 0
    sqlite_db = tmp_path / "a.db"
    index(tmp_path / "a", str(sqlite_db), "host-a")
    assert_same_index(sqlite_db, postgres_url)


def test_the_whole_migration_chain_runs_on_a_postgresql_index_holding_rows(postgres_url: str, tmp_path: Path) -> None:
    """Down to 0009 and up again on PostgreSQL with sessions stored: 0010's backfill (named binds), 0012's
    labelling, 0013's hashes, 0014's postings and 0015's per-source paths; the index equals a cold one."""
    from alembic import command

    from readmodel.store.postgres import connect
    from readmodel.store.revisions import alembic_config

    root = tmp_path / "root"
    make_root(root, "chain", 5)
    index(root, postgres_url, "host-a")
    engine, conn = connect(postgres_url)
    try:
        with conn.begin():
            command.downgrade(alembic_config(conn), "0009")
        with conn.begin():
            command.upgrade(alembic_config(conn, source="host-a"), "head")
    finally:
        conn.close()
        engine.dispose()
    sqlite_db = tmp_path / "cold.db"
    index(root, str(sqlite_db), "host-a")
    assert_same_index(sqlite_db, postgres_url)  # last_activity again by 0010's backfill, postings by 0014's


def test_the_daemon_keeps_indexing_across_a_server_restart_and_reports_status_per_source(processes, postgres_server, postgres_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A running `sessionq index` daemon: the server restarts, the daemon reconnects (and takes its
    source lock again), indexes what changed meanwhile; the final index equals a cold build."""
    import psycopg

    from tests.daemon.support import wait_for

    root = tmp_path / "root"
    paths = make_root(root, "live", 6)
    daemon = processes.start("index", "--root", str(root), "--db", postgres_url, "--source", "host-a", "--workers", "0", "--settle", "0", name="daemon")
    daemon.wait_ready()

    def stored(sql: str) -> Any:
        try:
            with psycopg.connect(postgres_url) as conn:
                return conn.execute(sql).fetchone()[0]
        except psycopg.OperationalError:
            return None

    postgres_server.restart()
    append_turn(paths[0], 9, "omega after the restart")
    new_session(root, "live-new", "alpha born after the restart")
    wait_for(lambda: stored("SELECT count(*) FROM sessions") == 7, 30, 0.1, "the new session through the restarted server")
    wait_for(lambda: stored("SELECT max(event_count) FROM sessions WHERE id = 'live-000'") == 18, 30, 0.1, "the append")
    assert "taking the source lock again" in daemon.stderr()  # its lock's connection died with the server
    assert "another sessionq indexer" not in daemon.stderr()
    status = CliRunner().invoke(main, ["status", "--json", "--db", postgres_url])
    assert status.exit_code == 0, status.output
    assert daemon.stop() == 0
    sqlite_db = tmp_path / "cold.db"
    index(root, str(sqlite_db), "host-a")
    assert_same_index(sqlite_db, postgres_url)
    entries = json.loads(status.output)["sources"]
    assert [(entry["source"], entry["sessions"]) for entry in entries] == [("host-a", 7)]


def test_the_daemon_waits_for_an_unreachable_server_logging_it_once(processes, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import time

    url = "postgresql://sessionq:secret-pw@127.0.0.1:1/index"
    daemon = processes.start("index", "--root", str(tmp_path), "--db", url, "--source", "host-a", name="daemon")
    from tests.daemon.support import wait_for

    def errors() -> list[str]:
        return [line for line in daemon.stderr().splitlines() if "cannot connect to PostgreSQL" in line]

    wait_for(errors, 30, 0.1, "the first failure's line")
    time.sleep(3.5)  # back-off 1 s, 2 s: more attempts, no more lines
    assert daemon.popen.poll() is None, daemon.stderr()  # still waiting, not exited
    errors = errors()  # type: ignore[assignment]
    assert len(errors) == 1 and "retrying with back-off" in errors[0]
    assert "secret-pw" not in daemon.stderr()


def test_a_header_postgresql_text_cannot_hold_is_a_layout_problem_and_the_others_are_indexed(postgres_url: str, tmp_path: Path) -> None:
    import psycopg

    from tests.logfactory import header, simple_turn, write_log

    root = tmp_path / "root"
    write_log(root, header("good"), [simple_turn(0, "fine")])
    write_log(root, header("nul-cwd", cwd="/work/a\x00b"), [simple_turn(0, "text")])
    index(root, postgres_url)
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute('SELECT "id", "status" FROM "sessions"').fetchall() == [("good", "ok")]
        (kind, message), = conn.execute('SELECT "kind", "message" FROM "layout_problems"').fetchall()
    assert kind == "unindexable" and "NUL character" in message
