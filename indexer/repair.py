"""Synthetic closers for a log whose final turn never ended (format-spec §7.4).

When a harness dies mid-turn, its log ends inside an open turn.  The
non-mutating inspect view appends, in memory only, a ``tool/result`` for every
tool call of the open step that never got one, then ``step/end`` if a step is
open, then ``turn/end`` with reason ``interrupted``.  The result texts are
sessionq's own wording; everything else (ids, seqs, times, error names and
codes, key order) follows the harness exactly.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec


OUTCOME_UNKNOWN_TEXT: Final = (
    "sessionq note: this tool call was recorded as started, but the session stopped before its "
    "result was saved, so whether it ran to completion is unknown. Repeat it only if it is "
    "read-only or safe to run twice; otherwise check the real state first or ask the user."
)
NOT_STARTED_TEXT: Final = (
    "sessionq note: the session stopped before this tool call was recorded as started. "
    "It can be issued again if it is still needed."
)


class CloserState(msgspec.Struct):
    """Resumable walk state: the open turn and step and the calls awaiting results.

    ``pending`` maps call id → ``[step, call seq or None]`` in registration
    order (re-registering keeps the original position, like a JS Map).
    """

    open_turn: Any = None
    open_step: Any = None
    turn_open: bool = False
    step_open: bool = False
    pending: dict[str, list[Any]] = msgspec.field(default_factory=dict)

    def observe(self, event: dict[str, Any]) -> None:
        """Advance the walk over one normalised event."""
        etype = event.get("type")
        if type(etype) is str:
            step = WALK_STEPS.get(etype)
            if step is not None:
                step(self, event)

    def _turn_start(self, event: dict[str, Any]) -> None:
        data = event.get("data")
        self.open_turn = data.get("turn") if type(data) is dict else None
        self.turn_open = True
        self.open_step, self.step_open = None, False
        self.pending.clear()

    def _turn_end(self, event: dict[str, Any]) -> None:
        self.open_turn, self.turn_open = None, False
        self.open_step, self.step_open = None, False
        self.pending.clear()

    def _step_start(self, event: dict[str, Any]) -> None:
        data = event.get("data")
        self.open_step = data.get("step") if type(data) is dict else None
        self.step_open = True

    def _step_end(self, event: dict[str, Any]) -> None:
        self.pending.clear()
        self.open_step, self.step_open = None, False

    def _assistant_message(self, event: dict[str, Any]) -> None:
        data = event.get("data")
        message = data.get("message") if type(data) is dict else None
        content = message.get("content") if type(message) is dict else None
        if type(content) is list:
            step = data.get("step")
            pending = self.pending
            for block in content:
                if type(block) is dict and block.get("type") == "tool-call":
                    call_id = block.get("id")
                    entry = pending.get(call_id)
                    if entry is None:
                        pending[call_id] = [step, None]
                    else:
                        entry[0], entry[1] = step, None

    def _tool_call(self, event: dict[str, Any]) -> None:
        data = event.get("data")
        call_id = data.get("callId") if type(data) is dict else None
        entry = self.pending.get(call_id)
        if entry is not None:
            entry[1] = event.get("seq")

    def _tool_result(self, event: dict[str, Any]) -> None:
        data = event.get("data")
        message = data.get("message") if type(data) is dict else None
        source = message.get("source") if type(message) is dict else None
        if type(source) is dict:
            self.pending.pop(source.get("callId"), None)

    def copy(self) -> "CloserState":
        return CloserState(self.open_turn, self.open_step, self.turn_open, self.step_open, {k: list(v) for k, v in self.pending.items()})


# The walk step of each event type that moves it (every other type leaves it as it
# is): ``WALK_STEPS[etype](state, event)`` is ``state.observe(event)`` for those types.
WALK_STEPS: Final = {
    "turn/start": CloserState._turn_start,
    "turn/end": CloserState._turn_end,
    "step/start": CloserState._step_start,
    "step/end": CloserState._step_end,
    "assistant/message": CloserState._assistant_message,
    "tool/call": CloserState._tool_call,
    "tool/result": CloserState._tool_result,
}


def _tool_result_closer(turn: Any, call_id: Any, step: Any, call_seq: Any, seq: int, time: Any) -> dict[str, Any]:
    text = OUTCOME_UNKNOWN_TEXT if call_seq is not None else NOT_STARTED_TEXT
    error = (
        {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
        if call_seq is not None
        else {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    )
    message = {
        "id": f"interrupted-tool-result-{call_id}-{seq}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [{"type": "tool-result", "toolCallId": call_id, "isError": True, "content": [{"type": "text", "text": text}]}],
    }
    event: dict[str, Any] = {
        "type": "tool/result",
        "seq": seq,
        "time": time,
        "data": {"turn": turn, "step": step, "message": message, "error": error},
        "surfaceOp": "append",
    }
    if call_seq is not None:
        event["sourceEventSeqs"] = [call_seq]
    return event


def closers_for(state: CloserState, last_event: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The synthetic events that close the open turn, or ``[]`` when none is open."""
    if not state.turn_open or state.open_turn is None or last_event is None:
        return []
    seq = int(last_event["seq"]) + 1
    time = last_event.get("time")
    out: list[dict[str, Any]] = []
    for call_id, (step, call_seq) in state.pending.items():
        out.append(_tool_result_closer(state.open_turn, call_id, step, call_seq, seq, time))
        seq += 1
    if state.step_open and state.open_step is not None:
        out.append({"type": "step/end", "seq": seq, "time": time, "data": {"turn": state.open_turn, "step": state.open_step}})
        seq += 1
    out.append({"type": "turn/end", "seq": seq, "time": time, "data": {"turn": state.open_turn, "reason": {"kind": "interrupted"}}})
    return out


def is_closer_text(text: str) -> bool:
    """Is this one of sessionq's synthetic result texts?"""
    return text in (OUTCOME_UNKNOWN_TEXT, NOT_STARTED_TEXT)
