"""Helpers for the tool tests: real indexes, a recording service, a capturing logger.

Indexes are real: logs written with :class:`indexer.writer.LogWriter` into a
temporary root, reconciled into a fresh SQLite index, read by a real
:class:`readmodel.query.SessionQuery`.  :class:`Spy` wraps that engine to
record every service call (method and arguments) and lets a test inject a
failure, an abort or a scripted answer for one method; everything else goes
to the real engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from indexer.writer import LogWriter
from readmodel.store.database import open_writer
from readmodel.query import SessionQuery
from readmodel.store.sqlite import IndexStore
from readmodel.tools import SessionTools, ToolCaller, ToolResult
from tests.logfactory import ev, step_start, turn_end, turn_start, user

W = "/work/project"
OTHER = "/work/other"


def hdr(session_id: str, cwd: str | None = W, created_at: int = 1, parent: str | None = None) -> dict[str, Any]:
    """A session header (``cwd=None`` leaves the key out)."""
    out: dict[str, Any] = {"version": 0, "id": session_id, "createdAt": created_at}
    if cwd is not None:
        out["cwd"] = cwd
    if parent is not None:
        out["parentSession"] = parent
    out["delegationDepth"] = 0
    return out


def title_event(seq: int, title: str, time: int = 1000) -> dict[str, Any]:
    return ev("session/title", seq, {"title": title, "messageSeqs": [1], "source": {"kind": "user"}}, time=time)


def chat(texts: Sequence[str], title: str | None = None, times: Sequence[int] | None = None, step: bool = False) -> list[dict[str, Any]]:
    """turn/start, one user message per text (optionally at given times), an
    optional session/title, then step/start (if ``step``) or turn/end."""
    events: list[dict[str, Any]] = [turn_start(0)]
    for index, text in enumerate(texts):
        event = user(len(events), text)
        if times is not None:
            event["time"] = times[index]
        events.append(event)
    if title is not None:
        events.append(title_event(len(events), title))
    events.append(step_start(len(events)) if step else turn_end(len(events)))
    return events


@dataclass
class Session:
    header: dict[str, Any]
    events: list[dict[str, Any]]


def build_index(tmp: Path, sessions: Iterable[Session]) -> str:
    """Write every session's log under ``tmp/root`` and index them into ``tmp/index.db``."""
    root = tmp / "root"
    root.mkdir(parents=True, exist_ok=True)
    for session in sessions:
        writer = LogWriter.in_root(root, session.header)
        writer.create(session.header, session.events)
    db = tmp / "index.db"
    engine = open_writer(str(db))
    try:
        Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
    finally:
        engine.dispose()
    return str(db)


def open_query(db: str, config: dict[str, Any] | None = None) -> SessionQuery:
    """A real engine; ``config`` may carry search settings such as ``defaultLimit``."""
    return SessionQuery(IndexStore.open(db), None, config)


@dataclass
class Call:
    method: str
    args: tuple[Any, ...]

    @property
    def signal(self) -> Any:
        return self.args[-1]


Hook = Callable[[tuple[Any, ...]], Any]


class Spy:
    """A query service that records calls and delegates to a real engine.

    ``before[method](args)`` runs first and may raise or abort a signal;
    ``replace[method](args)`` answers instead of the engine;
    ``after[method](args)`` runs once the engine has answered.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[Call] = []
        self.before: dict[str, Hook] = {}
        self.replace: dict[str, Hook] = {}
        self.after: dict[str, Hook] = {}

    def _invoke(self, method: str, *args: Any, **options: Any) -> Any:
        self.calls.append(Call(method, args))
        if method in self.before:
            self.before[method](args)
        if method in self.replace:
            result = self.replace[method](args)
        else:
            result = getattr(self.inner, method)(*args, **options)
        if method in self.after:
            self.after[method](args)
        return result

    def of(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    def methods(self) -> list[str]:
        return [call.method for call in self.calls]

    def filter_sessions(self, filters: Any, signal: Any = None) -> Any:
        return self._invoke("filter_sessions", filters, signal)

    def search_sessions(self, request: Any, signal: Any = None) -> Any:
        return self._invoke("search_sessions", request, signal)

    def search_events(self, request: Any, signal: Any = None) -> Any:
        return self._invoke("search_events", request, signal)

    def trace_session(self, session_id: str, signal: Any = None) -> Any:
        return self._invoke("trace_session", session_id, signal)

    def trace_event(self, request: Any, signal: Any = None) -> Any:
        return self._invoke("trace_event", request, signal)

    def read_event(self, request: Any, signal: Any = None, *, redact: bool = False) -> Any:
        return self._invoke("read_event", request, signal, **({"redact": True} if redact else {}))

    def read_title_snapshots(self, ids: Any, signal: Any = None) -> Any:
        return self._invoke("read_title_snapshots", ids, signal)

    def read_session(self, session_id: str) -> Any:
        return self.inner.read_session(session_id)


@dataclass
class ListLogger:
    """Captures warnings (the tools' only log level)."""

    messages: list[str] = field(default_factory=list)

    def warning(self, msg: str, *args: Any) -> None:
        self.messages.append(msg % args if args else msg)

    @property
    def text(self) -> str:
        return "\n".join(self.messages)


class RaisingLogger(ListLogger):
    def warning(self, msg: str, *args: Any) -> None:
        super().warning(msg, *args)
        raise RuntimeError("the log sink is broken")


def tools_for(service: Any, logger: Any = None, **config: Any) -> SessionTools:
    return SessionTools(service, config or None, logger if logger is not None else ListLogger())


def caller(session_id: str | None = "me", cwd: str | None = W, events: Sequence[dict[str, Any]] = ()) -> ToolCaller:
    return ToolCaller(session_id, cwd, tuple(events))


def ok(result: ToolResult) -> str:
    assert not result.is_error, result
    return result.text


def err(result: ToolResult, code: str) -> str:
    assert result.is_error and result.code == code, result
    assert result.text.startswith("Error: ")
    return result.text
