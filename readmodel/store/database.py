"""Opening the index database: one writer, any number of read-only readers.

SQLite is the embedded default.  Writers open it read-write with WAL and a
busy timeout and take the write lock with ``BEGIN IMMEDIATE``; readers open it
with ``mode=ro`` so a reader can never modify the index.  A file that is not a
sessionq index (another application id, or unknown tables) is refused and never
touched.

Every failure to open is an :class:`IndexDatabaseError` (or, for readers, a
``SESSION_QUERY_INDEX_FAILED``) whose message is one line naming the file and
the reason: a directory, a non-database file, a read-only file system, a
damaged schema (with the repair) — never a driver traceback or link.

A cleanly closed index on a read-only mount is readable (see
:mod:`readmodel.store.readonly`); the indexer says that it cannot write there.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from readmodel.core.errors import SessionQueryError
from readmodel.store import doctext, headschema
from readmodel.store.revisions import current_revision, head_revision, upgrade  # noqa: F401 - head_revision re-exported (indexer.commands)
from readmodel.store.readonly import on_read_only_mount, reader_uri, size_or_none, sqlite_path  # noqa: F401 - sqlite_path re-exported
from readmodel.store.schema import APPLICATION_ID, KNOWN_TABLES, SCHEMA_REVISION
from readmodel.projection.grams import scheme_fingerprint

BUSY_TIMEOUT_MS: Final = 30_000


class IndexDatabaseError(RuntimeError):
    """The index database cannot be used (foreign file, outdated schema, I/O)."""


def refuse_postgres(db: str, what: str) -> None:
    """:class:`IndexDatabaseError` for a PostgreSQL URL where only SQLite works so far."""
    from readmodel.store.urls import is_postgres, not_supported_message

    if is_postgres(db):
        raise IndexDatabaseError(not_supported_message(db, what))


def check_path(db: str) -> None:
    """Refuse a ``db`` path that cannot hold a database: a directory, a device, a FIFO.

    A missing path passes (readers and writers each decide what that means);
    a PostgreSQL URL is refused (readers and the indexer are SQLite only so far).
    """
    refuse_postgres(db, "this part of sessionq (indexing, reads, search, status, servers)")
    path = sqlite_path(db)
    if path is None:
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise IndexDatabaseError(f"cannot use index database {db}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise IndexDatabaseError(f"index database {db} is a directory")
    if not stat.S_ISREG(mode):
        raise IndexDatabaseError(f"index database {db} is not a regular file")


def _unwritable_reason(path: str) -> str | None:
    """Why an index at ``path`` cannot be written (``None`` when it can, as far as we can tell).

    SQLite needs the file and its directory (for ``-wal``, ``-shm`` and the
    indexer's lock); a missing directory is created, so its nearest existing
    ancestor is what must be writable.
    """
    absolute = os.path.abspath(path)
    directory = os.path.dirname(absolute)
    while not os.path.exists(directory) and os.path.dirname(directory) != directory:
        directory = os.path.dirname(directory)
    if on_read_only_mount(directory):
        return f"{directory} is on a read-only file system"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"the directory {directory} is not writable"
    if os.path.exists(absolute) and not os.access(absolute, os.W_OK):
        return "the file is not writable"
    return None


def check_writable(db: str) -> None:
    """Refuse, with the reason, an index SQLite could open but never write."""
    check_path(db)
    path = sqlite_path(db)
    reason = None if path is None else _unwritable_reason(path)
    if reason is not None:
        raise IndexDatabaseError(f"cannot write index {db}: {reason}")


def failure_reason(exc: BaseException) -> str:
    """The driver's own one-line reason for ``exc``, without SQLAlchemy's SQL echo and help link."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    text_ = str(cause).strip()
    return text_.splitlines()[0] if text_ else type(cause).__name__


def unusable_message(db: str, exc: BaseException) -> str:
    """One line saying why the index at ``db`` could not be opened or read (``exc`` from SQLite)."""
    reason = failure_reason(exc)
    path = sqlite_path(db)
    if "file is not a database" in reason:
        return f"{db} is not a sessionq index (not an SQLite database); refusing to touch it"
    if path is not None and "unable to open database file" in reason and os.path.isfile(path):
        absolute = os.path.abspath(path)
        if on_read_only_mount(absolute) and size_or_none(absolute + "-shm") is None:
            return (
                f"cannot read index {db}: it is on a read-only file system and its write-ahead log {path}-wal "
                "holds changes that need the missing -shm file; copy the index with its -wal to writable storage"
            )
        if not os.access(os.path.dirname(absolute), os.W_OK):
            return (
                f"cannot read index {db}: SQLite must create {path}-shm beside it and its directory is not "
                "writable by this user; read it while the indexer runs, or as a user who can write there"
            )
    return f"cannot open index {db}: {reason}"


def open_existing(db: str, verify: Callable[[Connection], None] | None = None, *, allow_empty: bool = False) -> Engine:
    """A read-only engine on an existing sessionq index, identity checked (any schema revision).

    ``verify(conn)``, when given, runs on the same first connection and may
    raise :class:`IndexDatabaseError` too.  Raises :class:`IndexDatabaseError`
    for a missing, foreign or unreadable file, or an empty one unless
    ``allow_empty``, with a one-line message.
    """
    check_path(db)
    path = sqlite_path(db)
    if path is not None and not os.path.exists(path):
        raise IndexDatabaseError(f"no index database at {db}; run `sessionq index` to build it")
    engine = create_index_engine(db, readonly=True)
    try:
        with engine.connect() as conn:
            if check_identity(conn, db) and not allow_empty:
                raise IndexDatabaseError(f"{db} is empty, not a sessionq index yet; run `sessionq index` to build it")
            if verify is not None:
                verify(conn)
    except (DBAPIError, sqlite3.Error) as exc:
        engine.dispose()
        raise IndexDatabaseError(unusable_message(db, exc)) from exc
    except BaseException:
        engine.dispose()
        raise
    return engine


def check_writer_target(db: str) -> None:
    """What the indexer checks before it creates anything beside ``db`` (its lock file).

    Refuses (:class:`IndexDatabaseError`) a path that is no file, a file that
    is not a sessionq index (never touching it), and an index that cannot be
    written; an absent or empty file passes.
    """
    check_path(db)
    path = sqlite_path(db)
    if path is not None and os.path.exists(path):
        open_existing(db, allow_empty=True).dispose()
    check_writable(db)


def _configure(dbapi_conn: sqlite3.Connection, readonly: bool, bulk: bool = False) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys = ON")
    if bulk and not readonly:
        # A fresh build into a file nobody else sees (indexer.freshbuild): the
        # rollback journal (never synced; a file, so memory stays bounded) still
        # undoes a session's savepoint, and a crash only loses a file that is
        # discarded anyway.
        cursor.execute("PRAGMA journal_mode = TRUNCATE")
        cursor.execute("PRAGMA synchronous = OFF")
    elif not readonly:
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA cache_size = -65536")
    cursor.close()
    doctext.install(dbapi_conn)  # the documents view decodes its text with it (schema 0016)


def create_index_engine(db: str, *, readonly: bool = False, bulk: bool = False) -> Engine:
    """An engine for the index at ``db`` (a path or a SQLAlchemy URL).

    SQLite connections run in autocommit at the driver level so that sessionq
    controls transactions itself (``BEGIN IMMEDIATE`` for writes, ``BEGIN`` for
    consistent multi-statement reads).  ``bulk`` (a writer's engine for a file
    no other process opens, :mod:`indexer.freshbuild`) writes through a
    rollback journal and never syncs: not crash-safe by itself.
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
            url = "sqlite+pysqlite:///" + reader_uri(absolute) + "&uri=true"
        else:
            os.makedirs(os.path.dirname(absolute) or ".", exist_ok=True)
            url = "sqlite+pysqlite:///" + absolute
        connect_args = {"check_same_thread": False}
    engine = create_engine(url, connect_args=connect_args, poolclass=NullPool if path else None)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        _configure(dbapi_conn, readonly, bulk)

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


def initialise(conn: Connection, root: str | None, compression: str | None) -> None:
    """Stamp a fresh database as a sessionq index: schema, identity, cursor secret, generation 0.

    SQLite's schema comes from the head's snapshot (:mod:`readmodel.store.headschema`:
    the same database as Alembic's revisions give, without importing Alembic).
    """
    conn.exec_driver_sql(f"PRAGMA application_id = {APPLICATION_ID}")
    if conn.dialect.name == "sqlite":
        headschema.create(conn)
    else:
        upgrade(conn)
    conn.execute(
        text(
            "INSERT INTO index_meta (singleton, identity, global_generation, root, compression, created_at, cursor_secret, grams) "
            "VALUES (1, :identity, 0, :root, :compression, :now, :secret, :grams)"
        ),
        {
            "identity": uuid.uuid4().hex,
            "root": root,
            "compression": compression,
            "now": time.time(),
            "secret": secrets.token_bytes(32),
            "grams": scheme_fingerprint(),  # no documents: the gram index is complete
        },
    )


def open_writer(
    db: str,
    *,
    root: str | None = None,
    compression: str | None = None,
    allow_upgrade: bool = False,
    source: str | None = None,
    bulk: bool = False,
) -> Engine:
    """Open (creating if needed) the index for writing; refuses foreign and outdated files.

    ``source`` is the source an upgrade from before sources labels existing
    sessions with (default: this host's name, :mod:`readmodel.store.sources`).

    Raises :class:`IndexDatabaseError` when the path cannot be written (a
    directory, a read-only file system), the file belongs to something else,
    holds an older schema and ``allow_upgrade`` is false, or is damaged.
    ``bulk``: see :func:`create_index_engine`.
    """
    check_writable(db)
    engine = create_index_engine(db, bulk=bulk)
    try:
        with engine.begin() as conn:
            fresh = check_identity(conn, db)
            if fresh:
                initialise(conn, root, compression)
                return engine
            current = current_revision(conn)
            head = SCHEMA_REVISION  # Alembic's head (a test pins it): no import of Alembic to open an index
            if current != head:
                if not allow_upgrade:
                    raise IndexDatabaseError(
                        f"{db} is at schema revision {current}, this sessionq needs {head}; run `sessionq db upgrade`"
                    )
                upgrade(conn, source=source)
            refuse_damaged(conn, db)
    except Exception:
        engine.dispose()
        raise
    return engine


RECLAIM_FREE_FRACTION: Final = 0.25
"""``sessionq db upgrade`` rewrites the file (``VACUUM``) when at least this share of its pages is free."""


def reclaim_free_pages(db: str) -> int:
    """Rewrite the SQLite index at ``db`` when a quarter of it is free pages; the bytes given back.

    A migration that rewrites tables (schema 0016 packs the documents' texts)
    leaves the old pages free inside the file, which SQLite reuses but never
    returns.  ``VACUUM`` cannot run inside the migration's transaction, so the
    caller runs this after it, holding the indexer's lock (it needs as much
    free disk as the index takes, for a few seconds per 100 MB).
    """
    path = sqlite_path(db)
    if path is None or not os.path.exists(path):
        return 0
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        doctext.install(conn)
        pages, free = (conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("page_count", "freelist_count"))
        if not pages or free < pages * RECLAIM_FREE_FRACTION:
            return 0
        before = os.path.getsize(path)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return max(before - os.path.getsize(path), 0)


def refuse_damaged(conn: Connection, db: str) -> None:
    """Raise :class:`IndexDatabaseError` naming the repair when an object queries need is missing.

    The check is one query on ``sqlite_master`` (see :mod:`readmodel.store.schemacheck`),
    cheap enough for every open.
    """
    from readmodel.store.schemacheck import damage_message, schema_problems

    fatal = [problem.text for problem in schema_problems(conn) if problem.fatal]
    if fatal:
        raise IndexDatabaseError(damage_message(db, fatal))


def _readable_revision(conn: Connection, db: str) -> None:
    current = current_revision(conn)
    if current != SCHEMA_REVISION:
        raise IndexDatabaseError(f"{db} is at schema revision {current}, this sessionq reads {SCHEMA_REVISION}")
    refuse_damaged(conn, db)


def open_reader(db: str) -> Engine:
    """Open an existing index read-only (``mode=ro``); raises ``SESSION_QUERY_INDEX_FAILED``.

    Refused, each with a one-line message: a missing, empty, foreign or
    non-database file, a directory, another schema revision, a damaged schema.
    """
    try:
        return open_existing(db, lambda conn: _readable_revision(conn, db))
    except IndexDatabaseError as exc:
        raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", str(exc), exc) from exc
    except Exception as exc:
        raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", f"cannot open index {db}: {failure_reason(exc)}", exc) from exc


@contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """A read transaction: every statement inside sees one consistent snapshot."""
    with engine.connect() as conn:
        with conn.begin():
            yield conn
