"""Semantic text extraction: the one projection that filters, search and tools share.

Every event maps to a plain-text "semantic document" (query-spec §4).  Most event
types contribute nothing; the content-bearing ones contribute their searchable
parts, each trimmed with the ECMAScript whitespace set W, blanks dropped, the
rest joined with ``"\\n"``.

Shape policy (why this module raises ``TypeError``)
---------------------------------------------------
The reference reads payloads with plain property access (``event.data.content``,
``part.trim()``, ``block.content.flatMap``).  On a loaded log the message shapes
are validated, but block internals, ``tool/call``, ``todo/write`` and error
details are not, so a malformed payload makes the reference throw a JS
``TypeError`` out of ``filterEvents`` and the document builders.  We mirror that
boundary exactly instead of inventing text:

* where JS would throw (property read on ``null``/``undefined``, ``.trim()`` or
  ``.flatMap()`` on a value of the wrong type) we raise :class:`TypeError`;
* where JS quietly yields ``undefined`` (property read on a string, number,
  boolean or array) we follow the resulting JS control flow, e.g. an unknown
  block shape contributes nothing, ``error: "x"`` on a ``tool/result`` counts as
  no error, and a non-object ``turn/end`` reason has no kind and contributes
  nothing.

JS distinguishes ``null`` from ``undefined`` but no rule here does (``?.``,
``??``, property reads and ``.trim()`` treat both alike), so a missing key and a
JSON ``null`` are handled identically.  Only the exception class is matched, not
V8's message wording.  When several defects exist in one event the reference may
report a different one first; both are ``TypeError``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from readmodel.core.jsvalues import JS_WHITESPACE
from readmodel.core.vocabulary import Event, SessionEventSearchDocument, Surface
from readmodel.projection.secrets import redact as redact_secrets

_W: Final = JS_WHITESPACE
_SURROGATE: Final = re.compile("[\ud800-\udfff]")

def _shape_error(event_type: str, detail: str) -> TypeError:
    """The ``TypeError`` the reference would raise, with a readable message."""
    return TypeError(f"cannot extract semantic text from {event_type} event: {detail}")


def join_text(parts: Sequence[Any]) -> str:
    """``join`` of query-spec §4.1: trim each part with W, drop blanks, join with ``\\n``.

    Contract: every part must be a ``str`` (JS calls ``part.trim()``); anything
    else raises :class:`TypeError`, as in the reference.  The result is never
    padded with whitespace and is ``""`` when every part is blank.
    """
    out: list[str] = []
    for part in parts:
        if type(part) is not str:
            raise TypeError(f"semantic text part must be a string, got {type(part).__name__}")
        part = part.strip(_W)
        if part:
            out.append(part)
    return "\n".join(out)


def _collect_content(content: Any, out: list[str], event_type: str) -> None:
    """Append the trimmed, non-blank contributions of ``content`` blocks to ``out``.

    Implements ``blockText`` (query-spec §4.2) over a block array, recursing into
    ``tool-result`` blocks with an explicit stack so arbitrarily deep nesting
    cannot exhaust Python's recursion limit.
    """
    if not isinstance(content, list):
        raise _shape_error(event_type, "message content is not an array")
    strip = str.strip
    append = out.append
    stack = [iter(content)]
    while stack:
        for block in stack[-1]:
            if isinstance(block, dict):
                kind = block.get("type")
                if kind == "text":
                    text = block.get("text")
                    if type(text) is not str:
                        raise _shape_error(event_type, "text block text is not a string")
                    text = strip(text, _W)
                    if text:
                        append(text)
                elif kind == "tool-call":
                    name = block.get("name")
                    arguments = block.get("arguments")
                    if type(name) is not str or type(arguments) is not str:
                        raise _shape_error(event_type, "tool-call block name/arguments are not strings")
                    name = strip(name, _W)
                    if name:
                        append(name)
                    arguments = strip(arguments, _W)
                    if arguments:
                        append(arguments)
                elif kind == "tool-result":
                    nested = block.get("content")
                    if not isinstance(nested, list):
                        raise _shape_error(event_type, "tool-result block content is not an array")
                    # Descend; the parent iterator keeps its position and resumes
                    # once the nested blocks are exhausted.
                    stack.append(iter(nested))
                    break
                # reasoning, image and unknown blocks contribute nothing.
            elif block is None:
                raise _shape_error(event_type, "content block is null")
            # Primitive or array blocks have no ``type`` in JS: nothing.
        else:
            stack.pop()


def content_text(content: Any, event_type: str = "message") -> str:
    """``contentText`` (query-spec §4.2): the joined text of a content-block array.

    ``text`` → its text; ``reasoning`` → nothing; ``tool-call`` → name then
    arguments; ``tool-result`` → its nested blocks, recursively; ``image`` and
    unknown blocks → nothing.  Raises :class:`TypeError` where the reference
    would (see the module docstring).
    """
    out: list[str] = []
    _collect_content(content, out, event_type)
    return "\n".join(out)


def _push(out: list[str], part: Any, event_type: str) -> None:
    """Trim one join part into ``out`` (the non-content parts of an event)."""
    if type(part) is not str:
        raise _shape_error(event_type, f"text part is {type(part).__name__}, not a string")
    part = part.strip(_W)
    if part:
        out.append(part)


def _message_content(data: Any, event_type: str) -> Any:
    """``data.message.content`` with JS failure semantics."""
    try:
        return data["message"]["content"]
    except (KeyError, TypeError, IndexError):
        # A missing/null message or a non-object data has no readable content;
        # the reference then throws from ``.content`` or ``.flatMap``.
        raise _shape_error(event_type, "data.message.content is not readable") from None


def _tool_result_text(data: Any) -> str:
    out: list[str] = []
    _collect_content(_message_content(data, "tool/result"), out, "tool/result")
    error = data.get("error")
    # ``error?.name ?? ''``: a missing or non-object error (JS reads undefined
    # from primitives) contributes nothing; a null name/code likewise.
    if isinstance(error, dict):
        name = error.get("name")
        code = error.get("code")
        if name is not None:
            _push(out, name, "tool/result")
        if code is not None:
            _push(out, code, "tool/result")
    return "\n".join(out)


def _todo_text(data: Any) -> str:
    try:
        todos = data["todos"]
    except (KeyError, TypeError, IndexError):
        raise _shape_error("todo/write", "data.todos is not readable") from None
    if not isinstance(todos, list):
        raise _shape_error("todo/write", "data.todos is not an array")
    out: list[str] = []
    for todo in todos:
        if isinstance(todo, dict):
            _push(out, todo.get("status"), "todo/write")
            _push(out, todo.get("content"), "todo/write")
        else:
            # null throws on the property read; other values yield undefined
            # parts that throw on ``.trim()``.
            raise _shape_error("todo/write", "todo is not an object")
    return "\n".join(out)


def _turn_end_text(data: Any) -> str:
    if type(data) is not dict:
        raise _shape_error("turn/end", "data.reason is not readable")
    reason = data.get("reason")
    if reason is None:
        raise _shape_error("turn/end", "data.reason is null")
    if type(reason) is not dict:
        return ""  # ``reason.kind`` is undefined on a primitive: unknown kind.
    kind = reason.get("kind")
    if kind == "error":
        error = reason.get("error")
        if type(error) is not dict:
            raise _shape_error("turn/end", "error reason has no readable error.message")
        # The failure ``code`` is deliberately not searchable (query-spec §4.3).
        out = ["error"]
        _push(out, error.get("message"), "turn/end")
        return "\n".join(out)
    if kind == "aborted":
        return "aborted"  # the cancel cause is ignored
    if kind == "max-tokens":
        return "max-tokens"
    if kind == "interrupted":
        return "interrupted"
    return ""  # completed, blocked, and extension kinds


def _user_message_text(data: Any) -> str:
    if isinstance(data, dict):
        content = data.get("content")
    elif data is None:
        raise _shape_error("user/message", "data is null")
    else:
        content = None  # primitives/arrays have no ``content``: flatMap throws
    out: list[str] = []
    _collect_content(content, out, "user/message")
    return "\n".join(out)


def _assistant_message_text(data: Any) -> str:
    out: list[str] = []
    _collect_content(_message_content(data, "assistant/message"), out, "assistant/message")
    return "\n".join(out)


def _tool_call_text(data: Any) -> str:
    if type(data) is not dict:
        # null throws on the read; other values yield undefined parts that
        # throw on ``.trim()``.
        raise _shape_error("tool/call", "data.name/data.arguments are not readable")
    out: list[str] = []
    _push(out, data.get("name"), "tool/call")
    _push(out, data.get("arguments"), "tool/call")
    return "\n".join(out)


# Only the content-bearing types have a handler.  turn/start, step/start,
# step/end, assistant/chunk, request/header and every other or unknown type
# (session/title, compaction/*, plugin events, ...) yield "" by absence; a dict
# lookup keeps the common structural events to one hash probe.
_HANDLERS: Final[dict[str, Callable[[Any], str]]] = {
    "user/message": _user_message_text,
    "assistant/message": _assistant_message_text,
    "tool/call": _tool_call_text,
    "tool/result": _tool_result_text,
    "todo/write": _todo_text,
    "turn/end": _turn_end_text,
}


TEXT_EVENT_TYPES: Final = frozenset(_HANDLERS)
"""The only event types whose semantic text can be non-empty; every other type's is ``""``."""


def extract_event_text(event: Event) -> str:
    """``extractSessionEventText`` (query-spec §4.3): the semantic text of one event.

    Returns ``""`` for structural, envelope and unknown events.  The result is
    W-trimmed and ``\\n``-joined.  Raises :class:`TypeError` only where the
    reference would throw on a malformed payload (module docstring).
    """
    if type(event) is not dict:
        if event is None:
            raise TypeError("cannot extract semantic text from a null event")
        return ""  # JS reads ``undefined`` as the type of a primitive
    event_type = event.get("type")
    if type(event_type) is not str:
        return ""
    handler = _HANDLERS.get(event_type)
    if handler is None:
        return ""
    return handler(event.get("data"))


def codepoint_length(text: str) -> int:
    """Number of Unicode code points in ``text`` as JS ``[...text].length`` counts them.

    A Python ``str`` normally holds astral characters as single code points, so
    this is ``len(text)``; the slow path only exists for strings that carry a
    high/low surrogate pair as two separate code points (JS counts the pair
    once).  Lone surrogates count as one each, as in JS.
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return len(text)
    count = len(text)
    index = 0
    last = count - 1
    while index < last:
        if "\ud800" <= text[index] <= "\udbff" and "\udc00" <= text[index + 1] <= "\udfff":
            count -= 1
            index += 2
        else:
            index += 1
    return count


def build_documents(
    session_id: str,
    events: Sequence[Event],
    surfaces: Sequence[Surface],
    redact: bool = False,
) -> list[SessionEventSearchDocument]:
    """``buildSessionEventSearchDocuments`` given an already computed surface list.

    ``surfaces[i]`` is the classification of ``events[i]`` (query-spec §4.4); the
    caller runs the surface fold first, so an invalid log fails with
    ``SESSION_QUERY_INVALID_SURFACE`` before any extraction error, exactly as
    in the reference.  Returns one document per event whose extracted text is
    non-empty, in input order, which for a fold-validated log is ascending
    ``seq``.  Raises :class:`ValueError` when the two sequences differ in length
    and :class:`TypeError` for payloads the reference cannot extract.
    With ``redact`` (a sessionq extension) every detected secret in a text is
    replaced by its marker, as the indexer stores documents.
    """
    if len(events) != len(surfaces):
        raise ValueError(f"{len(events)} events but {len(surfaces)} surfaces")
    documents: list[SessionEventSearchDocument] = []
    append = documents.append
    for event, surface in zip(events, surfaces):
        text = extract_event_text(event)
        if text and redact:
            text = redact_secrets(text)
        if text:
            append(
                SessionEventSearchDocument(
                    session_id=session_id,
                    seq=event["seq"],
                    type=event["type"],
                    time=event["time"],
                    surface=surface,
                    text=text,
                )
            )
    return documents
