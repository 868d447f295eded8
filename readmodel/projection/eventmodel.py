"""The harness's event model: known types and the load-time shape rules.

These are the rules the harness applies to every stored event before it
trusts a log (format-spec §5): the envelope whitelist, the message shapes of
the three surface event types, the request-header checks and the 48-type
vocabulary.  They are pure predicates that raise :class:`EventShapeError`; the
log reader decides which failure category (corrupt / unsupported) that is.
"""

from __future__ import annotations

from typing import Any, Final

from readmodel.core.jsvalues import MAX_SAFE_INTEGER, is_non_negative_safe_integer, is_record, is_safe_integer

CORE_EVENT_TYPES: Final = frozenset(
    {
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "user/message",
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/result",
        "todo/write",
        "request/header",
        "request/context",
        "session/end-seed",
    }
)

PLUGIN_EVENT_TYPES: Final = frozenset(
    {
        "agent/inbox/spliced",
        "agent-preset/selected",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "command/run",
        "command/done",
        "compaction/start",
        "compaction/summary",
        "compaction/prune",
        "compaction/end",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "sandbox/mode",
        "schedule/change",
        "session/title",
        "session/title-llm-request",
        "subagent/descriptor",
        "team/member",
        "team/task",
        "team/message/queued",
        "team/message/delivered",
        "tool/code-dispatch-start",
        "tool/code-dispatch",
        "tool-workflow/run-start",
        "tool-workflow/agent-start",
        "tool-workflow/agent-end",
        "tool-workflow/run-end",
        "web/deepseek-search-llm-request",
    }
)

KNOWN_EVENT_TYPES: Final = CORE_EVENT_TYPES | PLUGIN_EVENT_TYPES
assert len(KNOWN_EVENT_TYPES) == 48

SURFACE_EVENT_TYPES: Final = frozenset({"user/message", "assistant/message", "tool/result"})
ENVELOPE_KEYS: Final = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})
REJECTED_EVENT_TYPES: Final = frozenset({"request/header-delta", "mode/set"})


class EventShapeError(ValueError):
    """An event violates the harness's load-time shape rules."""


def is_known_or_ignorable(event: dict[str, Any]) -> bool:
    """The known-type gate: a known type, or an unknown one marked ``ignorable: true``."""
    etype = event.get("type")
    if type(etype) is str and etype in KNOWN_EVENT_TYPES:
        return True
    return event.get("ignorable", None) is True


def message_of(event: dict[str, Any]) -> Any:
    """The message object of a surface event (``data`` or ``data.message``)."""
    data = event.get("data")
    if event.get("type") == "user/message":
        return data
    return data.get("message") if is_record(data) else None


def _non_empty_string(value: Any) -> bool:
    return type(value) is str and value != ""


def check_message_shape(event: dict[str, Any]) -> None:
    """Validate the message of a ``user/message``, ``assistant/message`` or ``tool/result``.

    Other event types pass unchecked.  Raises :class:`EventShapeError`.
    """
    etype = event.get("type")
    if type(etype) is not str or etype not in SURFACE_EVENT_TYPES:
        return
    seq = event.get("seq")
    # message_of(), inlined: this runs for every surface event.
    data = event.get("data")
    if etype == "user/message":
        message = data
    else:
        message = data.get("message") if type(data) is dict else None
    if type(message) is not dict:
        raise EventShapeError(f"{etype} event {seq} carries no identified message")
    message_id = message.get("id")
    if type(message_id) is not str or message_id == "":
        raise EventShapeError(f"{etype} event {seq} carries no identified message")
    expected_role = "assistant" if etype == "assistant/message" else "user"
    if message.get("role") != expected_role:
        raise EventShapeError(f"{etype} event {seq} must carry a message with role {expected_role!r}")
    source = message.get("source")
    kind = source.get("kind") if type(source) is dict else None
    if type(kind) is not str or kind == "":
        raise EventShapeError(f"{etype} event {seq} has a message without a source kind")
    content = message.get("content")
    if type(content) is not list:
        raise EventShapeError(f"{etype} event {seq} has a message whose content is not an array")
    if etype == "assistant/message":
        if kind != "model" or not (_non_empty_string(source.get("provider")) and _non_empty_string(source.get("model"))):
            raise EventShapeError(f"assistant/message event {seq} must name its model provider and model")
    elif etype == "tool/result":
        call_id = source.get("callId")
        if kind != "tool" or not _non_empty_string(call_id):
            raise EventShapeError(f"tool/result event {seq} must name the tool call it answers")
        if len(content) != 1:
            raise EventShapeError(f"tool/result event {seq} must hold exactly one tool-result block")
        block = content[0]
        if type(block) is not dict or block.get("type") != "tool-result" or type(block.get("content")) is not list:
            raise EventShapeError(f"tool/result event {seq} must hold exactly one tool-result block")
        if block.get("toolCallId") != call_id:
            raise EventShapeError(f"tool/result event {seq} answers a different call than its source names")


def check_envelope(event: Any) -> None:
    """Validate the event envelope (format-spec §5.1).  Raises :class:`EventShapeError`."""
    if type(event) is dict:
        # Common case first: int seq and time, every rule met; anything else
        # takes the rule-by-rule path below, which reports the first failure.
        seq = event.get("seq")
        time = event.get("time")
        if (
            type(seq) is int
            and type(time) is int
            and 0 <= seq <= MAX_SAFE_INTEGER
            and -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
            and type(event.get("type")) is str
            and "data" in event
            and event.keys() <= ENVELOPE_KEYS
            and event.get("ignorable", True) is True
        ):
            return
    _check_envelope_rules(event)


def _check_envelope_rules(event: Any) -> None:
    if not is_record(event):
        raise EventShapeError("invalid event envelope: an event must be a JSON object")
    if not event.keys() <= ENVELOPE_KEYS:
        extra = next(key for key in event if key not in ENVELOPE_KEYS)
        raise EventShapeError(f"invalid event envelope: unexpected key {extra!r}")
    if type(event.get("type")) is not str:
        raise EventShapeError("invalid event envelope: type must be a string")
    if not is_non_negative_safe_integer(event.get("seq")):
        raise EventShapeError("invalid event envelope: seq must be a non-negative safe integer")
    if not is_safe_integer(event.get("time")):
        raise EventShapeError(f"invalid event envelope at seq {event.get('seq')}: time must be a safe integer")
    if "data" not in event:
        raise EventShapeError(f"invalid event envelope at seq {event.get('seq')}: data is missing")
    if "ignorable" in event and event["ignorable"] is not True:
        raise EventShapeError(f"invalid event envelope at seq {event.get('seq')}: ignorable must be true")


def check_request_header(event: dict[str, Any]) -> None:
    """Validate a ``request/header`` payload (format-spec §5.3).  Other types pass."""
    if event.get("type") != "request/header":
        return
    seq = event.get("seq")
    data = event.get("data")
    header = data.get("header") if is_record(data) else None
    if not is_record(header):
        raise EventShapeError(f"request/header event {seq} has no header record")
    config = header.get("config")
    if not is_record(config) or not (_non_empty_string(config.get("provider")) and _non_empty_string(config.get("model"))):
        raise EventShapeError(f"request/header event {seq} must name a provider and a model")
    if "reasoningEffort" in config and not _non_empty_string(config["reasoningEffort"]):
        raise EventShapeError(f"request/header event {seq} has an empty reasoning effort")
    if "adapterDefaults" in header:
        defaults = header["adapterDefaults"]
        if not is_record(defaults):
            raise EventShapeError(f"request/header event {seq} has malformed adapter defaults")
        for key, value in defaults.items():
            if key not in ("reasoningEffort", "maxTokens") or value is not True:
                raise EventShapeError(f"request/header event {seq} has malformed adapter defaults")
            if key not in config:
                raise EventShapeError(f"request/header event {seq} marks {key} as a default it does not set")


def check_not_rejected_vocabulary(event: dict[str, Any]) -> None:
    """Refuse the retired event vocabulary (``request/header-delta``, ``mode/set``, ``fallback``)."""
    etype = event.get("type")
    if type(etype) is str and etype in REJECTED_EVENT_TYPES:  # a list or object type is unhashable
        raise EventShapeError(f"event {event.get('seq')} uses the retired type {etype}")
    if etype == "request/header":
        data = event.get("data")
        if is_record(data) and data.get("reason") == "fallback":
            raise EventShapeError(f"request/header event {event.get('seq')} uses the retired reason 'fallback'")
