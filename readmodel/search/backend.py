"""The search backend seam: what a backend does inside one read snapshot.

:class:`readmodel.search.engine.SessionSearch` owns everything backend-neutral
(normalisation, cursors, paging, hits and snippets); a backend answers the
few questions that need its database, through :class:`SearchSnapshot`.
:mod:`readmodel.search.sqlite` is the SQLite FTS5 backend; another backend is a
module implementing these protocols.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from readmodel.core.vocabulary import Header, Surface
from readmodel.search.cursors import CursorCodec
from readmodel.search.requests import EventsRequest, SessionsRequest


@dataclass
class Row:
    """One ranked result row; ``marked_text`` is its document with the matches marked."""

    session_id: str
    header_json: Any  # the session's sid while ranking (NULL for live rows); the header JSON once fetched
    live: int
    persisted: int
    docid: int  # negative: -rowid of a live document
    seq: int
    type: str
    time: Any
    surface: Surface
    marked_text: str = ""


class SearchSnapshot(Protocol):
    """One consistent read of the backend (live overlay synced, one generation)."""

    codec: CursorCodec
    """Signs and checks this index's cursors."""

    def generation(self) -> str:
        """The generation of the cross-session scope (index and live overlay)."""

    def target(self, session_id: str) -> tuple[Header, str, Any]:
        """``(header, generation, handle)`` of one session for a within-session search.

        Raises ``SESSION_QUERY_SESSION_NOT_FOUND``, or the session's stored error."""

    def sessions_page(self, request: SessionsRequest, offset: int, cache_key: tuple[str, ...]) -> list[Row]:
        """Ranked rows ``offset .. offset + request.limit`` (one more than a page, to tell if more follow),
        each session's strongest event, with headers and marked text filled in."""

    def events_page(self, request: EventsRequest, handle: Any, offset: int, cache_key: tuple[str, ...]) -> list[Row]:
        """Ranked rows of one session (``handle`` from :meth:`target`), as :meth:`sessions_page`."""


class SearchBackend(Protocol):
    """A search index opened for reading."""

    def open(self) -> None:
        """Connect now (``openAt: startup``) so that failures surface early."""

    def close(self) -> None:
        """Release the connection."""

    def snapshot(self, signal: Any) -> AbstractContextManager[SearchSnapshot]:
        """One snapshot, serialised with other calls and cancelled by ``signal`` (an abort signal)."""
