"""Migration 0015: a session's path is unique per source, not across sources; existing indexes keep every row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.store.database import open_writer
from readmodel.store.revisions import alembic_config, current_revision
from readmodel.store.schema import SCHEMA_REVISION
from readmodel.store.schemacheck import schema_drift
from tests.indexstate import index_state
from tests.sources.test_many_sources import PROBES, make_root


def test_an_existing_sqlite_index_is_rebuilt_with_every_row_and_paths_unique_per_source(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_root(root, "m", 6)
    db = tmp_path / "index.db"
    engine = open_writer(str(db), root=str(root))
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, workers=0, source="host-a").reconcile()
    before = index_state(str(db), PROBES)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0014")
    engine.dispose()
    conn = sqlite3.connect(db)
    path = conn.execute('SELECT "path" FROM "sessions" LIMIT 1').fetchone()[0]
    assert "UNIQUE (path)" in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'sessions'").fetchone()[0]
    events = conn.execute('SELECT count(*) FROM "events"').fetchone()[0] + conn.execute('SELECT count(*) FROM "event_runs"').fetchone()[0]
    assert events > 0
    conn.close()

    engine = open_writer(str(db), allow_upgrade=True)
    with engine.connect() as c:
        assert current_revision(c) == SCHEMA_REVISION == "0021"
        assert schema_drift(c) == []
    engine.dispose()
    assert index_state(str(db), PROBES) == before  # no row lost: the rebuild did not cascade to the events
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = ON")
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    columns = '"sid", "id", "path", "header_json", "id_key", "revision", "size", "event_count", "stored_count", "tail_state", "status", "generation", "indexed_at", "source"'
    row = "?, ?, ?, x'7b7d', x'00', '', 0, 0, 0, 'clean', 'ok', 0, 0, ?"
    conn.execute(f'INSERT INTO "sessions" ({columns}) VALUES ({row})', (9001, "other-host-session", path, "host-b"))  # another host, same path
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(f'INSERT INTO "sessions" ({columns}) VALUES ({row})', (9002, "third-session", path, "host-a"))
    conn.close()


def test_a_new_sqlite_index_has_the_same_schema_as_an_upgraded_one(tmp_path: Path) -> None:
    engine = open_writer(str(tmp_path / "new.db"))
    with engine.connect() as c:
        assert schema_drift(c) == []
        ddl = c.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'sessions_source'").scalar()
    engine.dispose()
    assert ddl.startswith("CREATE UNIQUE INDEX")
