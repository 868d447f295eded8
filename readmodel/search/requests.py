"""Normalising search requests: the query, limits, cursors and filters of one call.

The query is trimmed and whitespace-collapsed with the JavaScript whitespace set,
then becomes exactly one FTS5 phrase bound as a parameter, so FTS5 syntax in a
query is always data.

Extension (search modes): an optional ``match`` field selects how the query
matches — ``"phrase"`` (the default when absent or ``null``: the reference's
behaviour), ``"words"`` or ``"substring"`` (:mod:`readmodel.search.modes`).
Any other value is ``SESSION_QUERY_INVALID_QUERY``, checked after every
reference rule so a reference request fails exactly as in the reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final


from readmodel.core.errors import SessionQueryError
from readmodel.projection.filters import materialize_event_metadata_filters, materialize_session_filters
from readmodel.core.jsvalues import (
    JS_WHITESPACE,
    is_safe_integer,
    js_collapse_whitespace,
    js_trim,
)

from msgspec import UNSET
from readmodel.search.config import MAX_PAGE_LIMIT, SearchConfig
from readmodel.search.snippets import sanitize_text
from readmodel.search.substring import check_substring_query

MAX_QUERY_CHARS: Final = 16_384
"""Longest normalised query, in code points (a sessionq extension: the reference has no limit).

Far beyond anything typed or pasted as a search; it bounds the work done
before the query is tokenised (normalisation, fingerprint, tokenisation)."""
MAX_QUERY_TOKENS: Final = 128
"""Most tokens (as FTS5's unicode61 counts them) a query may have (a sessionq extension).

FTS5 walks a phrase with one doclist iterator per token over every document
holding all its distinct tokens, so a phrase of common words costs about
tokens × documents: over 1.1 million events (the benchmark's 160 MB root),
1,000 repeats of "the" took 5 s, 128 repeats 0.64 s even when the probe
(:data:`readmodel.search.sqlite.PROBE_TOKENS`) cannot rule the phrase out."""


MATCH_MODES: Final = ("phrase", "words", "substring")
"""The values of a request's ``match`` field (a sessionq extension); the first is the default."""


@dataclass(frozen=True)
class SessionsRequest:
    query: str
    session_filters: list[dict[str, Any]]
    event_filters: list[dict[str, Any]]
    limit: int
    cursor: str | None
    match: str = "phrase"
    prefix: bool = False
    """``words`` mode: the last token also matches as a prefix (the raw query did not end in whitespace)."""


@dataclass(frozen=True)
class EventsRequest:
    session_id: str
    query: str
    filters: list[dict[str, Any]]
    limit: int
    cursor: str | None
    match: str = "phrase"
    prefix: bool = False


def _field(request: Any, name: str, attribute: str) -> Any:
    """A request field from a mapping (camelCase) or a struct (snake_case); ``None`` when absent."""
    if isinstance(request, Mapping):
        return request.get(name)
    value = getattr(request, attribute, None)
    return None if value is UNSET else value


def normalize_query(query: Any) -> str:
    """Trim, collapse whitespace runs, refuse empty, NUL or over-long text, neutralise the highlight markers.

    The length rule (:data:`MAX_QUERY_CHARS`) is checked last, so every query
    the reference refuses is refused with the reference's message.  Lone
    surrogates (a Python caller's, or undecodable bytes of a CLI argument)
    become U+FFFD, as in documents and as the reference's UTF-8 binding does.
    """
    if type(query) is not str:
        raise SessionQueryError("SESSION_QUERY_INVALID_QUERY", "session-search query must be text")
    text = js_collapse_whitespace(js_trim(query))
    if not text:
        raise SessionQueryError("SESSION_QUERY_INVALID_QUERY", "session-search query must contain non-whitespace text")
    if "\x00" in text:
        raise SessionQueryError("SESSION_QUERY_INVALID_QUERY", "session-search query must not contain NUL")
    if len(text) > MAX_QUERY_CHARS:
        raise SessionQueryError("SESSION_QUERY_INVALID_QUERY", f"session-search query must be at most {MAX_QUERY_CHARS} characters")
    return sanitize_text(text)


def normalize_match(request: Any, query: str) -> tuple[str, bool]:
    """``(mode, prefix)`` of a request: its ``match`` field (absent or ``None``: ``"phrase"``)
    and, in ``words`` mode, whether the last token is a prefix (the raw query
    does not end in JS whitespace).  Refuses unknown modes and, in
    ``substring`` mode, a lone ASCII letter or digit."""
    mode = _field(request, "match", "match")
    if mode is None:
        return "phrase", False
    if type(mode) is not str or mode not in MATCH_MODES:
        raise SessionQueryError("SESSION_QUERY_INVALID_QUERY", 'session-search match must be "phrase", "words" or "substring"')
    if mode == "substring":
        check_substring_query(query)
    raw = _field(request, "query", "query")
    return mode, mode == "words" and not raw.endswith(tuple(JS_WHITESPACE))


def normalize_limit(limit: Any, config: SearchConfig) -> int:
    if limit is None:
        return config.default_limit
    maximum = min(config.max_limit, MAX_PAGE_LIMIT)
    if not (is_safe_integer(limit) and 1 <= limit <= maximum):
        raise SessionQueryError("SESSION_QUERY_INVALID_LIMIT", f"session-search limit must be an integer between 1 and {maximum}")
    return int(limit)


def _normalize_cursor(cursor: Any) -> str | None:
    if cursor is None:
        return None
    if type(cursor) is not str:
        raise SessionQueryError("SESSION_QUERY_INVALID_CURSOR", "session-search cursor must be text")
    return cursor


def normalize_sessions_request(request: Any, config: SearchConfig) -> SessionsRequest:
    """Validate and copy a cross-session request in the reference's check order."""
    session_filters = _field(request, "sessionFilters", "session_filters")
    event_filters = _field(request, "eventFilters", "event_filters")
    materialized_sessions = materialize_session_filters([] if session_filters is None else session_filters)
    materialized_events = materialize_event_metadata_filters([] if event_filters is None else event_filters)
    cursor = _normalize_cursor(_field(request, "cursor", "cursor"))
    query = normalize_query(_field(request, "query", "query"))
    limit = normalize_limit(_field(request, "limit", "limit"), config)
    mode, prefix = normalize_match(request, query)
    return SessionsRequest(query, materialized_sessions, materialized_events, limit, cursor, mode, prefix)


def normalize_events_request(request: Any, config: SearchConfig) -> EventsRequest:
    """Validate and copy a within-session request in the reference's check order."""
    session_id = _field(request, "sessionId", "session_id")
    if type(session_id) is not str:
        raise SessionQueryError("SESSION_QUERY_INVALID_FILTER", "session-search session id must be text")
    filters = _field(request, "filters", "filters")
    materialized = materialize_event_metadata_filters([] if filters is None else filters)
    cursor = _normalize_cursor(_field(request, "cursor", "cursor"))
    query = normalize_query(_field(request, "query", "query"))
    limit = normalize_limit(_field(request, "limit", "limit"), config)
    mode, prefix = normalize_match(request, query)
    return EventsRequest(session_id, query, materialized, limit, cursor, mode, prefix)


def match_expression(query: str) -> str:
    """The whole normalised query as one FTS5 phrase string (quotes doubled)."""
    return '"' + query.replace('"', '""') + '"'


def bounded_terms(terms: list[bytes]) -> list[bytes]:
    """The query's tokens, refused beyond :data:`MAX_QUERY_TOKENS`."""
    if len(terms) > MAX_QUERY_TOKENS:
        raise SessionQueryError("SESSION_QUERY_INVALID_QUERY", f"session-search query must have at most {MAX_QUERY_TOKENS} tokens")
    return terms
