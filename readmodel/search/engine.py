"""The search engine: backend-neutral paging over a :class:`SearchBackend`.

The semantics follow the reference's SQLite FTS5 provider (search-tools-export-spec
§2–§5, §7):

* the query is trimmed and whitespace-collapsed (JS whitespace set), then becomes
  exactly one FTS5 phrase bound as a parameter, so FTS5 syntax in a query is data;
* a document's strength is the number of highlighted-match spans FTS5's own
  ``highlight()`` produces, then its length in code points, then newer time and
  higher seq; cross-session search keeps each session's strongest event and
  orders sessions by it (ties by session id in UTF-8 byte order);
* metadata filters compile to parameterised predicates applied before ranking,
  within the reference's predicate and binding budgets;
* snippets are bounded plain-text excerpts positioned by the first highlight;
* cursors are opaque, bound to the index, the normalised request and the
  generation of the scope, and signed with the index's random cursor secret
  (never in a cursor), so a forged or foreign cursor is invalid and a cursor
  over a changed corpus is stale.

Ranking and the live overlay are the backend's (:mod:`readmodel.search.sqlite`).

Extension (search modes): a request's optional ``match`` selects ``"phrase"``
(the default, everything above), ``"words"`` or ``"substring"``
(:mod:`readmodel.search.modes`; ``docs/search-modes.md``).  The mode is part of
the normalised request, so of the cursor's fingerprint: a cursor of one mode is
invalid in another.

Deliberate difference: a session whose log is corrupt or unsupported never
enters the search corpus (the reference fails every search while one persisted
log cannot be read); searching within such a session raises its stored error.

Extension (bounded work): a query longer than
:data:`readmodel.search.requests.MAX_QUERY_CHARS` code points once normalised,
or with more than :data:`readmodel.search.requests.MAX_QUERY_TOKENS` tokens, is
``SESSION_QUERY_INVALID_QUERY`` (checked after the reference's own rules).  A
token longer than FTS5's 32,768-byte limit is answered as FTS5 matches it: both
sides are cut to their first 32,768 bytes.
"""

from __future__ import annotations

from typing import Any

import msgspec

from readmodel.core.errors import SessionQueryError
from readmodel.search.backend import Row, SearchBackend
from readmodel.search.config import SearchConfig
from readmodel.search.cursors import CursorCodec, request_fingerprint
from readmodel.search.requests import normalize_events_request, normalize_sessions_request
from readmodel.search.snippets import make_snippet
from readmodel.search.vocabulary import SessionEventSearchHit, SessionEventSearchPage, SessionSearchHit, SessionSearchPage


class SessionSearch:
    """Cross-session and within-session search over one backend.

    Thread-safe as its backend is (the SQLite backend serialises calls).
    """

    def __init__(self, backend: SearchBackend, config: SearchConfig | None = None) -> None:
        self.backend = backend
        self.config = config or SearchConfig()

    def open(self) -> None:
        """Open the backend now (``openAt: startup``) so failures surface early."""
        self.backend.open()

    def close(self) -> None:
        self.backend.close()

    # -- public operations ------------------------------------------------------

    def search_sessions(self, request: Any, signal: Any = None) -> SessionSearchPage:
        """Cross-session search.  ``signal`` (an abort signal) cancels it, even mid-statement."""
        self._check_enabled()
        normalized = normalize_sessions_request(request, self.config)
        with self.backend.snapshot(signal) as snap:
            generation = snap.generation()
            fingerprint = request_fingerprint(normalized)
            offset = _offset(snap.codec, normalized.cursor, "sessions", fingerprint, generation)
            rows = snap.sessions_page(normalized, offset, ("sessions", fingerprint, generation))
        items = [self._session_hit(row) for row in rows[: normalized.limit]]
        if len(rows) > normalized.limit:
            return SessionSearchPage(items=items, next_cursor=snap.codec.encode("sessions", fingerprint, generation, offset + normalized.limit))
        return SessionSearchPage(items=items)

    def search_events(self, request: Any, signal: Any = None) -> SessionEventSearchPage:
        """Within-session search.  ``signal`` (an abort signal) cancels it, even mid-statement."""
        self._check_enabled()
        normalized = normalize_events_request(request, self.config)
        with self.backend.snapshot(signal) as snap:
            header, generation, handle = snap.target(normalized.session_id)
            fingerprint = request_fingerprint(normalized)
            offset = _offset(snap.codec, normalized.cursor, "events", fingerprint, generation)
            rows = snap.events_page(normalized, handle, offset, ("events", fingerprint, generation))
        items = [self._event_hit(row) for row in rows[: normalized.limit]]
        if len(rows) > normalized.limit:
            cursor = snap.codec.encode("events", fingerprint, generation, offset + normalized.limit)
            return SessionEventSearchPage(session=header, items=items, next_cursor=cursor)
        return SessionEventSearchPage(session=header, items=items)

    def generation(self, signal: Any = None) -> str:
        """The generation of the whole search scope now (stored and live sessions): equal
        generations give equal answers to equal requests, so a caller may keep a page per
        generation.  Extension (``sessionq browse`` keeps its first pages with it)."""
        self._check_enabled()
        with self.backend.snapshot(signal) as snap:
            return snap.generation()

    # -- internals ----------------------------------------------------------------

    def _check_enabled(self) -> None:
        if self.config.open_at == "never":
            raise search_disabled()

    def _event_hit(self, row: Row) -> SessionEventSearchHit:
        return SessionEventSearchHit(
            session_id=row.session_id,
            seq=row.seq,
            type=row.type,
            time=row.time,
            surface=row.surface,
            snippet=make_snippet(row.marked_text, self.config.snippet_chars),
        )

    def _session_hit(self, row: Row) -> SessionSearchHit:
        return SessionSearchHit(
            header=msgspec.json.decode(row.header_json),
            live=row.live == 1,
            persisted=row.persisted == 1,
            best_match=self._event_hit(row),
        )


def _offset(codec: CursorCodec, cursor: str | None, scope: str, fingerprint: str, generation: str) -> int:
    return 0 if cursor is None else codec.decode(cursor, scope, fingerprint, generation)


def search_disabled() -> SessionQueryError:
    return SessionQueryError("SESSION_QUERY_SEARCH_DISABLED", "session-search is disabled by configuration (openAt: never)")
