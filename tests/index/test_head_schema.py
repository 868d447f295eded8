"""A new SQLite index's schema from the head's snapshot (``readmodel.store.headschema``, issue 21).

The snapshot must give exactly the database Alembic's revisions give, and must
be regenerated whenever a migration is added.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from readmodel.store import headschema, headschemagen
from readmodel.store.database import create_index_engine, open_writer
from readmodel.store.revisions import head_revision, upgrade
from readmodel.store.schema import APPLICATION_ID, SCHEMA_REVISION

REPO = Path(__file__).resolve().parents[2]


def _schema_by(path: Path, how: str) -> None:
    engine = create_index_engine(str(path))
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"PRAGMA application_id = {APPLICATION_ID}")
            if how == "snapshot":
                headschema.create(conn)
            else:
                upgrade(conn)
    finally:
        engine.dispose()


_PRAGMAS = ("application_id", "user_version", "page_size", "auto_vacuum", "encoding", "journal_mode")


def _everything(path: Path) -> dict[str, Any]:
    """What a database holds: its catalogue in order, every table's rows (FTS5's shadow tables too), its settings."""
    conn = sqlite3.connect(path)
    try:
        master = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid").fetchall()
        virtual = {name for kind, name, _table, sql in master if kind == "table" and sql and sql.upper().startswith("CREATE VIRTUAL")}
        rows = {
            name: sorted(conn.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr)
            for kind, name, _table, _sql in master
            if kind == "table" and name not in virtual
        }
        pragmas = {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in _PRAGMAS}
        return {"master": master, "rows": rows, "pragmas": pragmas}
    finally:
        conn.close()


def test_the_snapshot_is_of_the_head_revision_and_up_to_date() -> None:
    """Fails when a migration was added (or changed) without `python -m readmodel.store.headschemagen`."""
    text = headschema.SNAPSHOT.read_text(encoding="utf-8")
    assert headschema.snapshot_revision(text) == SCHEMA_REVISION == head_revision()
    assert text == headschemagen.generate(), "regenerate it: python -m readmodel.store.headschemagen"


def test_a_schema_from_the_snapshot_equals_the_one_alembic_creates(tmp_path: Path) -> None:
    _schema_by(tmp_path / "snapshot.db", "snapshot")
    _schema_by(tmp_path / "alembic.db", "alembic")
    snapshot, alembic = _everything(tmp_path / "snapshot.db"), _everything(tmp_path / "alembic.db")
    assert snapshot["master"] == alembic["master"]
    assert snapshot["rows"] == alembic["rows"]
    assert snapshot["rows"]["alembic_version"] == [(SCHEMA_REVISION,)]
    assert any(kind == "trigger" for kind, *_ in snapshot["master"])  # statements with `;` inside survive the split
    assert snapshot["pragmas"] == alembic["pragmas"]


def test_the_snapshot_splits_into_whole_statements() -> None:
    text = "-- a comment\n\nCREATE TABLE t (a);\n\nCREATE TRIGGER x AFTER INSERT ON t BEGIN\n  SELECT 1;\n  SELECT 2;\nEND;\n"
    assert list(headschema.statements(text)) == [
        "CREATE TABLE t (a)",
        "CREATE TRIGGER x AFTER INSERT ON t BEGIN\n  SELECT 1;\n  SELECT 2;\nEND",
    ]


def test_a_snapshot_of_another_revision_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    stale = tmp_path / "head_schema.sql"
    stale.write_text("-- revision: 0001\n\nCREATE TABLE t (a);\n", encoding="utf-8")
    monkeypatch.setattr(headschema, "SNAPSHOT", stale)
    engine = create_index_engine(str(tmp_path / "index.db"))
    try:
        with engine.begin() as conn:
            try:
                headschema.create(conn)
            except RuntimeError as exc:
                assert "python -m readmodel.store.headschemagen" in str(exc)
            else:
                raise AssertionError("a stale snapshot was used")
    finally:
        engine.dispose()


def test_a_new_index_is_created_and_reopened_without_importing_alembic(tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    code = (
        "import sys\n"
        "from readmodel.store.database import open_writer\n"
        f"open_writer({str(db)!r}, root='/r', compression='zstd').dispose()\n"
        f"open_writer({str(db)!r}).dispose()\n"  # and an existing one at the head
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'alembic'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    engine = open_writer(str(db))  # an existing index at the head: opened as is
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == SCHEMA_REVISION
            assert conn.exec_driver_sql("SELECT root, compression, global_generation FROM index_meta").one() == ("/r", "zstd", 0)
    finally:
        engine.dispose()
