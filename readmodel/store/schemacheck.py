"""Comparing an index's actual schema with the models (``sessionq db check``).

The SQLAlchemy tables in :mod:`readmodel.store.schema` are the truth the code
expects; Alembic's autogenerate comparison reports any difference in the
database (missing or extra tables, columns, indexes).  FTS5 virtual tables have
no SQLAlchemy form, so their presence is checked separately.

:func:`schema_problems` is the cheap part, run on every open of an index at
the head revision: one query on ``sqlite_master`` (with each model table's
columns) against the object names the models and the FTS5 DDL define.  A
missing table or column, or a ``texts_fts`` or ``document_grams`` that is not FTS5, makes
queries fail, so readers and the indexer refuse the index with
:func:`damage_message`; a missing index only slows them, so ``status`` and
``db check`` report it.  Alembic is imported only by :func:`schema_drift`.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Final, NamedTuple

from sqlalchemy import Connection, MetaData

from readmodel.store.revisions import current_revision, head_revision
from readmodel.store.schema import APPLICATION_ID, FTS_PREFIXES, KNOWN_TABLES, RETIRED_TABLES, SERVER_INDEXES, SERVER_MODELS, SERVER_TABLES, documents, metadata, sqlite_storage

VIEWS: Final = {"documents": documents}
"""SQLite's views, by name, each with the model whose columns it must have (schema 0016)."""


@functools.cache
def sqlite_metadata() -> MetaData:
    """The tables an SQLite index holds: :data:`metadata` with each view's model replaced by its
    storage, without the server-only models."""
    tables = MetaData()
    for table in metadata.sorted_tables:
        if table.name not in VIEWS and table.name not in SERVER_MODELS:
            table.to_metadata(tables)
    for table in sqlite_storage.sorted_tables:
        table.to_metadata(tables)
    return tables


class SchemaProblem(NamedTuple):
    """One difference from the head schema found by :func:`schema_problems`."""

    text: str
    fatal: bool  # queries would fail (not merely run slower)
    table: str


@functools.cache
def _expected() -> tuple[dict[str, frozenset[str]], dict[str, str]]:
    """Each expected table's columns (empty: presence only) and each expected index's table."""
    models = {**sqlite_metadata().tables, **VIEWS}
    columns = {name: frozenset(column.name for column in table.columns) for name, table in models.items()}
    for name in KNOWN_TABLES - set(columns) - set(SERVER_TABLES) - SERVER_MODELS - RETIRED_TABLES:  # SQLite: the server tables are absent by design
        columns[name] = frozenset()
    indexes = {str(index.name): table.name for table in sqlite_metadata().tables.values() for index in table.indexes}
    return columns, indexes


@functools.cache
def _objects_sql() -> str:
    # pragma_table_info only for the model tables: calling it on texts_fts
    # would construct the FTS5 table, which fails outright when it is damaged.
    # A view's columns need its SQL functions (every sessionq connection has them).
    modelled = ", ".join(f"'{name}'" for name in sorted({*sqlite_metadata().tables, *VIEWS}))
    return (
        "SELECT type, name, sql, NULL FROM sqlite_master "
        "UNION ALL SELECT 'column', m.name, NULL, p.name FROM sqlite_master AS m "
        f"JOIN pragma_table_info(m.name) AS p WHERE m.type IN ('table', 'view') AND m.name IN ({modelled})"
    )


def schema_problems(conn: Connection) -> list[SchemaProblem]:
    """Objects of the head schema missing from the index (extra objects are not problems here).

    Meaningful only for an index stamped with the head revision.
    """
    columns, indexes = _expected()
    tables: dict[str, str | None] = {}
    present_indexes: set[str] = set()
    present_columns: dict[str, set[str]] = {}
    for kind, name, sql, column in conn.exec_driver_sql(_objects_sql()):
        if kind in ("table", "view"):  # views: documents (checked against its model) and text_contents
            tables[name] = sql
        elif kind == "index":
            present_indexes.add(name)
        elif kind == "column":
            present_columns.setdefault(name, set()).add(column)
    missing = set(columns) - set(tables)
    not_fts5 = []
    for fts_table in FTS_PREFIXES:
        wrong = fts_table in tables and "fts5" not in (tables[fts_table] or "").lower()
        if fts_table in missing or wrong:
            # Its shadow tables belong to it (DROP TABLE removes them all): one line says it.
            missing = {name for name in missing if not name.startswith(fts_table + "_")}
        if wrong:
            not_fts5.append(fts_table)
    problems = [SchemaProblem(f"missing {_kind(name)} {name}", True, name) for name in sorted(missing)]
    problems += [SchemaProblem(f"{name} is not an FTS5 table", True, name) for name in not_fts5]
    for name in sorted(set(columns) & set(tables)):
        problems += [SchemaProblem(f"missing column {name}.{column}", True, name) for column in sorted(columns[name] - present_columns.get(name, set()))]
    problems += [SchemaProblem(f"missing index {name}", False, table) for name, table in sorted(indexes.items()) if name not in present_indexes]
    return problems


def _kind(table: str) -> str:
    return "FTS5 table" if table in FTS_PREFIXES else "table"


def damage_message(db: str, problems: list[str]) -> str:
    """The one-line refusal of a damaged index, with the repair (the index is rebuilt from the logs)."""
    return f"the index {db} is damaged ({'; '.join(problems)}); {repair_hint(db)}"


def repair_hint(db: str) -> str:
    """How to repair a damaged index: it is a projection of the logs, so rebuild it."""
    return (
        f"rebuild it from the session logs: stop the indexer, delete {db} (with its -wal and -shm files) "
        f"and run `sessionq index --once --db {db}`; `sessionq db check --db {db}` lists every difference"
    )


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    # migrations/env.py's filter too: FTS5 tables and PostgreSQL's search objects are explicit
    # DDL, and reflected tables unknown to sessionq are not ours to compare.
    if type_ == "table" and name and (name.startswith(FTS_PREFIXES) or name in SERVER_TABLES):
        return False
    if type_ == "index" and name in SERVER_INDEXES:
        return False
    return not (type_ == "table" and reflected and name not in KNOWN_TABLES)


def describe_diff(diff: Any) -> str:
    """One line for an autogenerate diff entry (tuples, or lists of ``modify_*`` tuples)."""
    if isinstance(diff, list):
        return "; ".join(describe_diff(item) for item in diff)
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
    # Alembic is imported only here: every open of an index runs schema_problems.
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    problems: list[str] = []
    app_id = int(conn.exec_driver_sql("PRAGMA application_id").scalar() or 0)
    if app_id != APPLICATION_ID:
        problems.append(f"application id is {app_id:#x}, expected {APPLICATION_ID:#x}")
    current, head = current_revision(conn), head_revision()
    if current != head:
        problems.append(f"schema revision is {current or '(none)'}, the code expects {head}")
    context = MigrationContext.configure(conn, opts={"include_object": include_object, "compare_type": False})
    with warnings.catch_warnings():
        # An index from before schema 0016 may still hold an expression index Alembic cannot reflect.
        warnings.filterwarnings("ignore", message="Skipped unsupported reflection of expression-based index")
        problems += [describe_diff(diff) for diff in compare_metadata(context, sqlite_metadata())]
    # The FTS5 tables, the views (and alembic_version) are outside the models' comparison.
    problems += [problem.text for problem in schema_problems(conn) if problem.table not in sqlite_metadata().tables]
    if "index_meta" in _tables(conn) and conn.exec_driver_sql('SELECT count(*) FROM "index_meta"').scalar() != 1:
        problems.append("index_meta must hold exactly one row")
    return problems


def _tables(conn: Connection) -> set[str]:
    return {row[0] for row in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")}
