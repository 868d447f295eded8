"""PostgreSQL index URLs, connections and schema (phase 1 of the PostgreSQL backend).

``--db postgresql://user[:password]@host[:port]/dbname`` and
``postgresql+psycopg://…`` name an index on a PostgreSQL server (driver:
psycopg 3).  Credentials come from the URL, else libpq's own sources
(``PGPASSWORD``, ``~/.pgpass``, ``PGHOST``/``PGUSER``…), which psycopg reads
itself.  A password is never printed: every message names the index by
:func:`mask_url`.

What phase 1 does on PostgreSQL: ``sessionq db upgrade|current|check``
create, upgrade and compare the schema through the same Alembic migrations
as SQLite, and ``sessionq status`` reports on it (the FTS5 table exists only on SQLite; integer columns are BIGINT,
see :func:`_bigint_column`).  Indexing, reads, search and the servers refuse a
PostgreSQL URL with :func:`not_supported_message`.  docs/postgres.md has the
design of the rest.

A PostgreSQL index is recognised by its tables: an empty database is a new
index; one holding any table sessionq does not know is refused untouched.
Upgrades serialise on a transaction-scoped advisory lock.
"""

from __future__ import annotations

import hashlib
import secrets
import select
import time
import uuid
from typing import Any, Final

from sqlalchemy import BigInteger, Connection, Engine, Integer, SmallInteger, create_engine, event, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import NullPool
from alembic.ddl.base import AddColumn, visit_add_column
from sqlalchemy.schema import CreateColumn

from readmodel.projection.grams import scheme_fingerprint
from readmodel.store.database import IndexDatabaseError
from readmodel.store.urls import MalformedUrl, connect_message, is_postgres, mask_url, not_supported_message, parse, target  # noqa: F401

UPGRADE_LOCK_KEY: Final = 0x5351_5849_0001
"""``pg_advisory_xact_lock`` key that serialises schema upgrades ("SQXI" 1)."""
INDEX_LOCK_KEY: Final = 0x5351_5849_0002
"""The index lock ("SQXI" 2): every running indexer holds it shared, a schema upgrade takes
it exclusively for its transaction (the PostgreSQL twin of SQLite's ``<db>.lock``)."""
STARTING_LOCK_KEY: Final = 0x5351_5849_0003
"""Held shared by an indexer between taking its source lock and checking the schema
("SQXI" 3): an upgrade does not count it as running (it checks the schema again after)."""
LOCK_CLASS: Final = 0x5351_5849
"""First key of the per-source advisory lock ("SQXI"); the second is :func:`source_key`."""
CONNECT_TIMEOUT_SECONDS: Final = 10


class PostgresError(IndexDatabaseError):
    """A PostgreSQL index cannot be used; the message is one line, the password masked."""


class Unreachable(PostgresError):
    """The server cannot be reached or refuses the connection (a daemon retries; ``--once`` exits 1)."""


class IndexersRunning(PostgresError):
    """``db upgrade`` refused: indexers hold the index lock (the message names their sources)."""


def source_key(source: str) -> int:
    """The per-source advisory lock's second key for ``source``: a signed 32-bit hash of its name."""
    return int.from_bytes(hashlib.blake2b(source.encode(), digest_size=4).digest(), "little", signed=True)


_RUNNING_SOURCES: Final = (
    "SELECT DISTINCT l.pid, s.objid::bigint FROM pg_locks l LEFT JOIN pg_locks s ON s.pid = l.pid AND s.locktype = 'advisory' "
    "AND s.classid = CAST(:cls AS oid) AND s.objsubid = 2 AND s.granted "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.pid <> pg_backend_pid() AND l.database = "
    "(SELECT oid FROM pg_database WHERE datname = current_database()) AND ((l.classid = CAST(:cls AS oid) AND l.objsubid = 2) "
    "OR (l.classid = CAST(:high AS oid) AND l.objid = CAST(:low AS oid) AND l.objsubid = 1)) "
    "AND NOT EXISTS (SELECT 1 FROM pg_locks m WHERE m.pid = l.pid AND m.locktype = 'advisory' AND m.granted "
    "AND m.classid = CAST(:high AS oid) AND m.objid = CAST(:starting AS oid) AND m.objsubid = 1)"
)


def running_indexers(conn: Connection) -> list[str]:
    """The sources whose indexers run on this index: they hold the index lock, or (an indexer
    of a sessionq from before the index lock) their source lock without the starting mark.
    By name where the ``sources`` table knows the key; sorted."""
    params = {"cls": LOCK_CLASS, "high": INDEX_LOCK_KEY >> 32, "low": INDEX_LOCK_KEY & 0xFFFF_FFFF, "starting": STARTING_LOCK_KEY & 0xFFFF_FFFF}
    held = conn.execute(text(_RUNNING_SOURCES), params).all()
    if not held:
        return []
    names: dict[int, str] = {}
    if "sources" in tables(conn):
        names = {source_key(name) & 0xFFFF_FFFF: name for (name,) in conn.execute(text('SELECT "source" FROM "sources"'))}
    found = set()
    for pid, key in held:
        if key is None:
            found.add(f"(an indexer without its source lock, server pid {pid})")
        else:
            found.add(names.get(key, f"(a source not in the index yet, server pid {pid})"))
    return sorted(found)


def create_postgres_engine(db: str, *, pooled: bool = False) -> Engine:
    """An engine for the PostgreSQL index ``db``: no pool (commands connect once), or with
    ``pooled`` a small pool whose connections are checked before use (an indexer daemon: a
    pass does not pay for new connections, and one the server dropped is replaced).

    The check costs no round trip while the connection is sound (:func:`idle_connection_alive`,
    instead of SQLAlchemy's ``pre_ping`` statement): an append's pass checks out a connection
    twice, and each round trip is a share of its latency."""
    connect_args = {"connect_timeout": CONNECT_TIMEOUT_SECONDS}
    if pooled:
        return checked_on_checkout(create_engine(parse(db), pool_size=2, max_overflow=2, connect_args=connect_args))
    return create_engine(parse(db), poolclass=NullPool, connect_args=connect_args)


def checked_on_checkout(engine: Engine) -> Engine:
    """``engine`` whose pool replaces a connection the server dropped when it is checked out,
    at no round trip while it is sound (:func:`idle_connection_alive`; instead of ``pre_ping``)."""
    event.listen(engine, "checkout", _checked_out)
    return engine


def idle_connection_alive(conn: Any) -> bool:
    """Whether the idle psycopg connection ``conn`` is usable, without a round trip when it is.

    An idle connection's socket has nothing to read unless the server sent
    something unasked: a notice, or its farewell when it shut down or
    restarted (then the socket is at end of file).  Only then is a statement
    sent to tell the two apart.
    """
    if conn.closed or conn.broken:
        return False
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return False
    if not readable:
        return True
    try:
        conn.execute("SELECT 1")
        if not conn.autocommit:
            conn.rollback()  # leave it idle: its user may change autocommit or begin its own transaction
        return True
    except Exception:  # noqa: BLE001 - any failure means the connection is gone
        return False


def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """The pool's check: a connection the server dropped is replaced (SQLAlchemy retries the checkout)."""
    if not idle_connection_alive(dbapi_connection):
        raise DisconnectionError("the server closed the connection")


def connect(db: str) -> tuple[Engine, Connection]:
    """An engine and an open connection, or :class:`PostgresError` with :func:`connect_message`."""
    try:
        engine = create_postgres_engine(db)
    except MalformedUrl as exc:
        raise PostgresError(str(exc)) from None
    try:
        return engine, engine.connect()
    except Exception as exc:
        engine.dispose()
        raise Unreachable(connect_message(db, exc)) from None


def tables(conn: Connection) -> set[str]:
    """The tables of the connection's current schema."""
    return {row[0] for row in conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"))}


def check_identity(conn: Connection, db: str) -> bool:
    """Refuse a database holding tables sessionq does not know; return whether it is empty (new)."""
    from readmodel.store.schema import KNOWN_TABLES

    present = tables(conn)
    unknown = sorted(present - KNOWN_TABLES)
    if unknown:
        shown = ", ".join(unknown[:5]) + (", …" if len(unknown) > 5 else "")
        raise PostgresError(f"{mask_url(db)} holds tables sessionq does not know ({shown}); refusing to touch it")
    return not present


def upgrade(db: str, *, source: str | None = None) -> tuple[str | None, str]:
    """Create or upgrade the schema of the PostgreSQL index ``db``; ``(revision before, head)``.

    One transaction under an advisory lock: concurrent upgrades wait for
    each other, and a failure leaves the schema as it was.  Changing an
    existing schema refuses (:class:`IndexersRunning`, naming their sources)
    while indexers run: it takes the index lock exclusively, which every
    running indexer holds shared, and no source lock may be held without the
    starting mark either (an indexer of an older sessionq holds only that).
    Indexers still starting (the mark: before their schema check) do not
    count; they take the index lock after this commits and check the
    schema again.  Creating the schema in an empty database, or an index
    already at the head, never refuses.
    """
    from readmodel.store.revisions import current_revision, head_revision
    from readmodel.store.revisions import upgrade as run_migrations

    engine, conn = connect(db)
    try:
        with conn.begin():
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": UPGRADE_LOCK_KEY})
            fresh = check_identity(conn, db)
            before = current_revision(conn)
            if not fresh and before != head_revision():
                exclusive = conn.execute(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": INDEX_LOCK_KEY}).scalar()
                running = running_indexers(conn)
                if running or not exclusive:
                    shown = ", ".join(running) or "(unknown)"
                    raise IndexersRunning(f"refusing to upgrade {mask_url(db)}: the indexers of sources {shown} are running; stop them first")
            run_migrations(conn, source=source)
            if conn.execute(text('SELECT count(*) FROM "index_meta"')).scalar() == 0:
                conn.execute(
                    text(
                        'INSERT INTO "index_meta" ("singleton", "identity", "global_generation", "created_at", "cursor_secret", "grams") '
                        "VALUES (1, :identity, 0, :now, :secret, :grams)"
                    ),
                    # No documents: the gram keys are complete for this scheme.
                    {"identity": uuid.uuid4().hex, "now": time.time(), "secret": secrets.token_bytes(32), "grams": scheme_fingerprint()},
                )
        return before, head_revision()
    finally:
        conn.close()
        engine.dispose()


def open_existing(db: str) -> tuple[Engine, Connection]:
    """A connection to an existing sessionq index on PostgreSQL; :class:`PostgresError` otherwise."""
    engine, conn = connect(db)
    try:
        if check_identity(conn, db):
            raise PostgresError(f"{mask_url(db)} is empty, not a sessionq index yet; run `sessionq db upgrade --db URL`")
    except BaseException:
        conn.close()
        engine.dispose()
        raise
    return engine, conn


def open_writer(db: str, *, allow_upgrade: bool = False, source: str | None = None) -> Engine:
    """The engine an indexer writes ``db`` through: an empty database gets the schema, an
    older one is upgraded with ``allow_upgrade`` and refused otherwise (:class:`PostgresError`).
    The indexer holds its source lock and the starting mark meanwhile (:func:`upgrade`)."""
    from readmodel.store.revisions import current_revision, head_revision

    engine, conn = connect(db)
    try:
        fresh = check_identity(conn, db)
        current = None if fresh else current_revision(conn)
    finally:
        conn.close()
    head = head_revision()
    if current != head:
        if not fresh and not allow_upgrade:
            engine.dispose()
            raise PostgresError(
                f"{mask_url(db)} has schema revision {current or '(none)'}, this sessionq needs {head}; "
                "run `sessionq db upgrade --db URL` (or `sessionq index --upgrade`)"
            )
        upgrade(db, source=source)
    engine.dispose()
    return create_postgres_engine(db, pooled=True)


def schema_drift(conn: Connection) -> list[str]:
    """Differences between a PostgreSQL index and the models (empty = none)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from readmodel.store.revisions import current_revision, head_revision
    from readmodel.store.schema import metadata
    from readmodel.store.schemacheck import describe_diff, include_object

    problems: list[str] = []
    current, head = current_revision(conn), head_revision()
    if current != head:
        problems.append(f"schema revision is {current or '(none)'}, the code expects {head}")
    context = MigrationContext.configure(conn, opts={"include_object": include_object, "compare_type": False})
    problems += [describe_diff(diff) for diff in compare_metadata(context, metadata)]
    if "index_meta" in tables(conn) and conn.execute(text('SELECT count(*) FROM "index_meta"')).scalar() != 1:
        problems.append("index_meta must hold exactly one row")
    return problems


@compiles(AddColumn, "postgresql")
def _add_bigint_column(element: AddColumn, compiler: Any, **kw: Any) -> str:
    """An integer column a migration adds (``ALTER TABLE … ADD COLUMN``) is BIGINT too (see below)."""
    column = element.column
    if isinstance(column.type, Integer) and not isinstance(column.type, (BigInteger, SmallInteger)):
        column.type = BigInteger()  # the migration's own, freshly built column object
    return visit_add_column(element, compiler, **kw)


@compiles(CreateColumn, "postgresql")
def _bigint_column(element: CreateColumn, compiler: Any, **kw: Any) -> str:
    """Every integer column is BIGINT on PostgreSQL, and none is SERIAL.

    The index keeps epoch-millisecond times and packed document ids
    (``sid << 32 | seq``) in integer columns: SQLite's INTEGER is 64-bit,
    PostgreSQL's is not.  sessionq assigns every key itself, so no column
    needs a sequence.  Only DDL this process emits on PostgreSQL is affected.
    """
    column = element.element
    if not isinstance(column.type, Integer) or isinstance(column.type, BigInteger):
        return compiler.visit_create_column(element, **kw)
    spec = f"{compiler.preparer.format_column(column)} BIGINT"
    default = compiler.get_column_default_string(column)
    if default is not None:
        spec += f" DEFAULT {default}"
    if not column.nullable:
        spec += " NOT NULL"
    return spec
