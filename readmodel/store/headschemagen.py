"""Generating the head schema's snapshot (``head_schema.sql``, read by
:mod:`readmodel.store.headschema`) from an Alembic upgrade of an empty database.

``python -m readmodel.store.headschemagen`` rewrites the snapshot (``--check``:
exit 1 when it is out of date instead).  The statements are replayed and compared
with Alembic's database table by table before anything is written.
"""

from __future__ import annotations

import sqlite3
import sys

from readmodel.store import doctext
from readmodel.store.database import create_index_engine
from readmodel.store.headschema import _HEADER, _REVISION_MARK, SNAPSHOT, snapshot_revision
from readmodel.store.revisions import upgrade


def _created_objects(conn: sqlite3.Connection) -> tuple[list[str], dict[str, str]]:
    """The ``CREATE`` statements in ``sqlite_master`` that SQLite did not derive from another one,
    and the FTS5 tables among them with their shadow tables' common prefix."""
    shadow = {row[1] for row in conn.execute("PRAGMA table_list") if row[2] == "shadow"}
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").fetchall()
    created = [(name, sql) for name, sql in rows if name not in shadow and not name.startswith("sqlite_")]
    fts5 = {name: f"{name}_" for name, sql in created if " USING fts5(" in sql}
    return [sql for _name, sql in created], fts5


def _rows(conn: sqlite3.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every ordinary and shadow table's rows (virtual tables are read through their shadows)."""
    names = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")]
    return {name: sorted(conn.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr) for name in names}


def _replayed(statements_: list[str]) -> dict[str, list[tuple[object, ...]]]:
    """The rows a database created by ``statements_`` holds (before the head is stamped)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        doctext.install(conn)  # a view's text decoder, which an FTS5 rebuild of it reads
        for statement in statements_:
            conn.execute(statement)
        return _rows(conn)
    finally:
        conn.close()


def generate() -> str:
    """The snapshot's text: an empty in-memory database upgraded by Alembic to the head.

    A revision that rebuilt an empty FTS5 table left its totals record written
    (two zero varints where a new table has none): the snapshot rebuilds those
    tables too.  Any other difference between the replayed statements and
    Alembic's database is an error, not a snapshot.
    """
    engine = create_index_engine(":memory:")
    try:
        with engine.begin() as conn:
            upgrade(conn)
            revision = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
            raw = conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            created, fts5 = _created_objects(raw)
            expected = _rows(raw)
    finally:
        engine.dispose()
    expected["alembic_version"] = []  # stamped by create() itself
    replayed = _replayed(created)
    differing = {name for name in expected if replayed.get(name) != expected[name]}
    rebuilt = sorted(table for table, prefix in fts5.items() if any(name.startswith(prefix) for name in differing))
    created += [f"INSERT INTO {table}({table}) VALUES('rebuild')" for table in rebuilt]
    replayed = _replayed(created)
    if replayed != expected:
        left = sorted(name for name in expected.keys() | replayed.keys() if replayed.get(name) != expected.get(name))
        raise RuntimeError(f"the replayed schema differs from Alembic's in {', '.join(left)}")
    body = "".join(f"{sql};\n\n" for sql in created)
    return _HEADER.format(revision=revision) + f"{_REVISION_MARK}{revision}\n\n" + body


def main() -> int:
    """Regenerate ``head_schema.sql`` (``--check``: exit 1 when it is out of date instead)."""
    text = generate()
    if "--check" in sys.argv[1:]:
        current = SNAPSHOT.read_text(encoding="utf-8") if SNAPSHOT.exists() else ""
        if current != text:
            print(f"{SNAPSHOT} is out of date; run `python -m readmodel.store.headschemagen`", file=sys.stderr)
            return 1
        return 0
    SNAPSHOT.write_text(text, encoding="utf-8")
    print(f"wrote {SNAPSHOT} (revision {snapshot_revision(text)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
