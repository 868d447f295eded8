"""Who is calling, and which sessions that caller may see.

The caller is a session running in a workspace: its id, its working
directory (``cwd``, possibly none) and its own events.  Authorization is
exact string equality of working directories, never path normalization:

* a header carrying the caller's own id is visible iff its ``cwd`` equals
  the caller's (both absent counts as equal);
* any other header is visible iff the caller has a ``cwd`` and the header's
  ``cwd`` is exactly that string.

A session that does not exist and a session in another workspace are refused
with the same error, so nothing can be learned by guessing ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from readmodel.tools.boundary import OP_IDS_AUTH, OP_TARGET_AUTH, ServiceBoundary
from readmodel.tools.errors import MISSING_AGENT, ToolError, invalid_args, unauthorized
from readmodel.core.vocabulary import Event, Header

_ABSENT: Any = object()


@runtime_checkable
class Caller(Protocol):
    """The calling session.  ``session_id`` may be ``None`` for a workspace-only
    caller (an MCP server started without ``--session``); ``cwd`` ``None``
    means the caller has no workspace."""

    @property
    def session_id(self) -> str | None: ...

    @property
    def cwd(self) -> str | None: ...

    @property
    def events(self) -> Sequence[Event]: ...


@dataclass(frozen=True)
class ToolCaller:
    """A caller given by value: id, workspace and the caller's own events."""

    session_id: str | None
    cwd: str | None
    events: Sequence[Event] = field(default_factory=tuple)


class LazyCaller:
    """A caller whose events are read on first use (e.g. from the index).

    ``load_events`` runs at most once per caller object; a host builds a new
    caller per tool call to see the latest events.
    """

    def __init__(self, session_id: str | None, cwd: str | None, load_events: Callable[[], Sequence[Event]]) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self._load = load_events
        self._events: Sequence[Event] | None = None

    @property
    def events(self) -> Sequence[Event]:
        if self._events is None:
            self._events = self._load()
        return self._events


def require_caller(caller: Caller | None) -> Caller:
    """The caller, or ``SESSION_QUERY_TOOL_MISSING_AGENT`` when there is none."""
    if caller is None:
        raise ToolError(MISSING_AGENT, "the session tools need to know which session is calling them")
    return caller


def resolve_target(caller: Caller, session_id: str | None) -> str:
    """The requested session, or the caller's own one when none was named."""
    if session_id is not None:
        return session_id
    if caller.session_id is None:
        raise invalid_args("session_id is required: this caller is not bound to a session of its own")
    return caller.session_id


def header_authorized(caller: Caller, header: Header) -> bool:
    """The workspace rule for one observed header (module docstring)."""
    if not isinstance(header, dict):
        return False
    cwd = header.get("cwd", _ABSENT)
    if caller.session_id is not None and header.get("id") == caller.session_id:
        if caller.cwd is None:
            return cwd is _ABSENT
        return type(cwd) is str and cwd == caller.cwd
    return caller.cwd is not None and type(cwd) is str and cwd == caller.cwd


def check_observed(caller: Caller, header: Header, requested_id: str) -> None:
    """Post-observation check: a payload must be the requested session and still visible."""
    if not isinstance(header, dict) or header.get("id") != requested_id or not header_authorized(caller, header):
        raise unauthorized()


def authorize_target(boundary: ServiceBoundary, service: Any, caller: Caller, target: str) -> None:
    """Preflight for a directly named session: refuse it unless it is in the caller's workspace.

    The caller's own session passes without a service call (its header is
    checked once observed); a caller without a workspace may read nothing else.
    """
    if caller.session_id is not None and target == caller.session_id:
        return
    if caller.cwd is None:
        raise unauthorized()
    filters = [{"kind": "id", "values": [target]}, {"kind": "cwd", "values": [caller.cwd]}]
    records = boundary.call(OP_TARGET_AUTH, lambda: service.filter_sessions(filters, boundary.signal))
    if len(records) != 1:
        raise unauthorized()


def authorize_session_ids(boundary: ServiceBoundary, service: Any, caller: Caller, ids: Iterable[str]) -> set[str]:
    """The subset of ``ids`` the caller may see (at most one service call).

    The caller's own id is always visible; records the service returns
    without having been asked for them, or in another workspace, are ignored.
    """
    requested = list(dict.fromkeys(ids))
    allowed: set[str] = set()
    others = [session_id for session_id in requested if session_id != caller.session_id]
    if len(others) != len(requested):
        allowed.add(caller.session_id)  # type: ignore[arg-type]
    if caller.cwd is None or not others:
        return allowed
    filters = [{"kind": "id", "values": others}, {"kind": "cwd", "values": [caller.cwd]}]
    records = boundary.call(OP_IDS_AUTH, lambda: service.filter_sessions(filters, boundary.signal))
    wanted = set(others)
    for record in records:
        header = record.header
        session_id = header.get("id") if isinstance(header, dict) else None
        if session_id in wanted and header_authorized(caller, header):
            allowed.add(session_id)
    return allowed
