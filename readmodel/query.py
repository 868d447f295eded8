"""The query engine: exact reads, filters and traces (query-spec §1–§7).

:class:`SessionQuery` answers every read of the reference's session-query
service from two sources, merged exactly as the reference merges
``ctx.sessions`` with its persistence backend:

* the **index** (an :class:`readmodel.store.interface.IndexSource`; SQLite: :class:`readmodel.store.sqlite.IndexStore`), the persisted corpus;
  listing it plays the backend's ``list``, fetching a session's rows plays
  ``inspect``;
* an optional **live source** (:class:`readmodel.live.LiveSource`): in-process
  sessions, which always win and are never read from the index.

Every persisted answer comes from one read transaction, so it reflects one
committed index generation even while the indexer writes.

Python equivalents of the reference's asynchronous behaviour:

* cancellable reads take an optional :class:`readmodel.core.cancel.AbortSignal`
  and run the abort checks at the reference's points, raising the caller's
  reason object itself; a database call is never interrupted, the next check
  raises once it has returned ("wait for the backend call to settle");
* inputs (filters, requests, id lists) are copied and validated before any
  I/O, which is what "synchronously at call time" guarantees in JS;
* title batches resolve persisted ids one after another inside a single read
  transaction: ``persistedInspectConcurrency`` is validated and bounds the
  concurrency (here always 1), but there are no concurrent backend calls to
  schedule, because an inspection is an index lookup, not I/O on a log.
"""

from __future__ import annotations

import heapq
from functools import partial
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from msgspec import UNSET

from readmodel.core.cancel import AbortSignal, is_aborted, throw_if_aborted
from readmodel.core.config import QueryConfig, validate_config
from readmodel.store.database import failure_reason, snapshot, sqlite_path
from readmodel.core.errors import SessionQueryError
from readmodel.projection.eventtrace import assemble_trace, build_event_records, event_not_found, target_index, trace_event as trace_live_event
from readmodel.projection.extraction import build_documents
from readmodel.projection.redaction import list_reader, read_window, redact_events, redact_titles, restored_documents
from readmodel.projection.secrets import Policy, policy_from_env, redacts_index, redacts_raw
from readmodel.projection.filters import event_predicate, materialize_event_filters, materialize_session_filters, session_predicate
from readmodel.projection.frozen import snapshot_event
from readmodel.core.jsvalues import is_integer, is_number, js_string
from readmodel.projection.lineage import clone_json, session_not_found
from readmodel.projection.lineage import trace_session as trace_lineage
from readmodel.live import LiveSnapshot, LiveSource, assert_headers_compatible, snapshot_live
from readmodel.projection.replay import validate_replay
from readmodel.core.requests import (
    SessionEventReadRequest,
    SessionEventTraceRequest,
    SessionTitleObservationResult,
    read_request,
    trace_request,
)
from readmodel.store.schema import SURFACE_NAMES, id_sort_key
from readmodel.search.config import search_config
from readmodel.search.engine import SessionSearch, search_disabled
from readmodel.search.sqlite import sqlite_search
from readmodel.search.postgres import postgres_search
from readmodel.search.summaries import SessionSummary, SessionSummaryPage, TitleCache, WorkspaceSummary, summaries_for, summary_page, summary_request, workspaces
from readmodel.search.vocabulary import SessionEventSearchPage, SessionSearchPage
from readmodel.store.interface import IndexReader, IndexSource, StoredSession
from readmodel.store.pgreader import PostgresIndexStore, open_index_source
from readmodel.projection.surface import fold_session_surface
from readmodel.projection.titles import title_observation, title_snapshot
from readmodel.core.vocabulary import (
    Event,
    Header,
    SessionEventRange,
    SessionEventRangeRecord,
    SessionEventRecord,
    SessionEventSearchDocument,
    SessionEventTraceObservation,
    SessionEventWindow,
    SessionLineageTrace,
    SessionLogSnapshot,
    SessionRecord,
    SessionSurfaceSnapshot,
    SessionTitleObservation,
    SessionTitleSnapshot,
)

T = TypeVar("T")

EVENT_RANGE_MAX: Final = 5000
"""The most events one ``readEventRange`` answers."""


# --------------------------------------------------------------------------- errors


def _error_message(error: BaseException) -> str:
    """``error.message`` of a backend failure (the driver's text for database errors)."""
    original = getattr(error, "orig", None)  # SQLAlchemy wraps DB-API errors
    if isinstance(original, BaseException):
        error = original
    return str(error)


def listing_failed(error: BaseException) -> SessionQueryError:
    """§1.3: a failed ``list`` → ``SESSION_QUERY_PERSISTENCE_FAILED``."""
    return SessionQueryError(
        "SESSION_QUERY_PERSISTENCE_FAILED", f"session persistence listing failed: {_error_message(error)}", error
    )


def inspect_failed(session_id: str, error: BaseException) -> SessionQueryError:
    """§1.3: a failed ``inspect`` → ``SESSION_QUERY_PERSISTENCE_FAILED``."""
    return SessionQueryError(
        "SESSION_QUERY_PERSISTENCE_FAILED", f'failed to inspect session "{session_id}": {_error_message(error)}', error
    )


def invalid_window(name: str, maximum: int) -> SessionQueryError:
    return SessionQueryError("SESSION_QUERY_INVALID_WINDOW", f"{name} must be an integer between 0 and {maximum}")


@contextmanager
def _backend_call(signal: AbortSignal | None, wrap: Callable[[BaseException], SessionQueryError]) -> Iterator[None]:
    """Map a failure of a persisted-source call (§1.3).

    A failure while the caller's signal is aborted becomes the abort reason;
    a coded query error (a session stored with its error) passes unchanged;
    anything else is wrapped with the original as ``cause``.
    """
    try:
        yield
    except Exception as error:
        if is_aborted(signal):
            assert signal is not None and signal.reason is not None
            raise signal.reason
        if isinstance(error, SessionQueryError):
            raise
        raise wrap(error) from error


# --------------------------------------------------------------------------- observations


@dataclass(frozen=True, slots=True)
class _Persisted(Generic[T]):
    """A persisted observation: the listed row and what the read fetched."""

    row: StoredSession
    payload: T


def _window_bound(name: str, value: Any, maximum: int) -> int:
    """``before``/``after``: absent means 0; otherwise an integer in [0, max] (§6)."""
    if value is UNSET:
        return 0
    if not (is_number(value) and is_integer(value) and 0 <= value <= maximum):
        raise invalid_window(name, maximum)
    return int(value)


def _persisted_index(seq: Any, count: int) -> int | None:
    """The array index ``events[seq]`` denotes in a stored log of ``count`` events."""
    if is_number(seq) and is_integer(seq) and 0 <= seq < count:
        return int(seq)
    return None


def _id_text(session_id: Any) -> str:
    """JS ``String(id)`` for the error message of an id that is not a string."""
    return "undefined" if session_id is UNSET else js_string(session_id)


_SEARCH_KEYS: Final = ("defaultLimit", "maxLimit", "snippetChars", "openAt", "journalMode")


def _search_settings(config: Any) -> dict[str, Any]:
    """The search provider's keys of a raw configuration mapping (camelCase or snake_case)."""
    if not isinstance(config, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key in _SEARCH_KEYS:
        snake = "".join("_" + ch.lower() if ch.isupper() else ch for ch in key)
        value = config.get(key, config.get(snake))
        if value is not None:
            out[key] = value
    return out


def _listing_key(created_at: Any, id_key: bytes) -> tuple[float, bytes]:
    """Sort key of the listing order: ``createdAt`` descending, then id collation."""
    return (-float(created_at) if is_number(created_at) else 0.0, id_key)


class SessionQuery:
    """Exact reads, filters and traces over the index plus an optional live source.

    Construct with :meth:`open` (a database path or URL) or directly with an
    :class:`IndexStore` (``None`` means no persistence: only live sessions).
    Thread-safe.  Method names are the reference's in snake_case; results are
    the msgspec structs of :mod:`readmodel.core.vocabulary`.
    """

    def __init__(
        self,
        store: IndexSource | None = None,
        live: LiveSource | None = None,
        config: Mapping[str, Any] | QueryConfig | None = None,
        redact: Policy | None = None,
    ) -> None:
        # Validated first: an invalid config means no engine (T-EX-22).
        self.config = validate_config(config)
        # Secret redaction (``$SESSIONQ_REDACT`` unless given): live documents and titles as the index's
        # unless ``off``; raw reads by default under ``all`` (a call's ``redact`` decides otherwise).
        policy = policy_from_env(redact)
        self.redact_documents, self.redact_reads = redacts_index(policy), redacts_raw(policy)
        self.search_config = search_config(_search_settings(config))
        self.store = store
        self.live = live
        self._search: SessionSearch | None = None
        self._search_lock = threading.Lock()
        self._titles = TitleCache()
        if self.search_config.open_at == "startup":
            self._searcher().open()

    @classmethod
    def open(
        cls, db: str, live: LiveSource | None = None, config: Mapping[str, Any] | QueryConfig | None = None, redact: Policy | None = None
    ) -> SessionQuery:
        """Open the index at ``db`` read-only (``SESSION_QUERY_INDEX_FAILED`` if
        it cannot be used); ``config`` is validated before the database is touched."""
        validate_config(config)
        search_config(_search_settings(config))
        return cls(open_index_source(db), live, config, redact)

    def close(self) -> None:
        """Release the database connections (live sessions are not touched)."""
        with self._search_lock:
            search = self._search
        if search is not None:
            search.close()
        if self.store is not None:
            self.store.close()

    # -- search ---------------------------------------------------------------

    def _searcher(self) -> SessionSearch:
        with self._search_lock:
            if self._search is None and isinstance(self.store, PostgresIndexStore):
                self._search = postgres_search(self.store, live=self.live, config=self.search_config, redact=self.redact_documents)
            if self._search is None:
                db_path = sqlite_path(self.store.db) if self.store is not None else None
                self._search = sqlite_search(db_path, live=self.live, config=self.search_config, redact=self.redact_documents)
            return self._search

    def search_sessions(self, request: Any, signal: AbortSignal | None = None) -> SessionSearchPage:
        """Ranked cross-session search (one hit per session, by its strongest event)."""
        return self._ready_searcher().search_sessions(request, signal)

    def search_events(self, request: Any, signal: AbortSignal | None = None) -> SessionEventSearchPage:
        """Ranked search within one session; ``session`` is present even without hits."""
        return self._ready_searcher().search_events(request, signal)

    def _ready_searcher(self) -> SessionSearch:
        if self.search_config.open_at == "never":
            raise search_disabled()
        return self._searcher()

    def search_generation(self, signal: AbortSignal | None = None) -> str:
        """The search scope's generation now (:meth:`readmodel.search.engine.SessionSearch.generation`)."""
        return self._ready_searcher().generation(signal)

    def __enter__(self) -> SessionQuery:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def status(self) -> dict[str, Any]:
        """The index health report: the ``sessionq status --json`` object
        (:func:`readmodel.store.status.collect_status`); ``SESSION_QUERY_INDEX_FAILED``
        when there is no index or it cannot be read."""
        if self.store is None:
            raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", "no index database is open")
        from readmodel.store.status import collect_status

        try:
            with snapshot(self.store.engine) as conn:
                return collect_status(conn, self.store.db)
        except SessionQueryError:
            raise
        except Exception as exc:
            raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", f"cannot read index {self.store.db}: {failure_reason(exc)}", exc) from exc

    # ------------------------------------------------------------------ sources

    def _live_session(self, session_id: str) -> LiveSnapshot | None:
        session = self.live.get(session_id) if self.live is not None else None
        return None if session is None else snapshot_live(session)

    @contextmanager
    def _transaction(self, signal: AbortSignal | None) -> Iterator[IndexReader]:
        """A read transaction; failing to start it is a listing failure."""
        assert self.store is not None
        with ExitStack() as stack:
            with _backend_call(signal, listing_failed):
                reader = stack.enter_context(self.store.read())
            yield reader

    def _records(self, signal: AbortSignal | None, sources: dict[tuple[str, ...], set[str]] | None = None) -> list[SessionRecord]:
        """§1.5: the listing, newest first (one observation); fills ``sources`` (names -> their sessions' ids)."""
        throw_if_aborted(signal)
        keyed: list[tuple[Header, Any, bytes]] | None = None
        headers: list[Header] = []
        live_sessions: list[Any] = []
        if self.store is not None:
            wants_keys = self.live is not None and bool(self.live.list())
            with self._transaction(signal) as txn:
                with _backend_call(signal, listing_failed):
                    if wants_keys:
                        keyed = txn.list_keyed_headers()
                    else:
                        headers = txn.list_headers()
                    for names in sources or ():
                        sources[names] = txn.session_ids_of_sources(names)  # type: ignore[index]
                throw_if_aborted(signal)
                live_sessions = list(self.live.list()) if self.live is not None else []
                if live_sessions and keyed is None:
                    with _backend_call(signal, listing_failed):
                        keyed = txn.list_keyed_headers()
        else:
            throw_if_aborted(signal)
            live_sessions = list(self.live.list()) if self.live is not None else []
        if keyed is not None:
            headers = [entry[0] for entry in keyed]
        records = [SessionRecord(header=header, live=False, persisted=True) for header in headers]
        if not live_sessions:
            return records
        return self._merge_live(records, keyed or [], live_sessions)

    @staticmethod
    def _merge_live(
        records: list[SessionRecord], keyed: list[tuple[Header, Any, bytes]], live_sessions: list[Any]
    ) -> list[SessionRecord]:
        """Overlay live sessions on the persisted listing (live header wins).

        A live id that is also persisted takes the persisted entry's place
        (its sort key is equal: compatible headers share ``createdAt`` and
        ``id``); live-only sessions are merged in by the listing order, after
        collation-equal persisted ones, as the reference's stable sort does.
        """
        position = {record.header.get("id"): index for index, record in enumerate(records)}
        extra: dict[Any, SessionRecord] = {}
        for session in live_sessions:
            header = session.header
            index = position.get(header.get("id"))
            if index is not None:
                assert_headers_compatible(header, records[index].header)
                records[index] = SessionRecord(header=clone_json(header), live=True, persisted=True)
            else:
                # Like the reference's Map: a repeated id keeps its first position.
                extra[header.get("id")] = SessionRecord(header=clone_json(header), live=True, persisted=False)
        if not extra:
            return records
        live_keyed = sorted(
            (
                (_listing_key(record.header.get("createdAt"), id_sort_key(str(record.header.get("id")))), n, record)
                for n, record in enumerate(extra.values())
            ),
            key=lambda item: (item[0], item[1]),
        )
        persisted_keyed = (
            (_listing_key(created_at, id_key), n, record)
            for n, (record, (_h, created_at, id_key)) in enumerate(zip(records, keyed))
        )
        merged = heapq.merge(persisted_keyed, live_keyed, key=lambda item: item[0])
        return [item[2] for item in merged]

    def _observe(
        self,
        session_id: str,
        signal: AbortSignal | None,
        inspect: Callable[[IndexReader, StoredSession], T],
    ) -> LiveSnapshot | _Persisted[T]:
        """§1.6: resolve one session, live first, then the index.

        ``inspect`` fetches what the read needs inside the same transaction as
        the lookup.  A live owner that appears meanwhile wins.
        """
        throw_if_aborted(signal)
        live = self._live_session(session_id)
        if live is not None:
            throw_if_aborted(signal)
            return live
        if self.store is None or type(session_id) is not str:
            # Only strings name stored sessions (a JS caller's 5 is just not found).
            raise session_not_found(_id_text(session_id))
        with self._transaction(signal) as txn:
            with _backend_call(signal, listing_failed):
                row = txn.lookup(session_id)
            throw_if_aborted(signal)
            if row is None:
                raise session_not_found(session_id)
            with _backend_call(signal, lambda error: inspect_failed(session_id, error)):
                row.require_readable()
                payload = inspect(txn, row)
            throw_if_aborted(signal)
        late = self._live_session(session_id)
        if late is not None:
            throw_if_aborted(signal)
            return late
        # The inspected and the listed header are one row here: always compatible.
        throw_if_aborted(signal)
        return _Persisted(row, payload)

    # ------------------------------------------------------------------ listings

    def list_sessions(self, signal: AbortSignal | None = None) -> list[SessionRecord]:
        """``listSessions``: every session, newest first, with availability flags.

        Errors: the abort reason, ``SESSION_QUERY_PERSISTENCE_FAILED``,
        ``SESSION_QUERY_SOURCE_CONFLICT``.
        """
        return self._records(signal)

    def list_session_summaries(self, request: Any = None) -> SessionSummaryPage:
        """``listSessionSummaries`` (sessionq extension, :mod:`readmodel.search.summaries`):
        a page of titles, workspaces, times and counts in listing order."""
        normalised = summary_request(request)
        return self._in_snapshot(lambda txn: summary_page(txn, normalised, self._live_list(), self._titles, self.redact_documents))

    def list_workspaces(self) -> list[WorkspaceSummary]:
        """``listWorkspaces`` (sessionq extension): sessions per ``cwd``, newest activity first."""
        return self._in_snapshot(lambda txn: workspaces(txn, self._live_list()))

    def session_summaries(self, session_ids: Sequence[str]) -> dict[str, SessionSummary]:
        """The summaries of the listed sessions among ``session_ids``, by id (unknown ids are absent)."""
        return self._in_snapshot(lambda txn: summaries_for(txn, list(session_ids), self._live_list(), self._titles, self.redact_documents))

    def _live_list(self) -> list[Any]:
        return list(self.live.list()) if self.live is not None else []

    def _in_snapshot(self, answer: Callable[[IndexReader | None], T]) -> T:
        if self.store is None:
            return answer(None)
        with self._transaction(None) as txn, _backend_call(None, listing_failed):
            return answer(txn)

    def filter_sessions(self, filters: Any, signal: AbortSignal | None = None) -> list[SessionRecord]:
        """``filterSessions``: the listing restricted by session filters (§3), copied and validated
        first (``SESSION_QUERY_INVALID_FILTER``); an empty list returns the whole corpus."""
        clauses = materialize_session_filters(filters)
        sources: dict[tuple[str, ...], set[str]] = {tuple(c["values"]): set() for c in clauses if c["kind"] == "source"}
        records = self._records(signal, sources)  # source clauses resolve in the listing's snapshot
        predicate = session_predicate(clauses, lambda names: sources.get(tuple(names), ()))
        return [record for record in records if predicate(record)]

    def trace_session(self, session_id: str, signal: AbortSignal | None = None) -> SessionLineageTrace:
        """``traceSession``: ancestors and descendants over one listing (§5.1).

        Deep traces must be encoded with :func:`readmodel.projection.lineage.encode_lineage_trace`.
        """
        records = self._records(signal)
        throw_if_aborted(signal)
        return trace_lineage(records, session_id)

    # ------------------------------------------------------------------ exact reads

    def read_session(self, session_id: str, *, redact: bool | None = None) -> SessionLogSnapshot:
        """``readSession``: the header and the complete raw log.

        A live log is replay-validated first (a plain
        :class:`readmodel.projection.replay.ReplayError` on failure); events are
        frozen-message snapshots.  ``redact`` (a sessionq extension; ``None``: the engine's policy) puts
        markers for secrets, streamed chunks included (:mod:`readmodel.projection.redaction`), in every raw read.
        """
        redact = self.redact_reads if redact is None else redact
        observed = self._observe(session_id, None, lambda txn, row: txn.raw_all(row.sid))
        if isinstance(observed, LiveSnapshot):
            validate_replay(session_id, observed.header, observed.events)
            events = [snapshot_event(event) for event in (redact_events(observed.events) if redact else observed.events)]
            return SessionLogSnapshot(session=observed.header, events=events)
        raw = redact_events(observed.payload) if redact else observed.payload
        events = [snapshot_event(event, copy=False, check=False) for event in raw]
        return SessionLogSnapshot(session=observed.row.header(), events=events)

    def list_events(self, session_id: str) -> list[SessionEventRecord]:
        """``listEvents``: one ``{sessionId, seq, type, time, surface}`` per event.

        A live log with an invalid surface raises ``SESSION_QUERY_INVALID_SURFACE``.
        """
        observed = self._observe(session_id, None, lambda txn, row: txn.event_records(row.sid))
        if isinstance(observed, LiveSnapshot):
            return build_event_records(session_id, observed.events)
        return [
            SessionEventRecord(session_id=session_id, seq=seq, type=etype, time=time, surface=SURFACE_NAMES[surface])
            for seq, etype, time, surface in observed.payload
        ]

    def filter_events(self, session_id: str, filters: Any) -> list[SessionEventSearchDocument]:
        """``filterEvents``: the session's semantic documents passing every clause.

        Order of failures (§2.5): filter shape, then the session, then the
        surface, then predicate building (e.g. whitespace-only text).
        """
        clauses = materialize_event_filters(filters)
        observed = self._observe(session_id, None, self._stored_documents)
        if isinstance(observed, LiveSnapshot):
            fold = fold_session_surface(observed.events)
            documents = build_documents(session_id, observed.events, fold.surfaces, self.redact_documents)
        else:
            documents = [
                SessionEventSearchDocument(
                    session_id=session_id, seq=seq, type=etype, time=time, surface=SURFACE_NAMES[surface], text=text
                )
                for seq, etype, time, surface, text in observed.payload
            ]
        predicate = event_predicate(clauses)
        return [document for document in documents if predicate(document)]

    @staticmethod
    def _stored_documents(txn: IndexReader, row: StoredSession) -> list[tuple[int, str, Any, int, str]]:
        return restored_documents(txn.documents(row.sid), partial(txn.raw_at, row.sid))

    def read_surface(self, session_id: str, *, redact: bool | None = None) -> SessionSurfaceSnapshot:
        """``readSurface``: the current model surface in model-history order.

        ``capturedThroughSeq`` is the last event's seq of the same observation
        (``None`` for an empty log).
        """
        redact = self.redact_reads if redact is None else redact

        def inspect(txn: IndexReader, row: StoredSession) -> list[Event]:
            nodes = txn.surface(row.sid)
            raw = txn.raw_at(row.sid, nodes)
            return redact_events([raw[seq] for seq in nodes]) if redact else [raw[seq] for seq in nodes]

        observed = self._observe(session_id, None, inspect)
        if isinstance(observed, LiveSnapshot):
            events = observed.events
            fold = fold_session_surface(events)
            nodes = [events[seq] for seq in fold.nodes]
            surface = [snapshot_event(event) for event in (redact_events(nodes) if redact else nodes)]
            captured = events[-1].get("seq") if events else None
            return SessionSurfaceSnapshot(session=observed.header, captured_through_seq=captured, events=surface)
        row = observed.row
        surface = [snapshot_event(event, copy=False, check=False) for event in observed.payload]
        captured = row.event_count - 1 if row.event_count else None
        return SessionSurfaceSnapshot(session=row.header(), captured_through_seq=captured, events=surface)

    def read_event_range(self, session_id: str, start_seq: Any, limit: Any, *, redact: bool | None = None) -> SessionEventRange:
        """``readEventRange`` (a sessionq extension, for paged views of long logs):
        events ``startSeq .. startSeq + limit - 1`` (fewer at the end of the log)
        with their surface, the replacement that shadowed each and the nodes each
        replacement removed, plus the session's event count.

        ``startSeq`` must be a non-negative integer and ``limit`` an integer from
        1 to :data:`EVENT_RANGE_MAX` (``SESSION_QUERY_INVALID_WINDOW``); then the
        session is resolved as every read does.
        """
        if not (is_integer(start_seq) and start_seq >= 0):
            raise SessionQueryError("SESSION_QUERY_INVALID_WINDOW", "startSeq must be a non-negative integer")
        if not (is_integer(limit) and 1 <= limit <= EVENT_RANGE_MAX):
            raise SessionQueryError("SESSION_QUERY_INVALID_WINDOW", f"limit must be an integer between 1 and {EVENT_RANGE_MAX}")
        first = int(start_seq)
        last = first + int(limit) - 1
        redact = self.redact_reads if redact is None else redact

        def inspect(txn: IndexReader, row: StoredSession) -> tuple[int, list[Event], list[tuple[int, int, int | None, list[int]]]]:
            end = min(last, row.event_count - 1)
            raw = read_window(partial(txn.raw_range, row.sid), first, end, row.event_count, redact)
            return row.event_count, raw, txn.event_range_records(row.sid, first, end)

        observed = self._observe(session_id, None, inspect)
        if isinstance(observed, LiveSnapshot):
            fold = fold_session_surface(observed.events)
            replaced_by = fold.replaced_by()
            replaces = dict(fold.replaced_event_seqs())
            events = read_window(list_reader(observed.events), first, min(last, len(observed.events) - 1), len(observed.events), redact)
            records = [
                SessionEventRangeRecord(
                    seq=event["seq"],
                    surface=fold.surfaces[index],
                    replaced_by=replaced_by.get(event["seq"]),
                    replaces=list(replaces[event["seq"]]) if event["seq"] in replaces else None,
                )
                for index, event in enumerate(events, start=first)
            ]
            return SessionEventRange(
                session=observed.header,
                event_count=len(observed.events),
                start_seq=first,
                events=[snapshot_event(event) for event in events],
                records=records,
            )
        count, raw, rows = observed.payload
        return SessionEventRange(
            session=observed.row.header(),
            event_count=count,
            start_seq=first,
            events=[snapshot_event(event, copy=False, check=False) for event in raw],
            records=[
                SessionEventRangeRecord(seq=seq, surface=SURFACE_NAMES[surface], replaced_by=by, replaces=removed or None)
                for seq, surface, by, removed in rows
            ],
        )

    def read_event(
        self, request: SessionEventReadRequest | Mapping[str, Any], signal: AbortSignal | None = None, *, redact: bool | None = None
    ) -> SessionEventWindow:
        """``readEvent``: one event with up to ``before``/``after`` neighbours (§6).

        Checks, in order: ``before``, ``after`` (``SESSION_QUERY_INVALID_WINDOW``),
        the session, the abort signal, the target (``SESSION_QUERY_EVENT_NOT_FOUND``).
        No surface validation.
        """
        req = read_request(request)
        maximum = self.config.read_window_max
        before = _window_bound("before", req.before, maximum)
        after = _window_bound("after", req.after, maximum)
        session_id, seq = req.session_id, req.seq
        redact = self.redact_reads if redact is None else redact

        def inspect(txn: IndexReader, row: StoredSession) -> tuple[int, list[Event]] | None:
            index = _persisted_index(seq, row.event_count)
            if index is None:
                return None
            start = max(0, index - before)
            return start, read_window(partial(txn.raw_range, row.sid), start, min(row.event_count - 1, index + after), row.event_count, redact)

        observed = self._observe(session_id, signal, inspect)
        throw_if_aborted(signal)
        if isinstance(observed, LiveSnapshot):
            index = target_index(observed.events, seq)
            if index is None:
                raise event_not_found(session_id, seq)
            start = max(0, index - before)
            end = min(len(observed.events) - 1, index + after)
            window = [snapshot_event(event) for event in read_window(list_reader(observed.events), start, end, len(observed.events), redact)]
            header = observed.header
        else:
            if observed.payload is None:
                raise event_not_found(session_id, seq)
            start, raw = observed.payload
            index = int(seq)
            end = start + len(raw) - 1
            window = [snapshot_event(event, copy=False, check=False) for event in raw]
            header = observed.row.header()
        return SessionEventWindow(
            session=header, target=window[index - start], events=window, start_seq=start, end_seq=end
        )

    def trace_event(
        self, request: SessionEventTraceRequest | Mapping[str, Any], signal: AbortSignal | None = None
    ) -> SessionEventTraceObservation:
        """``traceEvent``: replacement chain, replaced nodes and provenance of one event (§5.2)."""
        req = trace_request(request)
        session_id, seq = req.session_id, req.seq

        def inspect(txn: IndexReader, row: StoredSession) -> tuple[Any, ...] | None:
            index = _persisted_index(seq, row.event_count)
            event = None if index is None else txn.event_row(row.sid, index)
            if event is None:
                return None
            chain: list[int] = []
            current = event.replaced_by
            while current is not None:
                chain.append(current)
                current = txn.replaced_by(row.sid, current)
            return event, chain, txn.derived_seqs(row.sid, event.seq)

        observed = self._observe(session_id, signal, inspect)
        throw_if_aborted(signal)
        if isinstance(observed, LiveSnapshot):
            return trace_live_event(session_id, observed.header, observed.events, seq)
        if observed.payload is None:
            raise event_not_found(session_id, seq)
        event, chain, derived = observed.payload
        links = dict(zip([event.seq, *chain[:-1]], chain))
        target = SessionEventRecord(
            session_id=session_id, seq=event.seq, type=event.type, time=event.time, surface=SURFACE_NAMES[event.surface]
        )
        return assemble_trace(observed.row.header(), target, links, event.replaced_seqs(), event.source_seqs(), derived)

    # ------------------------------------------------------------------ titles

    def read_title_snapshots(
        self, session_ids: Sequence[str], signal: AbortSignal | None = None
    ) -> list[SessionTitleObservationResult]:
        """``readTitleSnapshots``: one settled result per unique id, in first-occurrence order (§1.7).

        Per-id failures become ``rejected`` entries carrying the raised value;
        cancellation rejects the whole call with the abort reason.
        """
        unique = list(dict.fromkeys(session_ids))
        throw_if_aborted(signal)
        results: dict[str, SessionTitleObservationResult] = {}
        unresolved: list[str] = []
        for session_id in unique:
            session = self.live.get(session_id) if self.live is not None else None
            if session is None:
                unresolved.append(session_id)
                continue
            results[session_id] = self._project_live_title(session_id, session, signal)
        if unresolved:
            self._resolve_persisted_titles(unresolved, results, signal)
        throw_if_aborted(signal)
        return redact_titles([results[session_id] for session_id in unique]) if self.redact_documents else [results[session_id] for session_id in unique]

    def _project_live_title(self, session_id: str, session: Any, signal: AbortSignal | None) -> SessionTitleObservationResult:
        """Project a live source (borrowing its header and events; the projection copies)."""
        throw_if_aborted(signal)
        try:
            value = title_observation(session.header, list(session.events))
        except Exception as error:
            throw_if_aborted(signal)
            return SessionTitleObservationResult(session_id=session_id, status="rejected", reason=error)
        throw_if_aborted(signal)
        return SessionTitleObservationResult(session_id=session_id, status="fulfilled", value=value)

    def _resolve_persisted_titles(
        self, ids: list[str], results: dict[str, SessionTitleObservationResult], signal: AbortSignal | None
    ) -> None:
        if self.store is None:
            for session_id in ids:
                results[session_id] = _rejected(session_id, session_not_found(_id_text(session_id)))
            return
        try:
            with self._transaction(signal) as txn:
                try:
                    with _backend_call(signal, listing_failed):
                        listed = txn.lookup_many([i for i in ids if type(i) is str])
                    throw_if_aborted(signal)
                except SessionQueryError as error:
                    if is_aborted(signal):
                        raise
                    for session_id in ids:
                        results[session_id] = _rejected(session_id, error)
                    return
                for session_id in ids:
                    throw_if_aborted(signal)
                    results[session_id] = self._resolve_persisted_title(txn, session_id, listed.get(session_id), signal)
        except SessionQueryError as error:
            # The transaction could not even start: a listing failure for every id.
            if is_aborted(signal):
                raise
            for session_id in ids:
                results.setdefault(session_id, _rejected(session_id, error))

    def _resolve_persisted_title(
        self, txn: IndexReader, session_id: str, row: StoredSession | None, signal: AbortSignal | None
    ) -> SessionTitleObservationResult:
        """One worker step of §1.7 for a non-live id."""
        if row is None:
            session = self.live.get(session_id) if self.live is not None else None
            if session is not None:
                return self._project_live_title(session_id, session, signal)
            return _rejected(session_id, session_not_found(_id_text(session_id)))
        try:
            throw_if_aborted(signal)
            with _backend_call(signal, lambda error: inspect_failed(session_id, error)):
                row.require_readable()
                title_event = txn.raw_at(row.sid, [row.title_seq])[row.title_seq] if row.title_seq is not None else None
            throw_if_aborted(signal)
            session = self.live.get(session_id) if self.live is not None else None
            if session is not None:
                return self._project_live_title(session_id, session, signal)
            value = SessionTitleObservation(session=row.header())
            if title_event is not None:
                value.title = title_snapshot(title_event)
        except Exception as error:
            if is_aborted(signal):
                assert signal is not None and signal.reason is not None
                raise signal.reason
            return _rejected(session_id, error)
        return SessionTitleObservationResult(session_id=session_id, status="fulfilled", value=value)

    def read_title_snapshot(self, session_id: str, signal: AbortSignal | None = None) -> SessionTitleObservation:
        """``readTitleSnapshot``: ``{session, title?}`` of one session; a rejection
        raises its reason unchanged (a ``SessionQueryError`` or e.g. ``TypeError``)."""
        (result,) = self.read_title_snapshots([session_id], signal)
        if result.status == "rejected":
            raise result.reason
        assert result.value is not UNSET
        return result.value

    def read_title(self, session_id: str, signal: AbortSignal | None = None) -> SessionTitleSnapshot | None:
        """``readTitle``: the session's title snapshot, or ``None`` when it has none."""
        title = self.read_title_snapshot(session_id, signal).title
        return None if title is UNSET else title


def _rejected(session_id: str, error: BaseException) -> SessionTitleObservationResult:
    return SessionTitleObservationResult(session_id=session_id, status="rejected", reason=error)
