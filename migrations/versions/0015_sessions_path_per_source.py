"""A session's path is unique per source: ``sessions_source (source, path)`` becomes UNIQUE and
``sessions.path`` alone no longer is.

Two hosts indexing into one (PostgreSQL) index may each have a transcript at
the same path; each daemon reads and deletes only its own source's rows, by
``(source, path)``.  Session ids stay unique across sources (never merged).

PostgreSQL drops the path's unique constraint in place.  SQLite cannot drop
an inline ``UNIQUE (path)``: the table is rebuilt (its stored DDL without that
clause, rows copied, indexes re-created) with foreign keys off for the
rebuild, so dropping the old table does not cascade to the events — SQLite's
documented procedure.  ``PRAGMA foreign_keys`` cannot change inside a
transaction: when the table holds rows, the upgrade commits the revisions
before this one (stamped, a consistent state) and rebuilds in a transaction
of its own.  An empty table (a new index) is rebuilt in place.

Also makes nothing here depend on the driver's placeholder style (the whole
chain runs on PostgreSQL, including 0010's backfill).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_PATH_UNIQUE = re.compile(r",\s*UNIQUE \(path\)")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        for constraint in sa.inspect(bind).get_unique_constraints("sessions"):
            if constraint["column_names"] == ["path"]:
                op.drop_constraint(constraint["name"], "sessions", type_="unique")
        op.drop_index("sessions_source", table_name="sessions")
        op.create_index("sessions_source", "sessions", ["source", "path"], unique=True)
        return
    _rebuild_sqlite(bind, lambda ddl: _PATH_UNIQUE.sub("", ddl), unique_source=True)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.drop_index("sessions_source", table_name="sessions")
        op.create_index("sessions_source", "sessions", ["source", "path"])
        op.create_unique_constraint("sessions_path_key", "sessions", ["path"])
        return
    _rebuild_sqlite(bind, lambda ddl: ddl[: ddl.rstrip().rindex(")")].rstrip() + ", \n\tUNIQUE (path)\n)", unique_source=False)


def _rebuild_sqlite(bind: sa.Connection, new_ddl, *, unique_source: bool) -> None:  # type: ignore[no-untyped-def]
    """Rebuild ``sessions`` with the DDL ``new_ddl`` makes of its stored one; its indexes again."""
    ddl = bind.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'sessions'").scalar()
    indexes = bind.exec_driver_sql(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sessions' AND sql IS NOT NULL ORDER BY name"
    ).fetchall()
    if bind.exec_driver_sql("SELECT 1 FROM sessions LIMIT 1").first() is not None and bind.exec_driver_sql("PRAGMA foreign_keys").scalar():
        # Dropping a table with rows would cascade to its children while foreign keys are on.
        bind.exec_driver_sql("COMMIT")
        bind.exec_driver_sql("PRAGMA foreign_keys = OFF")  # this connection only; it closes after the upgrade
        bind.exec_driver_sql("BEGIN IMMEDIATE")
    table = re.sub(r"^CREATE TABLE \"?sessions\"? \(", "CREATE TABLE sessions_0015 (", new_ddl(ddl))
    bind.exec_driver_sql(table)
    bind.exec_driver_sql("INSERT INTO sessions_0015 SELECT * FROM sessions")
    bind.exec_driver_sql("DROP TABLE sessions")
    bind.exec_driver_sql("ALTER TABLE sessions_0015 RENAME TO sessions")
    for name, sql in indexes:
        if name == "sessions_source":
            sql = f"CREATE {'UNIQUE ' if unique_source else ''}INDEX sessions_source ON sessions (source, path)"
        bind.exec_driver_sql(sql)
    problems = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if problems:
        raise RuntimeError(f"rebuilding sessions broke {len(problems)} foreign keys; nothing is changed")
