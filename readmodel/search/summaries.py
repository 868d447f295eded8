"""Session summaries and workspaces: the browsing listing (a sessionq extension).

``listSessionSummaries`` pages the session listing (``createdAt`` desc, then
id, as ``listSessions`` orders) with what a person scans for: title,
workspace, created, last activity and event count.  Filters are a workspace
(``cwd``, exact; ``None`` means sessions without one) and inclusive
``createdAt`` bounds.  Pages are cut by offset under a signed cursor bound to
the index, the request and the generation (stale when the corpus moved),
exactly like search cursors.  ``listWorkspaces`` counts sessions per
workspace, newest activity first.  Last activity is the index's maintained
``sessions.last_activity`` (:mod:`readmodel.store.activity`).

Live sessions are merged as ``listSessions`` merges them: a live session wins
over its persisted row, live-only ones take their place in listing order.
A page reads only its own rows (typed columns and one title event each); no
header is decoded.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from readmodel.core.errors import SessionQueryError
from readmodel.core.jsvalues import is_integer, is_number
from readmodel.core.vocabulary import Event, Struct
from readmodel.projection.secrets import redact as redact_secrets
from readmodel.projection.titles import latest_title_event, title_snapshot
from readmodel.search.cursors import CursorCodec
from readmodel.store.interface import IndexReader, SummaryRow, SummaryWhere
from readmodel.store.schema import id_sort_key

SUMMARY_LIMIT_MAX: Final = 500
SUMMARY_LIMIT_DEFAULT: Final = 100
_SCOPE: Final = "summaries"


class WorkspaceSummary(Struct):
    cwd: str | None
    session_count: int
    last_activity: Any


class SessionSummary(Struct, omit_defaults=False):
    id: str
    title: str | None
    cwd: str | None
    created_at: Any
    last_activity: Any
    event_count: int
    parent_session: str | None
    status: str


class SessionSummaryPage(Struct, kw_only=True):
    items: list[SessionSummary]
    next_cursor: str | UnsetType = UNSET


class SummaryRequest(msgspec.Struct, frozen=True):
    """A validated ``listSessionSummaries`` request."""

    where: SummaryWhere
    limit: int
    cursor: str | None

    def fingerprint(self) -> str:
        """A digest of everything but the cursor (a cursor resumes only its own request)."""
        w = self.where
        identity = [_SCOPE, w.cwd_given, w.cwd, w.created_from, w.created_to, self.limit]
        return hashlib.sha256(msgspec.json.encode(identity)).hexdigest()[:32]


def _invalid(code: str, message: str) -> SessionQueryError:
    return SessionQueryError(code, message)  # type: ignore[arg-type]


def _bound(params: Mapping[str, Any], name: str) -> float | None:
    value = params.get(name)
    if value is None:
        return None
    if not is_number(value) or not math.isfinite(value):
        raise _invalid("SESSION_QUERY_INVALID_FILTER", f"{name} must be a finite number of epoch milliseconds")
    return float(value)


def summary_request(params: Any) -> SummaryRequest:
    """Validate ``listSessionSummaries`` params (``SESSION_QUERY_INVALID_*`` on a bad one)."""
    if params is None:
        params = {}
    if type(params) is not dict:
        raise _invalid("SESSION_QUERY_INVALID_FILTER", "listSessionSummaries params must be an object")
    cwd = params.get("cwd", UNSET)
    if cwd is not UNSET and cwd is not None and type(cwd) is not str:
        raise _invalid("SESSION_QUERY_INVALID_FILTER", "cwd must be a string or null")
    where = SummaryWhere(cwd is not UNSET, None if cwd is UNSET else cwd, _bound(params, "createdFrom"), _bound(params, "createdTo"))
    limit = params.get("limit", SUMMARY_LIMIT_DEFAULT)
    if limit is None:
        limit = SUMMARY_LIMIT_DEFAULT
    if not is_integer(limit) or not 1 <= limit <= SUMMARY_LIMIT_MAX:
        raise _invalid("SESSION_QUERY_INVALID_LIMIT", f"limit must be an integer in 1..{SUMMARY_LIMIT_MAX}")
    cursor = params.get("cursor")
    if cursor is not None and type(cursor) is not str:
        raise _invalid("SESSION_QUERY_INVALID_CURSOR", "session-search cursor is invalid")
    return SummaryRequest(where, int(limit), cursor)


# --------------------------------------------------------------------------- live sessions


def _last_time(events: Sequence[Event]) -> Any:
    return events[-1].get("time") if events else None


def _title_text(event: Event | None, redact: bool) -> str | None:
    """The title text of a ``session/title`` event; ``None`` when absent or malformed.

    With ``redact`` detected secrets become markers, as in the index's documents.
    """
    if event is None:
        return None
    try:
        title = title_snapshot(event).title
    except (TypeError, AttributeError):
        return None
    if type(title) is not str:
        return None
    return redact_secrets(title) if redact else title


def _text_or_none(value: Any) -> str | None:
    return value if type(value) is str else None


def _live_summary(session: Any, redact: bool) -> SessionSummary:
    header = session.header
    events = list(session.events)
    created = header.get("createdAt")
    return SessionSummary(
        id=str(header.get("id")),
        title=_title_text(latest_title_event(events), redact),
        cwd=_text_or_none(header.get("cwd")),
        created_at=created if is_number(created) else None,
        last_activity=_last_time(events),
        event_count=len(events),
        parent_session=_text_or_none(header.get("parentSession")),
        status="ok",
    )


def _matches(summary: SessionSummary, where: SummaryWhere) -> bool:
    if where.cwd_given and summary.cwd != where.cwd:
        return False
    created = summary.created_at
    if where.created_from is not None and (created is None or created < where.created_from):
        return False
    return not (where.created_to is not None and (created is None or created > where.created_to))


def _listing_key(created_at: Any, id_key: bytes) -> tuple[float, bytes]:
    # NULL createdAt sorts last, as SQLite's ``created_at DESC`` puts it.
    return (-float(created_at) if created_at is not None else math.inf, id_key)


# --------------------------------------------------------------------------- pages


class TitleCache:
    """Titles already read, so a page or a search that shows the same sessions again does not
    decompress their title events again (a title costs one block decompression).

    Keyed by the index identity, the session's sid, its generation and its title event's seq:
    any re-indexing of the session gives it a new generation, so a cached title is never stale.
    Bounded (least recently used out); thread-safe.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._titles: OrderedDict[tuple[Any, ...], str | None] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> tuple[bool, str | None]:
        """``(found, title)``."""
        with self._lock:
            if key not in self._titles:
                return False, None
            self._titles.move_to_end(key)
            return True, self._titles[key]

    def put(self, key: tuple[Any, ...], title: str | None) -> None:
        with self._lock:
            self._titles[key] = title
            self._titles.move_to_end(key)
            while len(self._titles) > self.capacity:
                self._titles.popitem(last=False)


class _Titles:
    """The titles of one read snapshot: from the cache, else read from the index (and cached)."""

    def __init__(self, reader: IndexReader, cache: TitleCache | None, redact: bool = False) -> None:
        self.reader = reader
        self.cache = cache
        self.redact = redact
        self.identity = reader.generation()[0] if cache is not None else None

    def of(self, row: SummaryRow) -> str | None:
        if row.title_seq is None or row.status != "ok":
            return None
        if self.cache is None:
            return self._read(row)
        key = (self.identity, row.sid, row.generation, row.title_seq, self.redact)
        found, title = self.cache.get(key)
        if not found:
            title = self._read(row)
            self.cache.put(key, title)
        return title

    def _read(self, row: SummaryRow) -> str | None:
        assert row.title_seq is not None
        return _title_text(self.reader.raw_at(row.sid, [row.title_seq]).get(row.title_seq), self.redact)


def _stored_summary(titles: _Titles, row: SummaryRow) -> SessionSummary:
    return SessionSummary(
        id=row.id,
        title=titles.of(row),
        cwd=row.cwd,
        created_at=row.created_at,
        last_activity=row.last_activity,
        event_count=row.event_count,
        parent_session=row.parent_session,
        status="ok" if row.status == "ok" else (row.error_code or row.status),
    )


def _live_generation(live: Sequence[Any]) -> str:
    digest = hashlib.sha256()
    for session in sorted(live, key=lambda s: str(s.header.get("id"))):
        digest.update(msgspec.json.encode([str(session.header.get("id")), len(session.events)]))
    return digest.hexdigest()[:16]


def _page_ids(reader: IndexReader, request: SummaryRequest, live: list[SessionSummary], offset: int) -> list[str | SessionSummary]:
    """The page's entries (persisted ids or live summaries), ``limit + 1`` at most."""
    live_by_id = {summary.id: summary for summary in live}
    # A list, not a generator: the pops must happen before ``extra`` is built.
    keyed = [
        (_listing_key(created, id_key), 0, live_by_id.pop(sid, sid))
        for created, id_key, sid in reader.summary_keys(request.where)
    ]
    extra = sorted(
        (_listing_key(s.created_at, id_sort_key(s.id)), 1, s) for s in live_by_id.values() if _matches(s, request.where)
    )
    merged = heapq.merge(keyed, extra, key=lambda item: (item[0], item[1]))
    entries = [item[2] for item in merged]
    return entries[offset : offset + request.limit + 1]


def summary_page(
    reader: IndexReader | None, request: SummaryRequest, live_sessions: Iterable[Any], cache: TitleCache | None = None, redact: bool = False
) -> SessionSummaryPage:
    """One page of ``listSessionSummaries`` inside one read snapshot (``reader=None``: live only);
    titles come from ``cache`` when it holds them; with ``redact`` titles hold secret markers
    instead of detected secrets."""
    live_list = list(live_sessions)
    live = [_live_summary(session, redact) for session in live_list]
    live_ids = {summary.id for summary in live}
    if reader is None:
        codec = CursorCodec("live", b"sessionq-live-only-cursor-key")
        generation = _live_generation(live_list)
    else:
        codec = CursorCodec(*reader.cursor_key())
        generation = f"{reader.generation()[1]}:{_live_generation(live_list)}"
    fingerprint = request.fingerprint()
    offset = 0 if request.cursor is None else codec.decode(request.cursor, _SCOPE, fingerprint, generation)
    if reader is None:
        entries: list[str | SessionSummary] = sorted(
            (s for s in live if _matches(s, request.where)), key=lambda s: _listing_key(s.created_at, id_sort_key(s.id))
        )[offset : offset + request.limit + 1]
    elif not live:
        rows = reader.summary_page(request.where, request.limit + 1, offset)
        titles = _Titles(reader, cache, redact)
        entries = [_stored_summary(titles, row) for row in rows]
    else:
        entries = _page_ids(reader, request, live, offset)
    more = len(entries) > request.limit
    entries = entries[: request.limit]
    wanted = [entry for entry in entries if type(entry) is str and entry not in live_ids]
    stored = reader.summary_rows(wanted) if reader is not None and wanted else {}
    if stored:
        titles = _Titles(reader, cache, redact)  # type: ignore[arg-type]
    items = [entry if isinstance(entry, SessionSummary) else _stored_summary(titles, stored[entry]) for entry in entries]  # type: ignore[arg-type]
    page = SessionSummaryPage(items=items)
    if more:
        page.next_cursor = codec.encode(_SCOPE, fingerprint, generation, offset + len(items))
    return page


def _newest_first(item: WorkspaceSummary) -> tuple[bool, float, str]:
    activity = item.last_activity
    return (not is_number(activity), -float(activity) if is_number(activity) else 0.0, item.cwd or "")


def workspaces(reader: IndexReader | None, live_sessions: Iterable[Any]) -> list[WorkspaceSummary]:
    """``listWorkspaces``: sessions per workspace, newest activity first (a live session wins).

    The persisted sessions are counted by the index (one grouped scan of the
    maintained ``last_activity`` column); the live ones are added here.
    """
    live = {summary.id: summary for summary in (_live_summary(session, False) for session in live_sessions)}
    counts: dict[str | None, list[Any]] = {}
    for cwd, count, last in [] if reader is None else reader.workspace_activity(sorted(live)):
        counts[cwd] = [count, last]
    for summary in live.values():
        _count(counts, summary.cwd, summary.last_activity)
    found = [WorkspaceSummary(cwd=cwd, session_count=n, last_activity=last) for cwd, (n, last) in counts.items()]
    return sorted(found, key=_newest_first)


def _count(counts: dict[str | None, list[Any]], cwd: str | None, last: Any) -> None:
    entry = counts.setdefault(cwd, [0, None])
    entry[0] += 1
    if is_number(last) and (entry[1] is None or last > entry[1]):
        entry[1] = last


def summaries_for(
    reader: IndexReader | None, session_ids: Sequence[str], live_sessions: Iterable[Any], cache: TitleCache | None = None, redact: bool = False
) -> dict[str, SessionSummary]:
    """The summaries of the sessions among ``session_ids``, by id (a live session wins; titles
    from ``cache`` when it holds them; ``redact`` as in :func:`summary_page`)."""
    wanted = set(session_ids)
    live = {s.id: s for s in (_live_summary(session, redact) for session in live_sessions) if s.id in wanted}
    rows = reader.summary_rows([i for i in session_ids if i not in live]) if reader is not None else {}
    titles = _Titles(reader, cache, redact) if rows else None  # type: ignore[arg-type]
    found = {session_id: _stored_summary(titles, row) for session_id, row in rows.items()}  # type: ignore[arg-type]
    found.update(live)
    return found
