"""``sessionq db upgrade|current|check --db postgresql://…``: the same migrations build the schema there."""

from __future__ import annotations

import psycopg
from alembic import command
from click.testing import CliRunner

from indexer.cli import main
from readmodel.store.postgres import create_postgres_engine
from readmodel.store.revisions import alembic_config
from readmodel.store.schema import SCHEMA_REVISION, SERVER_TABLES, metadata


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args))


def test_db_upgrade_creates_the_relational_schema_and_check_finds_no_drift(postgres_url: str) -> None:
    assert run("db", "current", "--db", postgres_url).exit_code == 1  # empty: not an index yet
    created = run("db", "upgrade", "--db", postgres_url)
    assert created.exit_code == 0 and f"created at {SCHEMA_REVISION} (head)" in created.output, created.output
    assert run("db", "current", "--db", postgres_url).output.strip() == f"{SCHEMA_REVISION} (head)"
    checked = run("db", "check", "--db", postgres_url)
    assert checked.exit_code == 0 and "schema matches the models" in checked.output, checked.output
    assert f"already at {SCHEMA_REVISION}" in run("db", "upgrade", "--db", postgres_url).output
    with psycopg.connect(postgres_url) as conn:
        tables = {row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        # No FTS5 (PostgreSQL never tokenises): terms with positions and gram keys instead (0014).
        assert tables == set(metadata.tables) | {"alembic_version"} | set(SERVER_TABLES)
        types = dict(conn.execute(
            "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns WHERE table_schema = 'public'"
        ).fetchall())
        # Epoch-millisecond times and packed document ids need 64 bits: every integer column is BIGINT,
        # whether a table was created with it or a later migration added it.
        assert types["documents.docid"] == types["events.time"] == types["documents.time"] == "bigint"
        assert types["sessions.last_activity"] == types["event_links.span"] == types["index_meta.next_sid"] == "bigint"
        modelled = {name: kind for name, kind in types.items() if name.partition(".")[0] in metadata.tables}
        assert "integer" not in modelled.values(), sorted(name for name, kind in modelled.items() if kind == "integer")
        assert types["postings.term"] == types["postings.docid"] == types["document_gram_keys.docid"] == "bigint"
        assert conn.execute('SELECT count(*), min("global_generation") FROM "index_meta"').fetchone() == (1, 0)
        # The partial index of the current surface exists there too.
        (definition,) = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'events_surface'").fetchone()
        assert "WHERE (surface = 1)" in definition


def test_an_older_postgresql_schema_is_upgraded_through_every_migration(postgres_url: str) -> None:
    engine = create_postgres_engine(postgres_url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0005")
        conn.exec_driver_sql(
            "INSERT INTO index_meta (singleton, identity, global_generation, created_at) VALUES (1, 'old', 0, 0)"
        )
    engine.dispose()
    upgraded = run("db", "upgrade", "--db", postgres_url, "--source", "pg-host")
    assert upgraded.exit_code == 0 and f"upgraded 0005 -> {SCHEMA_REVISION}" in upgraded.output, upgraded.output
    assert run("db", "check", "--db", postgres_url).exit_code == 0
    with psycopg.connect(postgres_url) as conn:
        identity, secret = conn.execute('SELECT "identity", "cursor_secret" FROM "index_meta"').fetchone()
        assert identity == "old" and len(secret) == 32


def test_a_database_with_foreign_tables_is_refused_untouched(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    for args in (("db", "upgrade"), ("db", "current"), ("db", "check")):
        result = run(*args, "--db", postgres_url)
        assert result.exit_code == 1 and "holds tables sessionq does not know (invoices)" in result.output, result.output
    with psycopg.connect(postgres_url) as conn:
        assert [row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")] == ["invoices"]


def test_status_reports_on_a_postgresql_index_with_its_sources(postgres_url: str) -> None:
    import json
    import time

    assert run("db", "upgrade", "--db", postgres_url).exit_code == 0
    with psycopg.connect(postgres_url) as conn:  # what a phase-2 daemon of source pg-host will write
        conn.execute(
            'INSERT INTO "sources" ("source", "root", "first_seen_at", "last_reconcile_at", "generation") VALUES (%s, %s, %s, %s, 3)',
            ("pg-host", "/home/me/.dsh/sessions", time.time(), time.time()),
        )
        conn.execute(
            'INSERT INTO "layout_problems" ("path", "kind", "message", "observed_at", "source") VALUES (%s, %s, %s, %s, %s)',
            ("/home/me/.dsh/sessions/p/x/session.jsonl.zstd", "identity", "held by another source", 1.0, "pg-host"),
        )
    result = run("status", "--db", postgres_url, "--json")
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["schemaRevision"] == status["headRevision"] == SCHEMA_REVISION
    assert status["sessions"] == status["events"] == status["documents"] == 0
    assert "fileSize" not in status and "writerPid" not in status
    (entry,) = status["sources"]
    assert entry["source"] == "pg-host" and entry["identityProblems"] == 1 and entry["sessions"] == 0
    assert status["layoutProblems"][0]["source"] == "pg-host"
    text = run("status", "--db", postgres_url)
    assert text.exit_code == 0 and "schema      " + SCHEMA_REVISION in text.output and "pg-host" in text.output


def test_status_of_an_empty_postgresql_database_says_to_upgrade_and_masks_the_password(postgres_server, postgres_url: str) -> None:  # type: ignore[no-untyped-def]
    result = run("status", "--db", postgres_url)
    assert result.exit_code == 1 and "is empty; run `sessionq db upgrade` first" in result.output, result.output
    if postgres_server.password:
        assert postgres_server.password not in result.output
