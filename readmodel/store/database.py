"""Opening the index database: one writer, any number of read-only readers.

SQLite is the embedded default.  Writers open it read-write with WAL and a
busy timeout and take the write lock with ``BEGIN IMMEDIATE``; readers open it
with ``mode=ro`` so a reader can never modify the index.  A file that is not a
sessionq index (another application id, or unknown tables) is refused and never
touched.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.pool import NullPool

from readmodel.core.errors import SessionQueryError
from readmodel.store.schema import APPLICATION_ID, KNOWN_TABLES, SCHEMA_REVISION

BUSY_TIMEOUT_MS: Final = 30_000
MIGRATIONS_DIR: Final = Path(__file__).resolve().parents[2] / "migrations"


class IndexDatabaseError(RuntimeError):
    """The index database cannot be used (foreign file, outdated schema, I/O)."""


def sqlite_path(db: str) -> str | None:
    """The file path of a SQLite database spec, or ``None`` for another URL / ``:memory:``."""
    if db == ":memory:":
        return None
    if db.startswith("sqlite:///"):
        return db[len("sqlite:///") :]
    if "://" in db:
        return None
    return db


def _configure(dbapi_conn: sqlite3.Connection, readonly: bool) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys = ON")
    if not readonly:
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA cache_size = -65536")
    cursor.close()


def create_index_engine(db: str, *, readonly: bool = False) -> Engine:
    """An engine for the index at ``db`` (a path or a SQLAlchemy URL).

    SQLite connections run in autocommit at the driver level so that sessionq
    controls transactions itself (``BEGIN IMMEDIATE`` for writes, ``BEGIN`` for
    consistent multi-statement reads).
    """
    path = sqlite_path(db)
    if path is None and db != ":memory:":
        return create_engine(db)
    if path is None:
        url = "sqlite://"
        connect_args: dict[str, Any] = {"check_same_thread": False}
    else:
        absolute = os.path.abspath(path)
        if readonly:
            url = "sqlite+pysqlite:///file:" + quote(absolute) + "?mode=ro&uri=true"
        else:
            os.makedirs(os.path.dirname(absolute) or ".", exist_ok=True)
            url = "sqlite+pysqlite:///" + absolute
        connect_args = {"check_same_thread": False}
    engine = create_engine(url, connect_args=connect_args, poolclass=NullPool if path else None)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        _configure(dbapi_conn, readonly)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

    return engine


def _user_tables(conn: Connection) -> list[str]:
    rows = conn.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT GLOB 'sqlite_*' ORDER BY name"
    )
    return [row[0] for row in rows]


def inspect_identity(conn: Connection) -> tuple[int, list[str]]:
    """The database's application id and user tables."""
    app_id = conn.exec_driver_sql("PRAGMA application_id").scalar() or 0
    return int(app_id), _user_tables(conn)


def check_identity(conn: Connection, where: str) -> bool:
    """Refuse a foreign database; return whether this is an empty (new) one."""
    app_id, tables = inspect_identity(conn)
    if app_id == 0 and not tables:
        return True
    if app_id != APPLICATION_ID:
        raise IndexDatabaseError(f"{where} is not a sessionq index (application id {app_id:#x}); refusing to touch it")
    unknown = sorted(set(tables) - KNOWN_TABLES)
    if unknown:
        raise IndexDatabaseError(f"{where} holds unrecognised tables {', '.join(unknown)}; refusing to touch it")
    return False


def alembic_config(conn: Connection | None = None) -> Any:
    # Alembic is imported only where migrations run: readers never pay for it.
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if conn is not None:
        config.attributes["connection"] = conn
    return config


def head_revision() -> str:
    """The newest migration; equals :data:`readmodel.store.schema.SCHEMA_REVISION` (a test pins it)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head() or ""


def current_revision(conn: Connection) -> str | None:
    """The schema revision stamped in the database (``None`` before any migration)."""
    has_table = conn.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='alembic_version'"
    ).first()
    if has_table is None:
        return None
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def upgrade(conn: Connection) -> None:
    """Bring the schema to the head revision (inside the caller's transaction)."""
    from alembic import command

    command.upgrade(alembic_config(conn), "head")


def initialise(conn: Connection, root: str | None, compression: str | None) -> None:
    """Stamp a fresh database as a sessionq index: schema, identity, generation 0."""
    conn.exec_driver_sql(f"PRAGMA application_id = {APPLICATION_ID}")
    upgrade(conn)
    conn.execute(
        text(
            "INSERT INTO index_meta (singleton, identity, global_generation, root, compression, created_at) "
            "VALUES (1, :identity, 0, :root, :compression, :now)"
        ),
        {"identity": uuid.uuid4().hex, "root": root, "compression": compression, "now": time.time()},
    )


def open_writer(db: str, *, root: str | None = None, compression: str | None = None, allow_upgrade: bool = False) -> Engine:
    """Open (creating if needed) the index for writing; refuses foreign and outdated files.

    Raises :class:`IndexDatabaseError` when the file belongs to something else,
    or holds an older schema and ``allow_upgrade`` is false.
    """
    engine = create_index_engine(db)
    try:
        with engine.begin() as conn:
            fresh = check_identity(conn, db)
            if fresh:
                initialise(conn, root, compression)
                return engine
            current = current_revision(conn)
            head = head_revision()
            if current != head:
                if not allow_upgrade:
                    raise IndexDatabaseError(
                        f"{db} is at schema revision {current}, this sessionq needs {head}; run `sessionq db upgrade`"
                    )
                upgrade(conn)
    except Exception:
        engine.dispose()
        raise
    return engine


def open_reader(db: str) -> Engine:
    """Open an existing index read-only (``mode=ro``); raises ``SESSION_QUERY_INDEX_FAILED``."""
    path = sqlite_path(db)
    if path is not None and not os.path.exists(path):
        raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", f"index database {db} does not exist; run `sessionq index` first")
    engine = create_index_engine(db, readonly=True)
    try:
        with engine.connect() as conn:
            fresh = check_identity(conn, db)
            if fresh:
                raise IndexDatabaseError(f"{db} is empty; run `sessionq index` first")
            current = current_revision(conn)
            if current != SCHEMA_REVISION:
                raise IndexDatabaseError(f"{db} is at schema revision {current}, this sessionq reads {SCHEMA_REVISION}")
    except SessionQueryError:
        engine.dispose()
        raise
    except Exception as exc:
        engine.dispose()
        raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", f"cannot open index {db}: {exc}", exc) from exc
    return engine


@contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """A read transaction: every statement inside sees one consistent snapshot."""
    with engine.connect() as conn:
        with conn.begin():
            yield conn
