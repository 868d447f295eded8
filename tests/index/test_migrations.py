"""Alembic migrations: an index at an older revision is refused, then upgraded in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.store.database import (
    IndexDatabaseError,
    alembic_config,
    create_index_engine,
    current_revision,
    open_writer,
)
from readmodel.store.schema import APPLICATION_ID, SCHEMA_REVISION
from tests.logfactory import header, simple_turn, write_log


def index_at_first_revision(path: Path, root: Path) -> None:
    engine = create_index_engine(str(path))
    with engine.begin() as conn:
        conn.exec_driver_sql(f"PRAGMA application_id = {APPLICATION_ID}")
        command.upgrade(alembic_config(conn), "0001")
        conn.exec_driver_sql(
            "INSERT INTO index_meta (singleton, identity, global_generation, created_at) VALUES (1, 'old', 0, 0)"
        )
    engine.dispose()


def test_an_older_index_is_refused_until_upgraded_and_keeps_its_rows(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_log(root, header("kept"), [simple_turn()])
    db = tmp_path / "index.db"
    index_at_first_revision(db, root)
    with pytest.raises(IndexDatabaseError, match="sessionq db upgrade"):
        open_writer(str(db))
    engine = open_writer(str(db), allow_upgrade=True)
    with engine.connect() as conn:
        assert current_revision(conn) == SCHEMA_REVISION == "0005"
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
    engine.dispose()
    conn = sqlite3.connect(db)
    plan = conn.execute('EXPLAIN QUERY PLAN SELECT "header_json" FROM "sessions" ORDER BY "created_at" DESC, "id_key"').fetchall()
    assert "COVERING INDEX sessions_listing" in plan[0][3]
    assert conn.execute('SELECT "id" FROM "sessions"').fetchall() == [("kept",)]
    assert conn.execute('SELECT "identity" FROM "index_meta"').fetchone() == ("old",)
