"""Normalising search requests: the query, limits, cursors and filters of one call.

The query is trimmed and whitespace-collapsed with the JavaScript whitespace set,
then becomes exactly one FTS5 phrase bound as a parameter, so FTS5 syntax in a
query is always data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


from readmodel.core.errors import SessionQueryError
from readmodel.projection.filters import materialize_event_metadata_filters, materialize_session_filters
from readmodel.core.jsvalues import (
    is_safe_integer,
    js_collapse_whitespace,
    js_trim,
)

from msgspec import UNSET
from readmodel.search.config import MAX_PAGE_LIMIT, SearchConfig
from readmodel.search.snippets import MARKS_NEUTRALISED


@dataclass(frozen=True)
class SessionsRequest:
    query: str
    session_filters: list[dict[str, Any]]
    event_filters: list[dict[str, Any]]
    limit: int
    cursor: str | None


@dataclass(frozen=True)
class EventsRequest:
    session_id: str
    query: str
    filters: list[dict[str, Any]]
    limit: int
    cursor: str | None


def _field(request: Any, name: str, attribute: str) -> Any:
    """A request field from a mapping (camelCase) or a struct (snake_case); ``None`` when absent."""
    if isinstance(request, Mapping):
        return request.get(name)
    value = getattr(request, attribute, None)
    return None if value is UNSET else value


def normalize_query(query: Any) -> str:
    """Trim, collapse whitespace runs, refuse empty or NUL, neutralise the highlight markers."""
    if type(query) is not str:
        raise SessionQueryError("SESSION_QUERY_INVALID_QUERY", "session-search query must be text")
    text = js_collapse_whitespace(js_trim(query))
    if not text:
        raise SessionQueryError("SESSION_QUERY_INVALID_QUERY", "session-search query must contain non-whitespace text")
    if "\x00" in text:
        raise SessionQueryError("SESSION_QUERY_INVALID_QUERY", "session-search query must not contain NUL")
    return text.translate(MARKS_NEUTRALISED)


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
    return SessionsRequest(query, materialized_sessions, materialized_events, limit, cursor)


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
    return EventsRequest(session_id, query, materialized, limit, cursor)


def match_expression(query: str) -> str:
    """The whole normalised query as one FTS5 phrase string (quotes doubled)."""
    return '"' + query.replace('"', '""') + '"'
