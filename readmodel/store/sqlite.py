"""Read access to the index database: the query side's persisted source.

Everything a read needs is in the index (readmodel/store/schema.py); no log file is
opened.  :class:`IndexStore` owns a read-only engine (``mode=ro``, WAL) and one
SQLite connection per thread; :meth:`IndexStore.read` runs one read
transaction (``BEGIN`` … ``COMMIT``), so every statement of one answer sees one
committed generation even while the indexer writes.

:class:`SqliteIndexReader` is the transaction's narrow query interface, the
SQLite implementation of :class:`readmodel.store.interface.IndexReader`.

Raw events come from ``event_blocks``: zstd-compressed runs of consecutive
events' compact JSON.  Only the blocks a read needs are fetched and decoded.
Event rows come from ``events`` and, for runs of plain events, ``event_runs``
(one row per run); every per-event read merges the two.
"""

from __future__ import annotations

import bisect
import json
from operator import itemgetter
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import msgspec
from sqlalchemy import Engine

from readmodel.store.blocks import MissingDictionary, decode_events, decompress_block, register_dictionary, unpack_run_times, unpack_run_types
from readmodel.store.database import open_reader
from readmodel.projection.lineage import clone_json
from readmodel.store.schema import MAX_LINK_SPAN
from readmodel.core.vocabulary import Event, Header
from readmodel.store.interface import EventRow, StoredSession, SummaryRow, SummaryWhere
from readmodel.store.sources import session_ids_of_sources

_T = TypeVar("_T")

# Shared by every reading thread: msgspec Decoders keep no per-call state
# (thread-safe since msgspec 0.16), unlike zstd contexts (see readmodel.store.blocks).
_decode_json: Final = msgspec.json.Decoder().decode
_decode_objects: Final = msgspec.json.Decoder(list[dict[str, Any]]).decode
_decode_seqs: Final = msgspec.msgpack.Decoder(list[int]).decode
_by_seq: Final = itemgetter(0)

# SQLite's default limit on host parameters is far above this; chunks keep
# ``IN (...)`` lists reasonable for huge title batches.
_IN_CHUNK: Final = 500

_SESSION_COLUMNS: Final = (
    '"sid", "id", "header_json", "status", "error_code", "error_message", '
    '"event_count", "title_seq", "generation"'
)


def _decode_line(line: bytes) -> Event:
    """One raw event line (the standard library reads what msgspec refuses,
    e.g. an escaped lone surrogate; see :func:`readmodel.store.blocks.encode_event`)."""
    try:
        return _decode_json(line)
    except msgspec.DecodeError:
        return json.loads(line)


@dataclass(frozen=True, slots=True)
class _Listing:
    """The decoded listing of one index generation (never handed out itself)."""

    key: tuple[Any, ...]
    headers: list[Header]
    flat: bool  # every header value is a scalar, so a shallow copy is a deep one


def _all_flat(joined: bytes, count: int) -> bool:
    """Whether every header JSON of a listing holds only scalar values.

    Checked on the bytes: ``count`` objects with no other ``{`` and no ``[``
    cannot nest anything.  A brace inside a string makes this answer "no",
    which only costs a deep copy; it never answers "yes" wrongly.
    """
    return joined.count(b"{") == count and b"[" not in joined


class _ListingCache:
    """The last listing, keyed by ``(identity, global_generation)``.

    The indexer bumps the generation in every transaction that changes the
    corpus, so an unchanged key means the ``sessions`` rows (headers and order)
    are unchanged and the decoded headers can be reused: each read still gets
    private copies.  Shared by every thread on purpose: an entry is never
    mutated once published, and replacing it is one atomic attribute store.
    """

    def __init__(self) -> None:
        self.entry: _Listing | None = None


class SqliteIndexReader:
    """Queries inside one SQLite read transaction (one consistent snapshot).

    Implements :class:`readmodel.store.interface.IndexReader`."""

    __slots__ = ("_cur", "_cache")

    def __init__(self, cursor: sqlite3.Cursor, cache: _ListingCache | None = None) -> None:
        self._cur = cursor
        self._cache = cache

    # -- listing -------------------------------------------------------------

    def generation(self) -> tuple[Any, ...]:
        """``(identity, global_generation)`` of the snapshot this transaction sees."""
        return tuple(self._cur.execute(_GENERATION).fetchone())

    def list_headers(self) -> list[Header]:
        """Every persisted header, in listing order (``createdAt`` desc, id by
        ``localeCompare``); each a private copy."""
        if self._cache is None:
            return self._decode_listing()
        key = self.generation()
        entry = self._cache.entry
        if entry is None or entry.key != key:
            blobs = [row[0] for row in self._cur.execute(_LIST_HEADERS)]
            joined = b",".join(blobs)
            headers = _decode_objects(b"[" + joined + b"]") if blobs else []
            entry = _Listing(key, headers, _all_flat(joined, len(blobs)))
            self._cache.entry = entry
        if entry.flat:
            return [header.copy() for header in entry.headers]
        return [clone_json(header) for header in entry.headers]

    def _decode_listing(self) -> list[Header]:
        blobs = [row[0] for row in self._cur.execute(_LIST_HEADERS)]
        return _decode_objects(b"[" + b",".join(blobs) + b"]") if blobs else []

    def list_keyed_headers(self) -> list[tuple[Header, float, bytes]]:
        """Headers in listing order with their sort keys ``(createdAt, id_key)``."""
        rows = self._cur.execute(_LIST_KEYED).fetchall()
        if not rows:
            return []
        headers = _decode_objects(b"[" + b",".join(row[0] for row in rows) + b"]")
        return [(header, row[1], row[2]) for header, row in zip(headers, rows)]

    # -- session summaries (a sessionq extension) ------------------------------

    def summary_page(self, where: SummaryWhere, limit: int, offset: int) -> list[SummaryRow]:
        """``limit`` summaries from ``offset`` of the filtered listing (listing order)."""
        clause, params = _summary_where(where)
        sql = f"{_SUMMARY_SELECT}{clause} ORDER BY s.created_at DESC, s.id_key LIMIT ? OFFSET ?"
        return [_summary_row(row) for row in self._cur.execute(sql, (*params, limit, offset))]

    def summary_keys(self, where: SummaryWhere) -> list[tuple[float | None, bytes, str]]:
        """``(createdAt, id_key, id)`` of every filtered session, in listing order."""
        clause, params = _summary_where(where)
        sql = f'SELECT s.created_at, s.id_key, s.id FROM "sessions" s{clause} ORDER BY s.created_at DESC, s.id_key'
        return self._cur.execute(sql, params).fetchall()

    def summary_rows(self, session_ids: Sequence[str]) -> dict[str, SummaryRow]:
        """The summaries of the listed sessions among ``session_ids``."""
        found: dict[str, SummaryRow] = {}
        for start in range(0, len(session_ids), _IN_CHUNK):
            chunk = list(session_ids[start : start + _IN_CHUNK])
            sql = f'{_SUMMARY_SELECT} WHERE s.id IN ({",".join("?" * len(chunk))})'
            for row in self._cur.execute(sql, chunk):
                found[row[1]] = _summary_row(row)
        return found

    def workspace_activity(self, excluded: Sequence[str] = ()) -> list[tuple[str | None, int, Any]]:
        """``(cwd, sessions, newest numeric last activity)`` per workspace of the persisted
        sessions, leaving out the ids in ``excluded`` (live sessions, counted by the caller)."""
        if not excluded:
            return self._cur.execute(f'{_WORKSPACES} GROUP BY "cwd"').fetchall()
        placeholders = ",".join("?" * len(excluded))
        return self._cur.execute(f'{_WORKSPACES} WHERE "id" NOT IN ({placeholders}) GROUP BY "cwd"', list(excluded)).fetchall()

    def session_ids_of_sources(self, sources: Sequence[str]) -> set[str]:
        """The ids of the stored sessions indexed by any of ``sources``."""
        return session_ids_of_sources(self._cur, sources)

    def ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` listed ids starting with ``prefix`` (a range scan of the id index)."""
        sql = 'SELECT "id" FROM "sessions" WHERE "id" >= ?1 AND "id" <= ?1 || char(1114111) AND substr("id", 1, length(?1)) = ?1 ORDER BY "id" LIMIT ?2'
        return [row[0] for row in self._cur.execute(sql, (prefix, limit))]

    def cursor_key(self) -> tuple[str, bytes]:
        """``(identity, cursor secret)`` of the index."""
        identity, secret = self._cur.execute('SELECT "identity", "cursor_secret" FROM "index_meta"').fetchone()
        return identity, secret

    def surface(self, sid: int) -> list[int]:
        """The current surface nodes of a session, in model-history order.

        A replacement inherits the order key of the first node it removed, so
        current nodes ordered by key are the reference's surface order.
        """
        return [row[0] for row in self._cur.execute(_SURFACE, (sid,))]

    def lookup(self, session_id: str) -> StoredSession | None:
        """The listed session with this id, or ``None``."""
        row = self._cur.execute(_LOOKUP, (session_id,)).fetchone()
        return None if row is None else StoredSession(*row)

    def lookup_many(self, session_ids: Sequence[str]) -> dict[str, StoredSession]:
        """The listed sessions among ``session_ids`` (one listing for a batch)."""
        found: dict[str, StoredSession] = {}
        for start in range(0, len(session_ids), _IN_CHUNK):
            chunk = list(session_ids[start : start + _IN_CHUNK])
            marks = ",".join("?" * len(chunk))
            sql = f'SELECT {_SESSION_COLUMNS} FROM "sessions" WHERE "id" IN ({marks})'
            for row in self._cur.execute(sql, chunk):
                found[row[1]] = StoredSession(*row)
        return found

    # -- inspection ------------------------------------------------------------

    def event_records(self, sid: int) -> list[tuple[int, str, Any, int]]:
        """``(seq, type, time, surface code)`` of every event, ascending seq."""
        rows = self._cur.execute(_EVENT_RECORDS, (sid,)).fetchall()
        runs = self._cur.execute(_RUN_RECORDS, (sid,)).fetchall()
        if not runs:
            return rows
        # Run members are plain events: log-only (surface code 0).
        for first, types, times in runs:
            rows += [(first + offset, etype, time, 0) for offset, (etype, time) in enumerate(zip(unpack_run_types(types), unpack_run_times(times)))]
        rows.sort(key=_by_seq)  # two ascending runs: a linear merge for timsort
        return rows

    def event_range_records(self, sid: int, first: int, last: int) -> list[tuple[int, int, int | None, list[int]]]:
        """``(seq, surface code, replaced by, replaced nodes)`` of events ``first..last``."""
        rows = self._cur.execute(_EVENT_RANGE, (sid, first, last)).fetchall()
        records = [(seq, surface, by, _decode_seqs(replaced) if replaced else []) for seq, surface, by, replaced in rows]
        runs = self._cur.execute(_RUNS_BETWEEN, (sid, first, last)).fetchall()
        if not runs:
            return records
        records += [
            (seq, 0, None, [])
            for run_first, count in runs
            for seq in range(max(first, run_first), min(last, run_first + count - 1) + 1)
        ]
        records.sort(key=_by_seq)
        return records

    def event_row(self, sid: int, seq: int) -> EventRow | None:
        """The row of event ``seq`` (a run member reads as a plain log-only row), or ``None``."""
        row = self._cur.execute(_EVENT_ROW, (sid, seq)).fetchone()
        if row is not None:
            return EventRow(*row)
        run = self._cur.execute(_RUN_AT, (sid, seq)).fetchone()
        if run is None or seq >= run[0] + run[1]:
            return None
        offset = seq - run[0]
        return EventRow(seq, unpack_run_types(run[2])[offset], unpack_run_times(run[3])[offset], 0, None, None, None)

    def replaced_by(self, sid: int, seq: int) -> int | None:
        """The seq of the replacement that shadowed ``seq``, or ``None``."""
        row = self._cur.execute(_REPLACED_BY, (sid, seq)).fetchone()
        return None if row is None else row[0]

    def derived_seqs(self, sid: int, seq: int) -> list[int]:
        """Later events whose ``sourceEventSeqs`` cite ``seq``, ascending."""
        # A link row covers sources source_seq .. source_seq + span - 1, span <= MAX_LINK_SPAN.
        return [row[0] for row in self._cur.execute(_DERIVED, (sid, seq - MAX_LINK_SPAN + 1, seq, seq, seq))]

    def documents(self, sid: int) -> list[tuple[int, str, Any, int, str]]:
        """``(seq, type, time, surface code, text)`` of every document, ascending seq."""
        low = sid << 32
        return self._cur.execute(_DOCUMENTS, (low, low | 0xFFFFFFFF)).fetchall()

    def _blocks(self, decode: Callable[[bytes], _T], data: bytes) -> _T:
        """``decode(data)`` of a raw block, loading its zstd dictionary from the index first when needed."""
        try:
            return decode(data)
        except MissingDictionary as missing:
            # A cursor of its own: callers decode while iterating ``self._cur``'s rows, and a
            # statement run on that cursor would silently end their loop after this block.
            row = self._cur.connection.execute('SELECT "data" FROM "block_dictionaries" WHERE "id" = ?', (missing.dict_id,)).fetchone()
            if row is None:
                raise
            register_dictionary(missing.dict_id, row[0])
            return decode(data)

    def raw_range(self, sid: int, first: int, last: int) -> list[Event]:
        """The raw events ``first..last`` (inclusive), decoded from their blocks."""
        if last < first:
            return []
        start = self._cur.execute(_BLOCK_START, (sid, first)).fetchone()[0]
        if start is None:
            start = first
        events: list[Event] = []
        for block_first, data in self._cur.execute(_BLOCKS_BETWEEN, (sid, start, last)):
            block = self._blocks(decode_events, data)
            lo = max(first - block_first, 0)
            hi = min(last - block_first + 1, len(block))
            events.extend(block[lo:hi])
        return events

    def raw_all(self, sid: int) -> list[Event]:
        """Every raw event of a session, in seq order."""
        events: list[Event] = []
        for (data,) in self._cur.execute(_ALL_BLOCKS, (sid,)):
            events.extend(self._blocks(decode_events, data))
        return events

    def raw_at(self, sid: int, seqs: Iterable[int]) -> dict[int, Event]:
        """The raw events at ``seqs`` (any order), fetching each needed block once."""
        wanted = sorted(set(seqs))
        if not wanted:
            return {}
        index = self._cur.execute(_BLOCK_INDEX, (sid,)).fetchall()
        starts = [row[0] for row in index]
        needed: dict[int, list[int]] = {}
        for seq in wanted:
            position = bisect.bisect_right(starts, seq) - 1
            if position >= 0 and seq < starts[position] + index[position][1]:
                needed.setdefault(starts[position], []).append(seq)
        found: dict[int, Event] = {}
        for block_first, members in needed.items():
            row = self._cur.execute(_BLOCK_DATA, (sid, block_first)).fetchone()
            if row is None:
                continue
            lines = self._blocks(decompress_block, row[0])
            for seq in members:
                found[seq] = _decode_line(lines[seq - block_first])
        return found


# ``last_activity`` is maintained by the indexer (readmodel/store/activity.py).
_SUMMARY_SELECT: Final = (
    'SELECT s.sid, s.id, s.cwd, s.created_at, s.parent_session, s.event_count, s.title_seq, s.status, s.error_code, '
    's.last_activity, s.generation FROM "sessions" s'
)
# Workspaces with their session count and newest numeric last activity (a time that is
# not a number never counts as newest, as :func:`readmodel.core.jsvalues.is_number` says).
_WORKSPACES: Final = (
    'SELECT "cwd", count(*), max(CASE WHEN typeof("last_activity") IN (\'integer\', \'real\') THEN "last_activity" END) '
    'FROM "sessions"'
)


def _summary_where(where: SummaryWhere, mark: str = "?") -> tuple[str, list[Any]]:
    """The ``WHERE`` clause (bound parameters only) of a summary filter; ``mark`` is the
    driver's placeholder (``?`` for sqlite3, ``%s`` for psycopg)."""
    terms: list[str] = []
    params: list[Any] = []
    if where.cwd_given:
        if where.cwd is None:
            terms.append("s.cwd IS NULL")
        else:
            terms.append(f"s.cwd = {mark}")
            params.append(where.cwd)
    if where.created_from is not None:
        terms.append(f"s.created_at >= {mark}")
        params.append(where.created_from)
    if where.created_to is not None:
        terms.append(f"s.created_at <= {mark}")
        params.append(where.created_to)
    return (" WHERE " + " AND ".join(terms) if terms else ""), params


def _summary_row(row: Sequence[Any]) -> SummaryRow:
    return SummaryRow(*row)


_GENERATION: Final = 'SELECT "identity", "global_generation" FROM "index_meta"'
_LIST_HEADERS: Final = 'SELECT "header_json" FROM "sessions" ORDER BY "created_at" DESC, "id_key"'
_LIST_KEYED: Final = 'SELECT "header_json", "created_at", "id_key" FROM "sessions" ORDER BY "created_at" DESC, "id_key"'
_SURFACE: Final = 'SELECT "seq" FROM "events" WHERE "sid" = ? AND "surface" = 1 ORDER BY "surface_key"'
_LOOKUP: Final = f'SELECT {_SESSION_COLUMNS} FROM "sessions" WHERE "id" = ?'
_EVENT_RECORDS: Final = 'SELECT "seq", "type", "time", "surface" FROM "events" WHERE "sid" = ? ORDER BY "seq"'
_EVENT_RANGE: Final = (
    'SELECT "seq", "surface", "replaced_by", "replaced" FROM "events" WHERE "sid" = ? AND "seq" BETWEEN ? AND ? ORDER BY "seq"'
)
_EVENT_ROW: Final = (
    'SELECT "seq", "type", "time", "surface", "replaced_by", "sources", "replaced" '
    'FROM "events" WHERE "sid" = ? AND "seq" = ?'
)
_REPLACED_BY: Final = 'SELECT "replaced_by" FROM "events" WHERE "sid" = ? AND "seq" = ?'
_DERIVED: Final = (
    'SELECT "seq" FROM "event_links" WHERE "sid" = ? AND "source_seq" BETWEEN ? AND ? AND "source_seq" + "span" > ? '
    'AND "seq" > ? ORDER BY "seq"'
)
_RUN_RECORDS: Final = 'SELECT "first_seq", "types", "times" FROM "event_runs" WHERE "sid" = ? ORDER BY "first_seq"'
_RUNS_BETWEEN: Final = (
    'SELECT "first_seq", "count" FROM "event_runs" WHERE "sid" = ?1 AND "first_seq" BETWEEN '
    'coalesce((SELECT max("first_seq") FROM "event_runs" WHERE "sid" = ?1 AND "first_seq" <= ?2), ?2) AND ?3 '
    'ORDER BY "first_seq"'
)
_RUN_AT: Final = (
    'SELECT "first_seq", "count", "types", "times" FROM "event_runs" WHERE "sid" = ? AND "first_seq" <= ? '
    'ORDER BY "first_seq" DESC LIMIT 1'
)
_DOCUMENTS: Final = (
    'SELECT "seq", "type", "time", "surface", "text" FROM "documents" '
    'WHERE "docid" BETWEEN ? AND ? ORDER BY "docid"'
)
_BLOCK_START: Final = 'SELECT max("first_seq") FROM "event_blocks" WHERE "sid" = ? AND "first_seq" <= ?'
_BLOCKS_BETWEEN: Final = (
    'SELECT "first_seq", "data" FROM "event_blocks" WHERE "sid" = ? AND "first_seq" BETWEEN ? AND ? '
    'ORDER BY "first_seq"'
)
_ALL_BLOCKS: Final = 'SELECT "data" FROM "event_blocks" WHERE "sid" = ? ORDER BY "first_seq"'
_BLOCK_INDEX: Final = 'SELECT "first_seq", "count" FROM "event_blocks" WHERE "sid" = ? ORDER BY "first_seq"'
_BLOCK_DATA: Final = 'SELECT "data" FROM "event_blocks" WHERE "sid" = ? AND "first_seq" = ?'

@dataclass(slots=True, weakref_slot=True)
class _ThreadConnection:
    """One thread's connection to the index, its cursor and its transaction depth."""

    fairy: Any  # SQLAlchemy's pooled connection (``driver_connection`` is the sqlite3 one)
    cursor: sqlite3.Cursor
    pid: int
    depth: int = 0


def _release(opened: dict[int, Any], lock: threading.RLock, fairy: Any) -> None:
    """Close a connection whose thread has ended, unless the store already closed it.

    Takes the store's registry and lock rather than the store, so a pending
    release never keeps a dropped store alive.
    """
    with lock:
        if opened.pop(id(fairy), None) is None:
            return
    try:
        fairy.close()
    except Exception:  # noqa: BLE001 - closing is best effort
        pass


class IndexStore:
    """The SQLite index opened for reading, with one connection per thread.

    Implements :class:`readmodel.store.interface.IndexSource`.

    Thread-safe: each thread gets its own SQLite connection (opened lazily,
    kept for the thread's later reads, closed when the thread ends); a forked
    child opens its own.  Read transactions nest: an inner :meth:`read` joins
    the outer one.
    """

    def __init__(self, engine: Engine, db: str | None = None) -> None:
        self.engine = engine
        self.db = db if db is not None else engine.url.render_as_string(hide_password=False)
        self._listing = _ListingCache()
        self._local = threading.local()
        self._opened: dict[int, Any] = {}  # the open connections, by id; never replaced
        # Reentrant: a release may run (garbage collection) in a thread that holds it.
        self._lock = threading.RLock()
        self._closed = False

    @classmethod
    def open(cls, db: str) -> IndexStore:
        """Open an existing index read-only; raises ``SESSION_QUERY_INDEX_FAILED``."""
        return cls(open_reader(db), db)

    def open_connections(self) -> int:
        """How many SQLite connections the store holds open (one per live reading thread)."""
        with self._lock:
            return len(self._opened)

    def _connection(self) -> _ThreadConnection:
        """This thread's connection (opened on its first read in this process).

        A connection and its cursor are only ever used by the thread that
        opened them; :meth:`close` and the release at the thread's end are the
        exceptions, and both run when the thread no longer reads.
        """
        if self._closed:
            raise sqlite3.ProgrammingError("the index store is closed")
        held = getattr(self._local, "held", None)
        if held is None or held.pid != os.getpid():
            held = self._open_for_thread()
        return held

    def _open_for_thread(self) -> _ThreadConnection:
        fairy = self.engine.raw_connection()
        with self._lock:
            # Registered under the lock close() takes, so a connection opened
            # while another thread closes the store is not leaked.
            if self._closed:
                fairy.close()
                raise sqlite3.ProgrammingError("the index store is closed")
            self._opened[id(fairy)] = fairy
        held = _ThreadConnection(fairy, fairy.driver_connection.cursor(), os.getpid())
        # A thread's slot of ``self._local`` is dropped when the thread ends; a
        # server's pool retires idle threads and starts new ones (anyio after
        # 10 s idle), so the connection is released then, not at close().
        weakref.finalize(held, _release, self._opened, self._lock, fairy)
        self._local.held = held
        return held

    @contextmanager
    def read(self) -> Iterator[SqliteIndexReader]:
        """One read transaction; every query through the reader sees one snapshot."""
        held = self._connection()
        if held.depth:
            held.depth += 1
            try:
                yield SqliteIndexReader(held.cursor, self._listing)
            finally:
                held.depth -= 1
            return
        connection = held.fairy.driver_connection
        connection.execute("BEGIN")
        held.depth = 1
        try:
            yield SqliteIndexReader(held.cursor, self._listing)
        except BaseException:
            held.depth = 0
            try:
                connection.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the original failure is what the caller must see
            raise
        held.depth = 0
        connection.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this store opened and dispose of the engine."""
        with self._lock:
            self._closed = True
            opened = list(self._opened.values())
            self._opened.clear()
        for fairy in opened:
            try:
                fairy.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        self.engine.dispose()
