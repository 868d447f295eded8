"""Older event shapes the harness still accepts at read time (format-spec §5.7).

Storage is never rewritten; readers upgrade each event as it is read.  The
upgrades are applied per event in the harness's order: ``turn/start`` with a
trigger, every ``turn/end`` (current ones are checked too), the removed
``steering/message`` type, and pre-identity message shapes.
"""

from __future__ import annotations

from typing import Any, Final

from readmodel.projection.eventmodel import EventShapeError
from readmodel.core.jsvalues import (
    is_non_negative_safe_integer,
    is_number,
    is_record,
    is_safe_integer,
    js_string,
)

_SIMPLE_REASONS: Final = frozenset({"completed", "blocked", "max-tokens", "interrupted"})
_TURN_END_KEYS: Final = frozenset({"turn", "reason"})
_KIND_ONLY: Final = frozenset({"kind"})
_FAILURE_OPTIONAL: Final = {"status": is_number, "providerRetryAfterMs": is_number, "requestId": lambda v: type(v) is str}


def legacy_message_id(session_id: str, seq: Any) -> str:
    """The deterministic id given to a message stored before messages had ids."""
    return f"legacy-message:{session_id}:{js_string(seq)}"


def _positive_turn(value: Any) -> bool:
    return is_safe_integer(value) and value >= 1


def _malformed(event: dict[str, Any], what: str) -> EventShapeError:
    return EventShapeError(f"malformed {what} at seq {event.get('seq')}")


def _upgrade_turn_start(event: dict[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    if not is_record(data) or "trigger" not in data:
        return event
    trigger = data["trigger"]
    if (
        data.keys() != {"turn", "trigger"}
        or not _positive_turn(data["turn"])
        or not is_record(trigger)
        or type(trigger.get("kind")) is not str
        or trigger["kind"] == ""
    ):
        raise _malformed(event, "pre-react-loop turn/start")
    return {**event, "data": {"turn": data["turn"]}}


def _upgrade_error_reason(event: dict[str, Any], reason: dict[str, Any]) -> dict[str, Any]:
    if "error" in reason:
        return reason
    if not is_non_negative_safe_integer(reason.get("step")):
        raise _malformed(event, "legacy turn/end error reason")
    keys = reason.keys()
    if keys == {"kind", "step", "failure"}:
        failure = reason["failure"]
        if not (
            is_record(failure)
            and type(failure.get("message")) is str
            and type(failure.get("code")) is str
            and all(key in ("message", "code") or (key in _FAILURE_OPTIONAL and _FAILURE_OPTIONAL[key](value)) for key, value in failure.items())
        ):
            raise _malformed(event, "legacy turn/end error reason")
        return {"kind": "error", "error": failure}
    if keys in ({"kind", "step", "message"}, {"kind", "step", "message", "code"}):
        message = reason["message"]
        code = reason.get("code", "UNKNOWN")
        if type(message) is not str or type(code) is not str:
            raise _malformed(event, "legacy turn/end error reason")
        return {"kind": "error", "error": {"message": message, "code": code}}
    raise _malformed(event, "legacy turn/end error reason")


def _upgrade_turn_end(event: dict[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    if not is_record(data):
        return event
    reason = data.get("reason")
    if data.keys() != _TURN_END_KEYS or not _positive_turn(data["turn"]) or not is_record(reason) or type(reason.get("kind")) is not str:
        raise _malformed(event, "turn/end")
    kind = reason["kind"]
    if kind in _SIMPLE_REASONS:
        if reason.keys() != _KIND_ONLY:
            raise _malformed(event, "turn/end reason")
        return event
    if kind == "aborted":
        if "reason" in reason:
            return event
        if reason.keys() != _KIND_ONLY:
            raise _malformed(event, "turn/end reason")
        upgraded: dict[str, Any] = {"kind": "aborted", "reason": {"kind": "legacy"}}
    elif kind == "disposed":
        if reason.keys() != _KIND_ONLY:
            raise _malformed(event, "turn/end reason")
        upgraded = {"kind": "aborted", "reason": {"kind": "disposed"}}
    elif kind == "error":
        upgraded = _upgrade_error_reason(event, reason)
        if upgraded is reason:
            return event
    else:
        return event
    return {**event, "data": {key: (upgraded if key == "reason" else value) for key, value in data.items()}}


def _upgrade_steering(event: dict[str, Any], session_id: str) -> dict[str, Any]:
    data = event.get("data")
    if not is_record(data):
        raise _malformed(event, "steering/message")
    keys = data.keys()
    if keys == {"turn", "message"} and is_safe_integer(data["turn"]) and is_record(data["message"]):
        message = data["message"]
    elif keys == {"turn", "content", "source"} and is_safe_integer(data["turn"]):
        message = {"content": data["content"], "source": data["source"], "id": legacy_message_id(session_id, event.get("seq")), "role": "user"}
    else:
        raise _malformed(event, "steering/message")
    return {key: ("user/message" if key == "type" else message if key == "data" else value) for key, value in event.items()}


def _is_replacement(event: dict[str, Any]) -> bool:
    op = event.get("surfaceOp")
    return is_record(op) and op.get("op") == "replace" and is_number(op.get("start"))


def _upgrade_message(event: dict[str, Any], session_id: str, tool_result_ids: dict[int, str]) -> dict[str, Any]:
    etype = event.get("type")
    data = event.get("data")
    if etype not in ("user/message", "assistant/message", "tool/result") or not is_record(data):
        if etype in ("user/message", "assistant/message", "tool/result"):
            raise _malformed(event, etype)
        return event
    seq = event.get("seq")
    if etype == "user/message":
        if "id" in data or "role" in data or "message" in data or "content" not in data or "source" not in data:
            return event
        return {**event, "data": {**data, "id": legacy_message_id(session_id, seq), "role": "user"}}
    if "message" in data:
        return event
    if etype == "assistant/message":
        if "content" not in data or "provenance" not in data:
            return event
        rest = {k: v for k, v in data.items() if k not in ("content", "provenance")}
        provenance = data["provenance"]
        source = {**provenance, "kind": "model"} if is_record(provenance) else {"kind": "model"}
        rest["message"] = {"id": legacy_message_id(session_id, seq), "role": "assistant", "content": data["content"], "source": source}
        return {**event, "data": rest}
    if "callId" not in data or "content" not in data or "isError" not in data:
        return event
    rest = {k: v for k, v in data.items() if k not in ("callId", "content", "isError")}
    call_id = data["callId"]
    message: dict[str, Any] = {}
    if _is_replacement(event):
        inherited = tool_result_ids.get(event["surfaceOp"]["start"])
        if inherited is not None:
            message["id"] = inherited
    else:
        message["id"] = legacy_message_id(session_id, seq)
    message["role"] = "user"
    message["content"] = [{"type": "tool-result", "toolCallId": call_id, "content": data["content"], "isError": data["isError"]}]
    message["source"] = {"kind": "tool", "callId": call_id}
    rest["message"] = message
    return {**event, "data": rest}


def is_legacy_tool_result_replacement(event: dict[str, Any]) -> bool:
    """Does upgrading this event need the message ids of earlier tool results?"""
    data = event.get("data")
    return (
        event.get("type") == "tool/result"
        and is_record(data)
        and "message" not in data
        and "callId" in data
        and "content" in data
        and "isError" in data
        and _is_replacement(event)
    )


def upgrade_event(event: Any, session_id: str, tool_result_ids: dict[int, str]) -> Any:
    """Return the current-shape form of one stored event (the input is never mutated).

    ``tool_result_ids`` maps seqs of earlier ``tool/result`` events to their
    message ids (a legacy replacement inherits its target's id).  Raises
    :class:`EventShapeError` for a malformed legacy shape.
    """
    if type(event) is not dict:
        return event
    etype = event.get("type")
    if etype == "turn/start":
        return _upgrade_turn_start(event)
    if etype == "turn/end":
        return _upgrade_turn_end(event)
    if etype == "steering/message":
        event = _upgrade_steering(event, session_id)
    return _upgrade_message(event, session_id, tool_result_ids)
