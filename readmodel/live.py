"""The live overlay: in-process sessions that are not (yet) in the index.

The reference's query service reads two sources: the in-process session store
(``ctx.sessions``) and the persistence backend.  sessionq's persisted side is
the index database; the in-process side is an optional :class:`LiveSource`
given to the engine.  Live always wins (query-spec §1.4–§1.8):

* a live id is read from the live session only, never from the database;
* listings mark each record ``live`` / ``persisted``; a live header wins, and
  an id that is both must have compatible headers (:func:`assert_headers_compatible`);
* a live owner that appears while the database is being read still wins.

:class:`InMemoryLiveSource` is a simple thread-safe implementation for
embedding processes and tests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from readmodel.core.errors import SessionQueryError
from readmodel.projection.lineage import clone_json
from readmodel.core.vocabulary import Event, Header


@runtime_checkable
class LiveSession(Protocol):
    """One live session: its header projection and its complete raw log."""

    @property
    def header(self) -> Header: ...

    @property
    def events(self) -> Sequence[Event]: ...


@runtime_checkable
class LiveSource(Protocol):
    """The in-process session store (``ctx.sessions``)."""

    def get(self, session_id: str) -> LiveSession | None:
        """The live session with this id, or ``None``."""
        ...

    def list(self) -> Iterable[LiveSession]:
        """Every live session (creation order; the order does not matter)."""
        ...


@dataclass
class InMemorySession:
    """A live session held in memory.  ``events`` is append-only."""

    header: Header
    events: list[Event] = field(default_factory=list)


class InMemoryLiveSource:
    """A thread-safe :class:`LiveSource` over sessions held in memory.

    Appends replace the event list rather than mutate it, so a reader that
    took ``session.events`` always holds one consistent, complete log.
    """

    def __init__(self) -> None:
        self._sessions: dict[str, InMemorySession] = {}
        self._lock = threading.Lock()

    def create(self, header: Header, events: Iterable[Event] = ()) -> InMemorySession:
        """Register a live session (replacing one with the same id)."""
        session = InMemorySession(header=header, events=list(events))
        with self._lock:
            self._sessions[header["id"]] = session
        return session

    def append(self, session_id: str, *events: Event) -> None:
        """Append events to a live session's log (atomically for readers)."""
        with self._lock:
            session = self._sessions[session_id]
            session.events = [*session.events, *events]

    def remove(self, session_id: str) -> None:
        """Forget a live session (it was closed; only the index has it now)."""
        with self._lock:
            self._sessions.pop(session_id, None)

    def get(self, session_id: str) -> InMemorySession | None:
        with self._lock:
            return self._sessions.get(session_id)

    def list(self) -> list[InMemorySession]:
        with self._lock:
            return list(self._sessions.values())


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    """One atomic observation of a live session.

    ``header`` is a private clone.  ``events`` is a private list whose items
    are borrowed from the live session: logged events are immutable, so reads
    only clone the events they return.
    """

    header: Header
    events: list[Event]


def snapshot_live(session: LiveSession) -> LiveSnapshot:
    """Observe a live session: clone the header, take the log as one list."""
    events = list(session.events)  # one atomic copy of the list
    return LiveSnapshot(header=clone_json(session.header), events=events)


_ABSENT: Any = object()


def _strict_equal(a: Any, b: Any) -> bool:
    """JS ``a === b`` for header field values (absent is ``undefined``)."""
    if a is _ABSENT or b is _ABSENT:
        return a is b
    numeric = (int, float)
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, numeric) and isinstance(b, numeric):
        return a == b  # NaN !== NaN, as in JS
    if type(a) is str and type(b) is str:
        return a == b
    if a is None or b is None:
        return a is b
    return a is b  # objects compare by reference


def _depth(header: Header) -> Any:
    value = header.get("delegationDepth", _ABSENT)
    return 0 if value is _ABSENT or value is None else value


_COMPARED_FIELDS = ("version", "id", "createdAt", "cwd", "parentSession", "seedLength")


def assert_headers_compatible(a: Header, b: Header) -> None:
    """``assertSessionHeadersCompatible``: raise ``SESSION_QUERY_SOURCE_CONFLICT``
    when two observations of one session disagree on an immutable field.

    Compared with strict equality: ``version``, ``id``, ``createdAt``, ``cwd``,
    ``parentSession``, ``seedLength`` (absent equals only absent) and
    ``delegationDepth`` (absent or ``null`` counts as 0).  ``origin`` and
    ``agentPreset`` are not compared.  The message names ``a``'s id.
    """
    conflict = any(not _strict_equal(a.get(key, _ABSENT), b.get(key, _ABSENT)) for key in _COMPARED_FIELDS)
    if conflict or not _strict_equal(_depth(a), _depth(b)):
        raise SessionQueryError(
            "SESSION_QUERY_SOURCE_CONFLICT", f'session source headers conflict for session "{a.get("id")}"'
        )
