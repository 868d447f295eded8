"""The PostgreSQL backend of the indexer: the reconciler's writes into a server index.

The reconcile logic writes in SQLite's SQL dialect through a DB-API cursor
(:mod:`indexer.writers`); :class:`PgCursor` speaks that dialect to
PostgreSQL through psycopg 3 — ``?`` placeholders become ``%s``, ``INSERT OR
IGNORE`` becomes ``ON CONFLICT DO NOTHING``, ``INSERT OR REPLACE`` an upsert
on the table's primary key, ``IS NOT ?`` ``IS DISTINCT FROM`` — and takes the
documents' search rows itself: terms, postings and gram keys
(:mod:`readmodel.search.serverterms`) instead of FTS5 rows, computed on this
host by SQLite's own tokenizer, written and deleted in the transaction (and
savepoint) of their documents.

:class:`PostgresWriter` supplies the rest: one ``READ COMMITTED`` transaction
per batch, whose generation is the source's own ``sources`` row (locked
``FOR UPDATE`` by the batch and bumped in it: batches of one source are
serial, different sources never wait on each other and no global row is
hot), the sid reservation in ``index_meta.next_sid`` (one atomic ``UPDATE …
RETURNING`` in its own short transaction), and the substring gram keys'
rebuild.  Nothing of a failed transaction is kept: a server restarted
mid-batch loses the batch's transaction, the next pass reconnects (the pool
checks a connection before handing it out and drops a broken one) and redoes
it from the stored offsets.

:class:`SourceLock` is one daemon per (database, source): a session-level
``pg_try_advisory_lock(K, hash(source))`` held on its own connection for the
daemon's life, with the index lock shared (``db upgrade`` refuses while any
is held); the server releases them when the connection dies, and the writer
takes them again before a pass after a reconnect.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Final

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import TransactionStatus
from sqlalchemy import Engine

from readmodel.projection.grams import document_gram_keys, scheme_fingerprint
from readmodel.search import serverterms
from readmodel.search.tokens import Tokenizer
from readmodel.store.postgres import INDEX_LOCK_KEY, LOCK_CLASS, STARTING_LOCK_KEY, idle_connection_alive, source_key
from readmodel.store.schema import SCHEMA_REVISION, metadata
from readmodel.store.urls import connect_message, mask_url, parse

from .layout import LayoutProblem

log = logging.getLogger("sessionq.indexer")

_RESERVE_SIDS: Final = (
    'UPDATE "index_meta" SET "next_sid" = GREATEST(COALESCE("next_sid", 1), (SELECT COALESCE(max("sid"), 0) + 1 FROM "sessions")) + %s '
    'RETURNING "next_sid"'
)
GRAM_CHUNK: Final = 1_000
_INSERT_DOCUMENT: Final = (
    'INSERT INTO "documents" ("docid", "sid", "seq", "type", "time", "surface", "length", "text") VALUES (?, ?, ?, ?, ?, ?, ?, ?)'
)


# -- the dialect -------------------------------------------------------------------------------

_OR_REPLACE: Final = re.compile(r'^INSERT OR REPLACE INTO "(\w+)" \(([^)]*)\)')


@lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """SQLite's statement ``sql`` as PostgreSQL runs it (placeholders ``%s``; see the module docstring)."""
    out = sql.replace("%", "%%").replace(" IS NOT ?", " IS DISTINCT FROM ?").replace("?", "%s")
    if out.startswith('UPDATE "document_rows"'):  # SQLite's storage of documents (schema 0018): a table here
        out = 'UPDATE "documents"' + out[len('UPDATE "document_rows"') :]
    if out.startswith("BEGIN"):
        return "BEGIN ISOLATION LEVEL READ COMMITTED"
    if out.startswith("INSERT OR IGNORE INTO"):
        return "INSERT INTO" + out[len("INSERT OR IGNORE INTO") :] + " ON CONFLICT DO NOTHING"
    match = _OR_REPLACE.match(out)
    if match is not None:
        table, columns = match.group(1), [name.strip().strip('"') for name in match.group(2).split(",")]
        keys = [column.name for column in metadata.tables[table].primary_key.columns]
        updates = ", ".join(f'"{name}" = EXCLUDED."{name}"' for name in columns if name not in keys)
        target = ", ".join(f'"{name}"' for name in keys)
        return "INSERT INTO" + out[len("INSERT OR REPLACE INTO") :] + f" ON CONFLICT ({target}) DO UPDATE SET {updates}"
    return out


class _BoolAsInteger(Dumper):
    """SQLite stores flags as integers: bind ``True``/``False`` as 1/0 into the BIGINT columns."""

    oid = psycopg.adapters.types["int8"].oid

    def dump(self, obj: bool) -> bytes:
        return b"1" if obj else b"0"


class PgCursor:
    """A psycopg cursor that takes the reconciler's SQLite-dialect statements and its search rows."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._cur = conn.cursor()
        self._tokenizer: Tokenizer | None = None

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> PgCursor:
        self._cur.execute(translate(sql), tuple(parameters))
        return self

    def executemany(self, sql: str, rows: Any) -> PgCursor:
        self._cur.executemany(translate(sql), rows)
        return self

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur.fetchall())

    def pipeline(self) -> Any:
        """A block whose statements share one round trip (writes only: no results are read
        inside it, no COPY); an error is raised when the block ends."""
        return self.conn.pipeline()

    # -- documents and search rows (indexer.projection dispatches here instead of SQLite's) ----

    def insert_documents(self, docs: Sequence[Sequence[Any]], fts: Any) -> None:
        """Documents (``documents`` rows with their text hash appended) into ``documents`` and
        ``document_hashes``; their search rows to ``fts`` (``None``: written now)."""
        with self.pipeline():
            self.executemany(_INSERT_DOCUMENT, [doc[:8] for doc in docs])
            self.executemany('INSERT INTO "document_hashes" ("docid", "hash") VALUES (?, ?)', [(doc[0], doc[8]) for doc in docs])
        rows = [(doc[0], doc[7]) for doc in docs]
        if fts is not None:
            fts.add(self, rows)
        else:
            self.write_search_rows(rows)

    def write_search_rows(self, rows: Sequence[tuple[int, str]]) -> None:
        """Terms, postings and gram keys of documents just inserted (``(docid, text)`` rows)."""
        if not rows:
            return
        if self._tokenizer is None:
            self._tokenizer = Tokenizer()
        serverterms.write_documents(self._cur, self._tokenizer, [(row[0], row[1]) for row in rows])

    def delete_search_rows(self, low: int, high: int) -> None:
        """Remove the search rows of the documents with ``low <= docid <= high``."""
        serverterms.delete_documents(self._cur, low, high)

    def close(self) -> None:
        if self._tokenizer is not None:
            self._tokenizer.close()
        self._cur.close()


class PostgresWriter:
    """The PostgreSQL backend of :class:`indexer.writers.IndexWriter`."""

    data_errors: tuple[type[BaseException], ...] = (psycopg.DataError,)
    errors: tuple[type[BaseException], ...] = (psycopg.Error,)

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.lock: SourceLock | None = None  # held by the daemon; taken again after a reconnect

    @contextmanager
    def cursor(self) -> Iterator[PgCursor]:
        if self.lock is not None:
            self.lock.ensure()
        raw = self.engine.raw_connection()
        try:
            conn = raw.driver_connection
            if conn.info.transaction_status != TransactionStatus.IDLE:
                conn.rollback()  # left open (the dialect's first-connect queries): autocommit can only change when idle
            conn.autocommit = True  # the reconciler issues BEGIN / COMMIT itself
            conn.adapters.register_dumper(bool, _BoolAsInteger)
            cur = PgCursor(conn)
            try:
                yield cur
            finally:
                _settle(raw, cur)
        finally:
            raw.close()

    def begin(self, cur: PgCursor) -> None:
        cur.execute("BEGIN")

    def commit(self, cur: PgCursor) -> None:
        # A COMMIT of a failed transaction is a ROLLBACK on PostgreSQL: never take it for one.
        if cur.conn.info.transaction_status == TransactionStatus.INERROR:
            raise psycopg.errors.InFailedSqlTransaction("the batch's transaction failed; it is rolled back")
        cur.execute("COMMIT")

    def in_transaction(self, cur: PgCursor) -> bool:
        return not cur.conn.closed and cur.conn.info.transaction_status != TransactionStatus.IDLE

    def reserve_sids(self, cur: PgCursor, count: int) -> tuple[int, int]:
        end = cur._cur.execute(_RESERVE_SIDS, (count,)).fetchone()[0]
        return end - count, end

    def open_batch(self, cur: PgCursor, source: str) -> int:
        """Lock the source's row for the batch; the generation its rows carry."""
        row = cur.execute('SELECT "generation" FROM "sources" WHERE "source" = ? FOR UPDATE', (source,)).fetchone()
        return (row[0] if row is not None else 0) + 1

    def close_batch(self, cur: PgCursor, source: str, generation: int, changed: bool, now: float) -> None:
        cur.execute(
            'UPDATE "sources" SET "generation" = "generation" + ?, "last_reconcile_at" = ? WHERE "source" = ?',
            (int(changed), now, source),
        )

    def storable(self, item: Any) -> Any:
        """``item`` (an observed transcript), or its ``unindexable`` layout problem when its header
        puts a NUL character into a text column of the session row: PostgreSQL text cannot
        hold one, and the row is written outside the session's savepoint (a failure there would
        fail every batch of the source).  SQLite stores such a session; the problem says why
        this index does not."""
        header = item.header
        if header is None or not any(type(value) is str and "\x00" in value for value in (header.get("id"), header.get("cwd"), header.get("parentSession"))):
            return item
        problem = LayoutProblem("unindexable", item.path, f"{item.path}: the header holds a NUL character, which PostgreSQL text cannot store")
        return type(item)(item.path, item.stat, None, problem)

    def grams_current(self, cur: PgCursor) -> bool:
        row = cur.execute('SELECT "grams" FROM "index_meta"').fetchone()
        return row is not None and row[0] == scheme_fingerprint()

    def rebuild_grams(self, cur: PgCursor) -> None:
        """Every stored document's gram keys again (another scheme, or never built); records the scheme."""
        cur.execute('DELETE FROM "document_gram_keys"')
        last = -1
        while rows := cur.execute('SELECT "docid", "text" FROM "documents" WHERE "docid" > ? ORDER BY "docid" LIMIT ?', (last, GRAM_CHUNK)).fetchall():
            cur.executemany('INSERT INTO "document_gram_keys" ("docid", "grams") VALUES (?, ?)', [(doc, document_gram_keys(text)) for doc, text in rows])
            last = rows[-1][0]
        cur.execute('UPDATE "index_meta" SET "grams" = ?', (scheme_fingerprint(),))


def _settle(raw: Any, cur: PgCursor) -> None:
    """A pass's connection back to the pool: idle, or dropped if the server went away."""
    conn = cur.conn
    try:
        cur.close()
        if not (conn.broken or conn.closed) and conn.info.transaction_status != TransactionStatus.IDLE:
            conn.execute("ROLLBACK")  # nothing of an unfinished transaction is kept
    except psycopg.Error:
        pass
    if conn.broken or conn.closed:
        raw.invalidate()  # the pool must not hand it out again


class LockHeld(RuntimeError):
    """Another indexer of the source holds its lock on the database (the message is for the user)."""


class SourceLock:
    """One daemon per (database, source): ``pg_try_advisory_lock(LOCK_CLASS, source_key(source))``,
    then the index lock ``INDEX_LOCK_KEY`` shared (a schema upgrade takes it exclusively).

    All are held on a dedicated connection until :meth:`release`.
    :meth:`acquire` takes the source lock with the starting mark
    (``STARTING_LOCK_KEY`` shared: an upgrade meanwhile does not count this
    indexer as running); once the schema is checked (or created or
    upgraded), :meth:`settle` takes the index lock, waiting for a running
    upgrade to commit, drops the mark and checks the schema revision again.
    :meth:`ensure` (before every pass) takes them again on a new connection
    when the server dropped the old one (a restart): if another daemon of the
    source took it meanwhile, :class:`LockHeld`.
    """

    def __init__(self, db: str, source: str) -> None:
        self.db = db
        self.source = source
        self._conn: psycopg.Connection[Any] | None = None

    def acquire(self) -> None:
        """Take the source lock (and the starting mark) or raise :class:`LockHeld`; an unreachable
        server raises ``psycopg.OperationalError``."""
        conn = psycopg.connect(_conninfo(self.db), autocommit=True, connect_timeout=10)
        try:
            conn.execute("SELECT pg_advisory_lock_shared(%s)", (STARTING_LOCK_KEY,))  # never taken exclusively
            taken = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, source_key(self.source))).fetchone()
        except BaseException:
            conn.close()
            raise
        if not taken or not taken[0]:
            holder = conn.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s::bigint::oid AND objid = (%s::bigint & 4294967295)::oid "
                "AND objsubid = 2 AND granted LIMIT 1",
                (LOCK_CLASS, source_key(self.source)),
            ).fetchone()
            conn.close()
            who = f" (server backend pid {holder[0]})" if holder else ""
            raise LockHeld(
                f"another sessionq indexer{who} for source {self.source} is already writing {mask_url(self.db)}; "
                "stop it first or use another --source"
            )
        self._conn = conn

    def settle(self) -> None:
        """Running from now on: the index lock shared (at once, or after a running schema upgrade
        commits), the starting mark dropped, and the schema still the one this sessionq writes
        (:class:`LockHeld` otherwise: an upgrade committed after this indexer checked it)."""
        conn = self._conn
        assert conn is not None
        if not conn.execute("SELECT pg_try_advisory_lock_shared(%s)", (INDEX_LOCK_KEY,)).fetchone()[0]:
            log.info("waiting for a schema upgrade of the index to finish", extra={"fields": {"source": self.source}})
            conn.execute("SELECT pg_advisory_lock_shared(%s)", (INDEX_LOCK_KEY,))
        conn.execute("SELECT pg_advisory_unlock_shared(%s)", (STARTING_LOCK_KEY,))
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        if row is None or row[0] != SCHEMA_REVISION:
            raise LockHeld(
                f"{mask_url(self.db)} was upgraded to schema {row[0] if row else '(none)'} meanwhile; "
                f"this sessionq writes {SCHEMA_REVISION}: restart it with the matching sessionq"
            )

    def ensure(self) -> None:
        """The locks are held (taken again after their connection died)."""
        if self._conn is not None and idle_connection_alive(self._conn):  # no round trip while sound
            return
        self.release()
        log.info("taking the source lock again after a lost connection", extra={"fields": {"source": self.source}})
        self.acquire()
        self.settle()  # disconnected, this indexer held no lock: an upgrade may have run meanwhile

    def release(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()  # the server releases a session lock with its connection
            except psycopg.Error:
                pass
            self._conn = None


def _conninfo(db: str) -> str:
    """libpq's connection string of the index URL (psycopg reads the ``postgresql://`` form itself)."""
    url = parse(db)
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def connect_failure(db: str, exc: BaseException) -> str:
    """The one line an unreachable server is reported with (host, database, cause; no password)."""
    return connect_message(db, exc)
