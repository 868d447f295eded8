"""Migration 0012 on an existing index: sessions are labelled, nothing else changes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alembic import command

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.store.database import create_index_engine, open_writer
from readmodel.store.revisions import alembic_config, current_revision
from readmodel.store.schema import SCHEMA_REVISION
from readmodel.store.schemacheck import schema_drift
from readmodel.store.sources import default_source
from tests.daemon.support import new_session
from tests.indexstate import index_state
from tests.sources.test_many_sources import PROBES


def index_at_0007(tmp_path: Path) -> tuple[Path, Path]:
    """An index built and then taken back to revision 0007 (before sources), rows kept."""
    root = tmp_path / "root"
    for n in range(3):
        new_session(root, f"old-{n}", f"alpha {n}")
    db = tmp_path / "index.db"
    engine = open_writer(str(db), root=str(root))
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, workers=0).reconcile()
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0007")
    engine.dispose()
    return root, db


def test_an_index_from_before_sources_is_labelled_with_the_upgrading_source(tmp_path: Path) -> None:
    root, db = index_at_0007(tmp_path)
    conn = sqlite3.connect(db)
    assert "source" not in {row[1] for row in conn.execute('PRAGMA table_info("sessions")')}
    assert conn.execute('SELECT count(*) FROM "events"').fetchone()[0] > 0  # the downgrade kept every row
    engine = open_writer(str(db), allow_upgrade=True, source="old-host")
    with engine.connect() as c:
        assert current_revision(c) == SCHEMA_REVISION  # 0012 and the revisions after it
        assert schema_drift(c) == []
    engine.dispose()
    assert conn.execute('SELECT DISTINCT "source" FROM "sessions"').fetchall() == [("old-host",)]
    assert conn.execute('SELECT "source", "root" FROM "sources"').fetchall() == [("old-host", str(root))]
    # The upgraded index equals a cold build by that source.
    cold = tmp_path / "cold.db"
    engine = open_writer(str(cold))
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, workers=0, source="old-host").reconcile()
    engine.dispose()
    assert index_state(str(db), PROBES) == index_state(str(cold), PROBES)


def test_without_a_named_source_the_host_name_labels_them(tmp_path: Path) -> None:
    _root, db = index_at_0007(tmp_path)
    engine = create_index_engine(str(db))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "head")
    engine.dispose()
    assert sqlite3.connect(db).execute('SELECT DISTINCT "source" FROM "sessions"').fetchall() == [(default_source(),)]
