"""Read access to a PostgreSQL index: the same read interface as the SQLite reader.

:class:`PostgresIndexStore` implements :class:`readmodel.store.interface.IndexSource`
for a ``postgresql://`` index, :class:`PostgresIndexReader` the
:class:`~readmodel.store.interface.IndexReader` inside one snapshot.  Every
answer runs in one ``REPEATABLE READ READ ONLY`` transaction (nested reads in
one thread join it), so all its statements see one committed state while
writers of any source commit.

Exactness with SQLite (the contract and golden conformance suites run on
both, tests/backends.py): the queries are :mod:`readmodel.store.sqlite`'s,
written for PostgreSQL where the two differ —

* ordering: SQLite sorts ``NULL`` first ascending and last descending,
  PostgreSQL the other way, so every nullable sort key says ``NULLS``;
  text is compared and sorted ``COLLATE "C"`` (code-point order, as SQLite's
  ``BINARY`` over UTF-8), blobs (``bytea``) byte-wise as in SQLite;
* ``IN (…)`` lists are ``= ANY(array)`` parameters;
* every integer column is ``BIGINT`` (migration DDL), so ``typeof`` checks
  disappear: ``last_activity`` is numeric or ``NULL``.

The generation a snapshot reports (:meth:`PostgresIndexReader.generation`) is
the index identity and the *generation vector*: each source's ``generation``
counter as the snapshot sees it (docs/postgres.md).  Writers of different
sources bump different rows, so no single row serialises them, and a cursor
or cache keyed by the vector is stale as soon as any source commits.

Connections come from a small SQLAlchemy pool that checks a connection when
it is checked out, without a round trip while it is sound
(:func:`readmodel.store.postgres.checked_on_checkout`): a server restart costs
the next read a reconnect, not an error.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import msgspec
from sqlalchemy import Engine, create_engine

from readmodel.core.errors import SessionQueryError
from readmodel.core.vocabulary import Event, Header
from readmodel.store.blocks import MissingDictionary, decode_events, decompress_block, register_dictionary, unpack_run_times, unpack_run_types
from readmodel.store.interface import EventRow, StoredSession, SummaryRow, SummaryWhere
from readmodel.store.postgres import CONNECT_TIMEOUT_SECONDS, PostgresError, checked_on_checkout, open_existing
from readmodel.store.schema import MAX_LINK_SPAN, SCHEMA_REVISION
from readmodel.store.sources import SERVER_GENERATION_SQL
# One decoder of raw lines and one summary filter for both backends.
from readmodel.store.sqlite import _decode_line, _summary_where
from readmodel.store.urls import MalformedUrl, mask_url, parse

_T = TypeVar("_T")

_decode_objects: Final = msgspec.json.Decoder(list[dict[str, Any]]).decode
_decode_seqs: Final = msgspec.msgpack.Decoder(list[int]).decode

POOL_SIZE: Final = 4
"""Connections kept per store (servers read from a few threads at once)."""

_SESSION_COLUMNS: Final = (
    '"sid", "id", "header_json", "status", "error_code", "error_message", "event_count", "title_seq", "generation"'
)
_LISTING_ORDER: Final = '"created_at" DESC NULLS LAST, "id_key"'
_SUMMARY_SELECT: Final = (
    'SELECT s.sid, s.id, s.cwd, s.created_at, s.parent_session, s.event_count, s.title_seq, s.status, s.error_code, '
    's.last_activity, s.generation FROM "sessions" s'
)
_GENERATION: Final = (
    'SELECT m."identity", m."global_generation" || \'/\' || coalesce((SELECT string_agg(g."source" || \':\' || g."generation", \',\' '
    'ORDER BY g."source" COLLATE "C") FROM "sources" g), \'\') FROM "index_meta" m'
)
_RUNS_BETWEEN: Final = (
    'SELECT "first_seq", "count" FROM "event_runs" WHERE "sid" = %(sid)s AND "first_seq" BETWEEN '
    'coalesce((SELECT max("first_seq") FROM "event_runs" WHERE "sid" = %(sid)s AND "first_seq" <= %(first)s), %(first)s) '
    'AND %(last)s ORDER BY "first_seq"'
)


class PostgresIndexReader:
    """Queries inside one PostgreSQL snapshot.  Implements :class:`readmodel.store.interface.IndexReader`."""

    __slots__ = ("_cur",)

    def __init__(self, cursor: Any) -> None:
        self._cur = cursor

    def _all(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        self._cur.execute(sql, params)
        return self._cur.fetchall()

    def _one(self, sql: str, params: Any = None) -> tuple[Any, ...] | None:
        self._cur.execute(sql, params)
        return self._cur.fetchone()

    # -- listing -------------------------------------------------------------

    def generation(self) -> tuple[Any, ...]:
        """``(identity, generation vector)``: the prunes' counter, ``/``, then each source's counter,
        ``source:generation`` joined by commas (a source pruned and indexed again never repeats a vector)."""
        row = self._one(_GENERATION)
        assert row is not None
        return tuple(row)

    def generation_number(self) -> int:
        """The snapshot's generation as one number (:data:`readmodel.store.sources.SERVER_GENERATION_SQL`):
        it grows with every commit that changes the index (what the page's event feed announces)."""
        row = self._one(SERVER_GENERATION_SQL)
        assert row is not None
        return int(row[0])

    def list_headers(self) -> list[Header]:
        blobs = [row[0] for row in self._all(f'SELECT "header_json" FROM "sessions" ORDER BY {_LISTING_ORDER}')]
        return _decode_objects(b"[" + b",".join(blobs) + b"]") if blobs else []

    def list_keyed_headers(self) -> list[tuple[Header, float, bytes]]:
        rows = self._all(f'SELECT "header_json", "created_at", "id_key" FROM "sessions" ORDER BY {_LISTING_ORDER}')
        if not rows:
            return []
        headers = _decode_objects(b"[" + b",".join(row[0] for row in rows) + b"]")
        return [(header, row[1], row[2]) for header, row in zip(headers, rows)]

    def summary_page(self, where: SummaryWhere, limit: int, offset: int) -> list[SummaryRow]:
        clause, params = _summary_where(where, "%s")
        sql = f"{_SUMMARY_SELECT}{clause} ORDER BY s.created_at DESC NULLS LAST, s.id_key LIMIT %s OFFSET %s"
        return [SummaryRow(*row) for row in self._all(sql, (*params, limit, offset))]

    def summary_keys(self, where: SummaryWhere) -> list[tuple[float | None, bytes, str]]:
        clause, params = _summary_where(where, "%s")
        sql = f'SELECT s.created_at, s.id_key, s.id FROM "sessions" s{clause} ORDER BY s.created_at DESC NULLS LAST, s.id_key'
        return self._all(sql, params)  # type: ignore[return-value]

    def summary_rows(self, session_ids: Sequence[str]) -> dict[str, SummaryRow]:
        rows = self._all(f"{_SUMMARY_SELECT} WHERE s.id = ANY(%s)", (list(session_ids),))
        return {row[1]: SummaryRow(*row) for row in rows}

    def workspace_activity(self, excluded: Sequence[str] = ()) -> list[tuple[str | None, int, Any]]:
        sql = 'SELECT "cwd", count(*), max("last_activity") FROM "sessions"'
        if not excluded:
            return self._all(f'{sql} GROUP BY "cwd"')
        return self._all(f'{sql} WHERE NOT ("id" = ANY(%s)) GROUP BY "cwd"', (list(excluded),))

    def session_ids_of_sources(self, sources: Sequence[str]) -> set[str]:
        return {row[0] for row in self._all('SELECT "id" FROM "sessions" WHERE "source" = ANY(%s)', (list(sources),))}

    def ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        sql = 'SELECT "id" FROM "sessions" WHERE starts_with("id", %s) ORDER BY "id" COLLATE "C" LIMIT %s'
        return [row[0] for row in self._all(sql, (prefix, limit))]

    def cursor_key(self) -> tuple[str, bytes]:
        row = self._one('SELECT "identity", "cursor_secret" FROM "index_meta"')
        assert row is not None
        return row[0], bytes(row[1])

    def surface(self, sid: int) -> list[int]:
        sql = 'SELECT "seq" FROM "events" WHERE "sid" = %s AND "surface" = 1 ORDER BY "surface_key" NULLS FIRST'
        return [row[0] for row in self._all(sql, (sid,))]

    def lookup(self, session_id: str) -> StoredSession | None:
        row = self._one(f'SELECT {_SESSION_COLUMNS} FROM "sessions" WHERE "id" = %s', (session_id,))
        return None if row is None else StoredSession(*row)

    def lookup_many(self, session_ids: Sequence[str]) -> dict[str, StoredSession]:
        rows = self._all(f'SELECT {_SESSION_COLUMNS} FROM "sessions" WHERE "id" = ANY(%s)', (list(session_ids),))
        return {row[1]: StoredSession(*row) for row in rows}

    # -- inspection ------------------------------------------------------------

    def event_records(self, sid: int) -> list[tuple[int, str, Any, int]]:
        rows = self._all('SELECT "seq", "type", "time", "surface" FROM "events" WHERE "sid" = %s ORDER BY "seq"', (sid,))
        runs = self._all('SELECT "first_seq", "types", "times" FROM "event_runs" WHERE "sid" = %s ORDER BY "first_seq"', (sid,))
        if not runs:
            return rows  # type: ignore[return-value]
        for first, types, times in runs:
            rows += [(first + offset, etype, time, 0) for offset, (etype, time) in enumerate(zip(unpack_run_types(types), unpack_run_times(times)))]
        rows.sort(key=lambda row: row[0])
        return rows  # type: ignore[return-value]

    def event_range_records(self, sid: int, first: int, last: int) -> list[tuple[int, int, int | None, list[int]]]:
        rows = self._all(
            'SELECT "seq", "surface", "replaced_by", "replaced" FROM "events" WHERE "sid" = %s AND "seq" BETWEEN %s AND %s ORDER BY "seq"',
            (sid, first, last),
        )
        records = [(seq, surface, by, _decode_seqs(replaced) if replaced else []) for seq, surface, by, replaced in rows]
        runs = self._all(_RUNS_BETWEEN, {"sid": sid, "first": first, "last": last})
        if not runs:
            return records
        records += [
            (seq, 0, None, [])
            for run_first, count in runs
            for seq in range(max(first, run_first), min(last, run_first + count - 1) + 1)
        ]
        records.sort(key=lambda row: row[0])
        return records

    def event_row(self, sid: int, seq: int) -> EventRow | None:
        row = self._one(
            'SELECT "seq", "type", "time", "surface", "replaced_by", "sources", "replaced" FROM "events" WHERE "sid" = %s AND "seq" = %s',
            (sid, seq),
        )
        if row is not None:
            return EventRow(*row)
        run = self._one(
            'SELECT "first_seq", "count", "types", "times" FROM "event_runs" WHERE "sid" = %s AND "first_seq" <= %s '
            'ORDER BY "first_seq" DESC LIMIT 1',
            (sid, seq),
        )
        if run is None or seq >= run[0] + run[1]:
            return None
        offset = seq - run[0]
        return EventRow(seq, unpack_run_types(run[2])[offset], unpack_run_times(run[3])[offset], 0, None, None, None)

    def replaced_by(self, sid: int, seq: int) -> int | None:
        row = self._one('SELECT "replaced_by" FROM "events" WHERE "sid" = %s AND "seq" = %s', (sid, seq))
        return None if row is None else row[0]

    def derived_seqs(self, sid: int, seq: int) -> list[int]:
        sql = (
            'SELECT "seq" FROM "event_links" WHERE "sid" = %s AND "source_seq" BETWEEN %s AND %s AND "source_seq" + "span" > %s '
            'AND "seq" > %s ORDER BY "seq"'
        )
        return [row[0] for row in self._all(sql, (sid, seq - MAX_LINK_SPAN + 1, seq, seq, seq))]

    def documents(self, sid: int) -> list[tuple[int, str, Any, int, str]]:
        low = sid << 32
        sql = 'SELECT "seq", "type", "time", "surface", "text" FROM "documents" WHERE "docid" BETWEEN %s AND %s ORDER BY "docid"'
        return self._all(sql, (low, low | 0xFFFFFFFF))  # type: ignore[return-value]

    def _blocks(self, decode: Callable[[bytes], _T], data: bytes) -> _T:
        try:
            return decode(data)
        except MissingDictionary as missing:
            row = self._one('SELECT "data" FROM "block_dictionaries" WHERE "id" = %s', (missing.dict_id,))
            if row is None:
                raise
            register_dictionary(missing.dict_id, bytes(row[0]))
            return decode(data)

    def raw_range(self, sid: int, first: int, last: int) -> list[Event]:
        if last < first:
            return []
        found = self._one('SELECT max("first_seq") FROM "event_blocks" WHERE "sid" = %s AND "first_seq" <= %s', (sid, first))
        start = first if found is None or found[0] is None else found[0]
        events: list[Event] = []
        sql = 'SELECT "first_seq", "data" FROM "event_blocks" WHERE "sid" = %s AND "first_seq" BETWEEN %s AND %s ORDER BY "first_seq"'
        for block_first, data in self._all(sql, (sid, start, last)):
            block = self._blocks(decode_events, bytes(data))
            lo = max(first - block_first, 0)
            hi = min(last - block_first + 1, len(block))
            events.extend(block[lo:hi])
        return events

    def raw_all(self, sid: int) -> list[Event]:
        events: list[Event] = []
        for (data,) in self._all('SELECT "data" FROM "event_blocks" WHERE "sid" = %s ORDER BY "first_seq"', (sid,)):
            events.extend(self._blocks(decode_events, bytes(data)))
        return events

    def raw_at(self, sid: int, seqs: Iterable[int]) -> dict[int, Event]:
        wanted = sorted(set(seqs))
        if not wanted:
            return {}
        index = self._all('SELECT "first_seq", "count" FROM "event_blocks" WHERE "sid" = %s ORDER BY "first_seq"', (sid,))
        starts = [row[0] for row in index]
        needed: dict[int, list[int]] = {}
        for seq in wanted:
            position = bisect.bisect_right(starts, seq) - 1
            if position >= 0 and seq < starts[position] + index[position][1]:
                needed.setdefault(starts[position], []).append(seq)
        found: dict[int, Event] = {}
        for block_first, members in needed.items():
            row = self._one('SELECT "data" FROM "event_blocks" WHERE "sid" = %s AND "first_seq" = %s', (sid, block_first))
            if row is None:
                continue
            lines = self._blocks(decompress_block, bytes(row[0]))
            for seq in members:
                found[seq] = _decode_line(lines[seq - block_first])
        return found


class PostgresIndexStore:
    """A PostgreSQL index opened for reading.  Implements :class:`readmodel.store.interface.IndexSource`.

    Thread-safe: each :meth:`read` borrows a pooled connection for one
    transaction; a nested :meth:`read` in the same thread joins it.
    """

    def __init__(self, engine: Engine, db: str) -> None:
        self.engine = engine
        self.db = db
        self._local = threading.local()

    @classmethod
    def open(cls, db: str) -> PostgresIndexStore:
        """Open an existing PostgreSQL index at the head schema; ``SESSION_QUERY_INDEX_FAILED`` otherwise."""
        try:
            probe_engine, conn = open_existing(db)
        except PostgresError as exc:
            raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", str(exc), exc) from None
        try:
            from readmodel.store.revisions import current_revision

            revision = current_revision(conn)
        finally:
            conn.close()
            probe_engine.dispose()
        if revision != SCHEMA_REVISION:
            message = f"{mask_url(db)} is at schema revision {revision or '(none)'}, this sessionq reads {SCHEMA_REVISION}; run `sessionq db upgrade --db URL`"
            raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", message)
        try:
            engine = checked_on_checkout(
                create_engine(parse(db), pool_size=POOL_SIZE, max_overflow=8, connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS})
            )
        except MalformedUrl as exc:
            raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", str(exc)) from None
        return cls(engine, db)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A psycopg cursor in one ``REPEATABLE READ READ ONLY`` transaction (joined when nested in this thread)."""
        held = getattr(self._local, "held", None)
        if held is not None:
            yield held
            return
        try:
            fairy = self.engine.raw_connection()
        except Exception as exc:
            from readmodel.store.urls import connect_message

            raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", connect_message(self.db, exc), exc) from None
        conn = fairy.driver_connection
        conn.autocommit = True  # the transaction is ours, with its isolation level on its BEGIN
        cursor = conn.cursor()
        try:
            cursor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            self._local.held = cursor
            try:
                yield cursor
            finally:
                self._local.held = None
            cursor.execute("COMMIT")
        except BaseException:
            try:
                cursor.execute("ROLLBACK")
            except Exception:  # noqa: BLE001 - the original failure is what the caller must see
                pass
            raise
        finally:
            cursor.close()
            fairy.close()

    @contextmanager
    def read(self) -> Iterator[PostgresIndexReader]:
        """One read snapshot; every query through the reader sees one committed state."""
        with self.transaction() as cursor:
            yield PostgresIndexReader(cursor)

    def close(self) -> None:
        self.engine.dispose()


def open_index_source(db: str) -> Any:
    """The index ``db`` opened for reading: a :class:`PostgresIndexStore` for a PostgreSQL URL,
    else the SQLite :class:`~readmodel.store.sqlite.IndexStore`; ``SESSION_QUERY_INDEX_FAILED`` when unusable."""
    from readmodel.store.sqlite import IndexStore
    from readmodel.store.urls import is_postgres

    return PostgresIndexStore.open(db) if is_postgres(db) else IndexStore.open(db)
