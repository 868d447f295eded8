"""Comparing an index's actual schema with the models (``sessionq db check``).

The SQLAlchemy tables in :mod:`readmodel.store.schema` are the truth the code
expects; Alembic's autogenerate comparison reports any difference in the
database (missing or extra tables, columns, indexes).  FTS5 virtual tables have
no SQLAlchemy form, so their presence is checked separately.
"""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection

from readmodel.store.database import current_revision, head_revision
from readmodel.store.schema import APPLICATION_ID, KNOWN_TABLES, metadata

_FTS_PREFIX = "documents_fts"


def _include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    # Same filter as migrations/env.py: FTS5 tables are explicit DDL, and
    # reflected tables unknown to sessionq are not ours to compare.
    if type_ == "table" and name and name.startswith(_FTS_PREFIX):
        return False
    return not (type_ == "table" and reflected and name not in KNOWN_TABLES)


def _describe(diff: Any) -> str:
    """One line for an autogenerate diff entry (tuples, or lists of ``modify_*`` tuples)."""
    if isinstance(diff, list):
        return "; ".join(_describe(item) for item in diff)
    if not isinstance(diff, tuple) or not diff:
        return str(diff)
    op = diff[0]
    if op in ("add_table", "remove_table"):
        return f"{op} {diff[1].name}"
    if op in ("add_column", "remove_column"):
        return f"{op} {diff[2]}.{diff[3].name}"
    if op in ("add_index", "remove_index", "add_constraint", "remove_constraint"):
        table = getattr(getattr(diff[1], "table", None), "name", "?")
        return f"{op} {diff[1].name} on {table}"
    if op.startswith("modify_") and len(diff) >= 6:
        return f"{op} {diff[2]}.{diff[3]}: {diff[-2]!r} -> {diff[-1]!r}"
    return str(diff)


def schema_drift(conn: Connection) -> list[str]:
    """Human-readable differences between the database and the models (empty = none).

    The caller has already checked that this is a sessionq index (identity).
    """
    problems: list[str] = []
    app_id = int(conn.exec_driver_sql("PRAGMA application_id").scalar() or 0)
    if app_id != APPLICATION_ID:
        problems.append(f"application id is {app_id:#x}, expected {APPLICATION_ID:#x}")
    current, head = current_revision(conn), head_revision()
    if current != head:
        problems.append(f"schema revision is {current or '(none)'}, the code expects {head}")
    context = MigrationContext.configure(conn, opts={"include_object": _include_object, "compare_type": False})
    problems += [_describe(diff) for diff in compare_metadata(context, metadata)]
    fts = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (_FTS_PREFIX,)).scalar()
    if fts is None:
        problems.append(f"missing FTS5 table {_FTS_PREFIX}")
    elif "fts5" not in fts.lower():
        problems.append(f"{_FTS_PREFIX} is not an FTS5 table")
    if "index_meta" in _tables(conn) and conn.exec_driver_sql('SELECT count(*) FROM "index_meta"').scalar() != 1:
        problems.append("index_meta must hold exactly one row")
    return problems


def _tables(conn: Connection) -> set[str]:
    return {row[0] for row in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")}
