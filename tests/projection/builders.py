"""Tiny builders for well-formed session events used by the projection tests.

They produce the shapes a loaded log holds (query-spec §4, format-spec §5.2):
plain dicts with ``type, seq, time, data`` and, for surface events, ``surfaceOp``.
"""

from __future__ import annotations

from typing import Any

Block = dict[str, Any]


def text(value: str) -> Block:
    return {"type": "text", "text": value}


def user(seq: int, content: list[Block], *, time: int = 0, source: dict[str, Any] | None = None,
         surface_op: Any = "append") -> dict[str, Any]:
    return {
        "type": "user/message",
        "seq": seq,
        "time": time,
        "data": {"content": content, "source": source or {"kind": "user"}, "id": f"m{seq}", "role": "user"},
        "surfaceOp": surface_op,
    }


def assistant(seq: int, content: list[Block], *, time: int = 0, surface_op: Any = "append",
              sources: list[int] | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "assistant/message",
        "seq": seq,
        "time": time,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "id": f"m{seq}",
                "role": "assistant",
                "content": content,
                "source": {"kind": "model", "provider": "mock", "model": "mock"},
            },
        },
        "surfaceOp": surface_op,
    }
    if sources is not None:
        event["sourceEventSeqs"] = sources
    return event


def tool_result(seq: int, content: list[Block], *, time: int = 0, error: Any = None,
                call_id: str = "call") -> dict[str, Any]:
    data: dict[str, Any] = {
        "turn": 1,
        "step": 1,
        "message": {
            "id": f"m{seq}",
            "role": "user",
            "content": [{"type": "tool-result", "toolCallId": call_id, "content": content, "isError": error is not None}],
            "source": {"kind": "tool", "callId": call_id},
        },
    }
    if error is not None:
        data["error"] = error
    return {"type": "tool/result", "seq": seq, "time": time, "data": data, "surfaceOp": "append"}


def event(type_: str, seq: int, data: Any, *, time: int = 0) -> dict[str, Any]:
    return {"type": type_, "seq": seq, "time": time, "data": data}


def turn_end(reason: Any, *, seq: int = 0, time: int = 1) -> dict[str, Any]:
    return event("turn/end", seq, {"turn": 1, "reason": reason}, time=time)


def title(seq: int, title_text: Any = "A title", *, time: int = 0, message_seqs: Any = (),
          source: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = {"title": title_text, "messageSeqs": list(message_seqs),
                            "source": source if source is not None else {"kind": "fallback"}}
    return event("session/title", seq, data, time=time)
