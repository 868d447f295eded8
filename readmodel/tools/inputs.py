"""What the model may send: the five input schemas and the argument checks.

Two layers, as in the reference's tool runtime:

1. :func:`check_schema` — the runtime's JSON-schema check, before a tool
   runs: wrong types, non-integers where an integer is required, enum
   mismatches, missing required and unknown properties all fail with
   ``INVALID_ARGS``;
2. the tools' own checks (:func:`normalize_query`, :func:`seq_range_clause`,
   :func:`exact_integer`, ...) — ``SESSION_QUERY_INVALID_FILTER`` or
   ``SESSION_QUERY_INVALID_QUERY``, run by each tool at its own point of the
   flow (the order is part of the contract).

No schema has a cursor, limit, offset, page size or cwd: paging and the
workspace are the tools' business, never the model's.

Every description is sessionq's own wording.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from readmodel.core.jsvalues import MAX_SAFE_INTEGER, js_collapse_whitespace, js_trim
from readmodel.tools.errors import invalid_args, invalid_filter, invalid_query

AVAILABILITY_VALUES: Final = ("live", "persisted")
SURFACE_VALUES: Final = ("current", "shadowed", "log-only")

_ISO_HINT: Final = "ISO 8601 with Z or a ±HH:MM offset, e.g. 2025-03-01T09:30:00Z"


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _integer(description: str) -> dict[str, Any]:
    return {"type": "integer", "description": description}


def _strings(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _choices(values: tuple[str, ...], description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", "enum": list(values)}, "description": description}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


_SESSION_ID_OPTIONAL: Final = (
    "Id of the session to look at. Leave it out to mean the session you are running in."
)
_SURFACES_HELP: Final = (
    "Only events on one of these surfaces: current (still in the model's context), "
    "shadowed (replaced by a later event), log-only (recorded but never in context)."
)

MATCH_MODES: Final = ("words", "phrase", "substring")
TOOLS_DEFAULT_MATCH: Final = "words"
"""The search tools' default mode (a deliberate difference from RPC/HTTP/Python, whose default is
``phrase``): a model asks in words, and on the shared corpus words mode answers keyword questions
that the exact phrase misses (``sandbox denied`` matched 25 sessions in words mode and 1 as a phrase,
``permission denied`` 30 and 0, ``why did the sandbox fail`` 1 and 0) while keeping every phrase hit
reachable with ``match: "phrase"``."""
QUESTION_WORDS: Final = frozenset(
    "a an and are as at be been but by can could did do does for from had has have how i if in is it its me my "
    "of on or our so that the their there this to was we were what when where which who why will with would you".split()
)
"""English function words a question is made of.  When the tools' default words search of a question
finds nothing, it is retried without them, and the answer says so (:func:`relaxed_query`)."""


def relaxed_query(query: str) -> str | None:
    """``query`` without its :data:`QUESTION_WORDS`, or ``None`` when that changes nothing, leaves
    nothing, or the query has quoted phrases (whose words must stay together)."""
    if '"' in query:
        return None
    words = query.split(" ")
    kept = [word for word in words if word.strip("?!.,;:'()").lower() not in QUESTION_WORDS]
    return " ".join(kept) if kept and len(kept) < len(words) else None


_MATCH: Final = {
    "type": "string",
    "enum": list(MATCH_MODES),
    "description": (
        "How the query matches. words (default): all words in one event, any order. phrase: the exact "
        "phrase. substring: the literal text anywhere, even inside words (identifiers like "
        "OutcomeUnknown, punctuation like ->, Chinese or Japanese text)."
    ),
}

SESSION_SEARCH_SCHEMA: Final = _object(
    {
        "query": _string(
            "Text to look for. By default (match: words) every word must occur in the same event, in any "
            "order, the last word also as the start of a longer word; put \"double quotes\" around words that "
            "must appear together. Case is ignored; there are no other search operators."
        ),
        "match": _MATCH,
        "session_ids": _strings("Only these sessions."),
        "created_at_from": _string(f"Only sessions created at or after this time ({_ISO_HINT})."),
        "created_at_to": _string(f"Only sessions created at or before this time ({_ISO_HINT})."),
        "parent_session_ids": _strings("Only sessions whose direct parent is one of these sessions."),
        "include_root_sessions": {
            "type": "boolean",
            "description": "Also accept sessions that have no parent (on its own: only such sessions).",
        },
        "availability": _choices(
            AVAILABILITY_VALUES, "Only sessions with at least one of these: live (running now), persisted (stored)."
        ),
        "event_seq_from": _integer("Only match events whose sequence number is at least this."),
        "event_seq_to": _integer("Only match events whose sequence number is at most this."),
        "event_time_from": _string(f"Only match events recorded at or after this time ({_ISO_HINT})."),
        "event_time_to": _string(f"Only match events recorded at or before this time ({_ISO_HINT})."),
        "event_types": _strings("Only match events of these types, e.g. user/message or tool/result."),
        "event_surfaces": _choices(SURFACE_VALUES, _SURFACES_HELP),
    },
    ["query"],
)

SESSION_EVENT_SEARCH_SCHEMA: Final = _object(
    {
        "session_id": _string(_SESSION_ID_OPTIONAL),
        "query": _string(
            "Text to look for. By default (match: words) every word must occur in the same event, in any "
            "order, the last word also as the start of a longer word; put \"double quotes\" around words that "
            "must appear together. Case is ignored; there are no other search operators."
        ),
        "match": _MATCH,
        "seq_from": _integer("Only events whose sequence number is at least this."),
        "seq_to": _integer("Only events whose sequence number is at most this."),
        "time_from": _string(f"Only events recorded at or after this time ({_ISO_HINT})."),
        "time_to": _string(f"Only events recorded at or before this time ({_ISO_HINT})."),
        "event_types": _strings("Only events of these types, e.g. assistant/message."),
        "surfaces": _choices(SURFACE_VALUES, _SURFACES_HELP),
    },
    ["query"],
)

SESSION_TRACE_SCHEMA: Final = _object({"session_id": _string(_SESSION_ID_OPTIONAL)}, [])

SESSION_EVENT_TRACE_SCHEMA: Final = _object(
    {
        "session_id": _string(_SESSION_ID_OPTIONAL),
        "seq": _integer("Sequence number of the event to trace."),
    },
    ["seq"],
)

SESSION_EVENT_READ_SCHEMA: Final = _object(
    {
        "session_id": _string(_SESSION_ID_OPTIONAL),
        "seq": _integer("Sequence number of the event to read."),
        "before": _integer("How many earlier events to summarise as well (default none)."),
        "after": _integer("How many later events to summarise as well (default none)."),
    },
    ["seq"],
)


# --------------------------------------------------------------------------- runtime schema check


def _json_type_ok(expected: str, value: Any) -> bool:
    if expected == "string":
        return type(value) is str
    if expected == "boolean":
        return type(value) is bool
    if expected == "integer":
        if type(value) is int:
            return True
        return type(value) is float and math.isfinite(value) and value.is_integer()
    if expected == "array":
        return type(value) is list
    if expected == "object":
        return isinstance(value, Mapping)
    raise AssertionError(f"unsupported schema type {expected!r}")


def _check_value(name: str, schema: Mapping[str, Any], value: Any) -> Any:
    """Check one property; integral floats become ints (JSON ``2.0`` is the integer 2)."""
    expected = schema["type"]
    if not _json_type_ok(expected, value):
        raise invalid_args(f"{name} must be of type {expected}")
    if expected == "integer":
        return int(value)
    if expected == "array":
        items = schema["items"]
        for item in value:
            if not _json_type_ok(items["type"], item):
                raise invalid_args(f"every item of {name} must be of type {items['type']}")
            if "enum" in items and item not in items["enum"]:
                allowed = ", ".join(items["enum"])
                raise invalid_args(f"{name} may only hold these values: {allowed}")
        return list(value)
    if "enum" in schema and value not in schema["enum"]:
        raise invalid_args(f"{name} must be one of: {', '.join(schema['enum'])}")
    return value


def check_schema(schema: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    """The tool runtime's argument check: a fresh, validated copy or ``INVALID_ARGS``.

    ``None`` counts as ``{}`` (a call without arguments).
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise invalid_args("the arguments must be a JSON object")
    properties: Mapping[str, Any] = schema["properties"]
    for key in arguments:
        if key not in properties:
            raise invalid_args(f"unknown argument {key!r}")
    for key in schema.get("required", ()):
        if key not in arguments:
            raise invalid_args(f"{key} is required")
    return {key: _check_value(key, properties[key], value) for key, value in arguments.items()}


# --------------------------------------------------------------------------- tool-level checks


def normalize_query(query: str) -> str:
    """Trim and collapse JS whitespace; refuse empty text and NUL (``SESSION_QUERY_INVALID_QUERY``).

    The highlight markers are left to the search provider, which neutralises them.
    """
    text = js_collapse_whitespace(js_trim(query))
    if not text:
        raise invalid_query("the query needs some text that is not whitespace")
    if "\x00" in text:
        raise invalid_query("the query may not contain the NUL character")
    return text


def require_values(name: str, values: list[Any] | None) -> list[Any] | None:
    """A supplied list must hold at least one value."""
    if values is not None and not values:
        raise invalid_filter(f"{name} was given without any value; give at least one or leave it out")
    return values


def _is_sequence_number(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def seq_range_clause(start: int | None, end: int | None) -> dict[str, Any] | None:
    """``{kind: 'seq', from?, to?}`` from optional bounds, or ``None`` when neither is given.

    Each bound must be a non-negative safe integer; a lower bound above the
    upper bound is refused.
    """
    if start is None and end is None:
        return None
    if start is not None and not _is_sequence_number(start):
        raise invalid_filter(f"the lowest sequence number must be a whole number from 0 to {MAX_SAFE_INTEGER}")
    if end is not None and not _is_sequence_number(end):
        raise invalid_filter(f"the highest sequence number must be a whole number from 0 to {MAX_SAFE_INTEGER}")
    if start is not None and end is not None and start > end:
        raise invalid_filter("the sequence range starts after it ends")
    clause: dict[str, Any] = {"kind": "seq"}
    if start is not None:
        clause["from"] = start
    if end is not None:
        clause["to"] = end
    return clause


def exact_integer(name: str, value: int | None) -> int | None:
    """``seq``/``before``/``after`` of the exact tools: absent, or a non-negative safe integer."""
    if value is not None and not _is_sequence_number(value):
        raise invalid_filter(f"{name} must be a whole number from 0 to {MAX_SAFE_INTEGER}")
    return value


def dedupe(values: list[str]) -> list[str]:
    """Drop repeated values, keeping each first occurrence in place."""
    return list(dict.fromkeys(values))
