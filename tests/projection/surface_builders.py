"""Event builders for the surface, event-trace and lineage tests.

Events are the plain dicts a loaded log holds.  ``op`` and ``sources`` default
to "absent" (the key is not written), which is different from ``None`` (the
key is written with a JSON null) — the fold distinguishes the two.
"""

from __future__ import annotations

from typing import Any

from readmodel.core.vocabulary import SessionRecord

ABSENT: Any = object()


def replace(start: Any, end: Any) -> dict[str, Any]:
    """A replace ``surfaceOp``."""
    return {"op": "replace", "start": start, "end": end}


def event(type_: Any, seq: Any, data: Any = None, *, time: int = 0, op: Any = ABSENT,
          sources: Any = ABSENT) -> dict[str, Any]:
    """Any event; ``op``/``sources`` are written only when given."""
    out: dict[str, Any] = {"type": type_, "seq": seq, "time": time, "data": {} if data is None else data}
    if sources is not ABSENT:
        out["sourceEventSeqs"] = sources
    if op is not ABSENT:
        out["surfaceOp"] = op
    return out


def log_only(seq: int, type_: str = "assistant/chunk", **kwargs: Any) -> dict[str, Any]:
    """A non-surface event (a stream chunk unless told otherwise)."""
    return event(type_, seq, {"turn": 1, "step": 1}, **kwargs)


def user(seq: int, text: str = "hello", *, op: Any = "append", sources: Any = ABSENT, time: int = 0) -> dict[str, Any]:
    """A ``user/message`` (appended unless ``op`` says otherwise)."""
    data = {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "id": f"u{seq}", "role": "user"}
    return event("user/message", seq, data, op=op, sources=sources, time=time)


def assistant(seq: int, text: str = "answer", *, op: Any = "append", sources: Any = ABSENT,
              time: int = 0) -> dict[str, Any]:
    """An ``assistant/message``."""
    data = {
        "turn": 1,
        "step": 1,
        "message": {
            "id": f"a{seq}",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "model", "provider": "mock", "model": "mock"},
        },
    }
    return event("assistant/message", seq, data, op=op, sources=sources, time=time)


def tool_data(output: str = "output", *, call_id: str = "call-1", message_id: str = "t1", turn: Any = 1,
              step: Any = 1, is_error: Any = False, **extra: Any) -> dict[str, Any]:
    """The ``data`` of a ``tool/result`` (``extra`` adds e.g. ``error``/``meta``)."""
    block = {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": output}],
             "isError": is_error}
    message = {"id": message_id, "role": "user", "content": [block], "source": {"kind": "tool", "callId": call_id}}
    return {"turn": turn, "step": step, "message": message, **extra}


def tool_result(seq: int, data: dict[str, Any] | None = None, *, op: Any = "append", sources: Any = ABSENT,
                time: int = 0) -> dict[str, Any]:
    """A ``tool/result`` with :func:`tool_data` unless ``data`` is given."""
    return event("tool/result", seq, tool_data() if data is None else data, op=op, sources=sources, time=time)


def record(session_id: str, created_at: Any = 0, parent: Any = ABSENT, *, live: bool = True,
           persisted: bool = False) -> SessionRecord:
    """A session record with a minimal header."""
    header: dict[str, Any] = {"version": 0, "id": session_id, "createdAt": created_at}
    if parent is not ABSENT:
        header["parentSession"] = parent
    header["delegationDepth"] = 0
    return SessionRecord(header=header, live=live, persisted=persisted)
