"""The text the model reads: one plain-text block per tool result.

Lines are joined with ``\\n`` and there is no trailing newline.  Times are UTC
ISO 8601 with exactly three fraction digits (:func:`format_instant`); ``—``
is U+2014 with a space on each side.  Nothing is truncated here: a host may
replace oversized output after the fact.

Hidden sessions never appear by id: a parent outside the workspace, the
ancestors beyond the first hidden one and every hidden descendant subtree are
shown only as fixed markers, the same whether the hidden session exists or
not.

All fixed sentences are sessionq's own wording.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Final

from msgspec import UNSET

from readmodel.projection.extraction import extract_event_text
from readmodel.core.jsvalues import js_float_string
from readmodel.tools.timestamps import format_instant
from readmodel.core.vocabulary import Event

DASH: Final = " \u2014 "
INDENT: Final = "   "

NO_SESSION_MATCHES: Final = "No earlier session in this workspace matches."
NO_EVENT_MATCHES: Final = "No earlier event in this session matches."
CAP_NOTICE: Final = "More matches exist than are listed here; use a more specific query or add filters to see them."
HIDDEN_PARENT: Final = "[not visible from this workspace]"
HIDDEN_ANCESTORS: Final = "[further ancestors are not visible from this workspace]"
HIDDEN_SUBTREE: Final = "[a branch that is not visible from this workspace]"
ROOT_SESSION: Final = "none (this session has no parent)"
UNTITLED: Final = "(no title)"
NO_TEXT: Final = "(no searchable text)"


@dataclass(frozen=True)
class TitleText:
    """A session's title for display: its text, or the reason it could not be read."""

    title: str | None = None
    failure_code: str | None = None

    def render(self) -> str:
        if self.failure_code is not None:
            return f"(title could not be read: {self.failure_code})"
        return self.title if self.title else UNTITLED


def title_text(observation: Any) -> TitleText:
    """The display title of a fulfilled title observation."""
    snapshot = getattr(observation, "title", UNSET)
    if snapshot is UNSET or snapshot is None:
        return TitleText()
    value = getattr(snapshot, "title", None)
    return TitleText(title=value if type(value) is str else None)


def availability(record: Any) -> str:
    """``live, persisted`` / ``live`` / ``persisted`` / ``unavailable``."""
    names = [name for name, flag in (("live", record.live), ("persisted", record.persisted)) if flag]
    return ", ".join(names) if names else "unavailable"


def _seq_list(values: Sequence[int]) -> str:
    return ", ".join(str(value) for value in values) if values else "none"


def _heading(session_id: str, title: TitleText) -> str:
    return f"Session {session_id}{DASH}{title.render()}"


def _hit_line(hit: Any) -> str:
    return f"seq {hit.seq} | {hit.type} | {hit.surface} | {format_instant(hit.time)}"


# --------------------------------------------------------------------------- searches


def render_session_search(
    hits: Sequence[Any], titles: Mapping[str, TitleText], visible_parents: Set[str], capped: bool
) -> str:
    """``session_search``: numbered sessions, each with its best match.

    A parent id is shown only when it is in ``visible_parents``; otherwise
    the hidden-parent marker stands in for it.
    """
    if not hits:
        return NO_SESSION_MATCHES
    lines = [f"Matching sessions ({len(hits)}):"]
    for number, hit in enumerate(hits, 1):
        header = hit.header
        session_id = header["id"]
        parent = header.get("parentSession")
        if parent is None:
            parent_text = "root"
        else:
            parent_text = parent if type(parent) is str and parent in visible_parents else HIDDEN_PARENT
        lines += [
            "",
            f"{number}. {_heading(session_id, titles[session_id])}",
            f"{INDENT}Created: {format_instant(header.get('createdAt'))}",
            f"{INDENT}Parent: {parent_text}",
            f"{INDENT}Availability: {availability(hit)}",
            f"{INDENT}Best match: {_hit_line(hit.best_match)}",
            f"{INDENT}Snippet: {hit.best_match.snippet}",
        ]
    if capped:
        lines += ["", CAP_NOTICE]
    return "\n".join(lines)


def render_event_search(session_id: str, title: TitleText, hits: Sequence[Any], capped: bool) -> str:
    """``session_event_search``: the session, then its matching events."""
    lines = [_heading(session_id, title), ""]
    if not hits:
        lines.append(NO_EVENT_MATCHES)
        return "\n".join(lines)
    lines.append(f"Matching events ({len(hits)}):")
    for number, hit in enumerate(hits, 1):
        lines += [f"{number}. {_hit_line(hit)}", f"{INDENT}Snippet: {hit.snippet}"]
    if capped:
        lines += ["", CAP_NOTICE]
    return "\n".join(lines)


# --------------------------------------------------------------------------- lineage


@dataclass(frozen=True)
class VisibleLineage:
    """A lineage trace reduced to what the caller may see.

    ``descendants`` is a preorder list of ``(depth, record)``; ``record`` is
    ``None`` for a hidden subtree (one entry per pruned subtree).
    """

    target: Any
    ancestors: list[Any]
    boundary: bool
    descendants: list[tuple[int, Any]]


def _lineage_entry(record: Any, titles: Mapping[str, TitleText]) -> str:
    header = record.header
    session_id = header["id"]
    created = format_instant(header.get("createdAt"))
    return f"{session_id}{DASH}{titles[session_id].render()} | {created} | {availability(record)}"


def render_lineage(lineage: VisibleLineage, titles: Mapping[str, TitleText]) -> str:
    """``session_trace``: the target, its visible ancestors and its visible descendants."""
    target = lineage.target
    header = target.header
    lines = [
        _heading(header["id"], titles[header["id"]]),
        f"Created: {format_instant(header.get('createdAt'))}",
        f"Availability: {availability(target)}",
        "",
        "Ancestors (closest first):",
    ]
    if not lineage.ancestors and not lineage.boundary:
        lines.append(f"- {ROOT_SESSION}")
    lines += [f"- {_lineage_entry(record, titles)}" for record in lineage.ancestors]
    if lineage.boundary:
        lines.append(f"- {HIDDEN_ANCESTORS}")
    lines += ["", "Descendants:"]
    if not lineage.descendants:
        lines.append("- none")
    for depth, record in lineage.descendants:
        entry = HIDDEN_SUBTREE if record is None else _lineage_entry(record, titles)
        lines.append(f"{'  ' * depth}- {entry}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- exact reads


def render_event_trace(session_id: str, title: TitleText, trace: Any) -> str:
    """``session_event_trace``: seven lines about one event's relations."""
    replaced_by = trace.replaced_by
    return "\n".join(
        [
            _heading(session_id, title),
            f"Target: {_hit_line(trace.target)}",
            f"Replaced by: {'none' if replaced_by is UNSET or replaced_by is None else replaced_by}",
            f"Replacement chain: {_seq_list(trace.replacement_chain)}",
            f"Replaces: {_seq_list(trace.replaced_event_seqs)}",
            f"Cites as sources: {_seq_list(trace.source_event_seqs)}",
            f"Derived events: {_seq_list(trace.derived_event_seqs)}",
        ]
    )


def plain_json(value: Any) -> Any:
    """A copy made of plain ``dict``/``list`` only (reads hand out frozen
    subclasses, which the extractor's exact type checks do not accept); iterative."""
    if not isinstance(value, (dict, list)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, (dict, list)):
                copy: Any = {} if isinstance(item, dict) else []
                stack.append((item, copy))
                item = copy
            if isinstance(target, dict):
                target[key] = item
            else:
                target.append(item)
    return root


def _semantic_text(event: Event) -> str:
    try:
        return extract_event_text(plain_json(event))
    except (TypeError, ValueError, KeyError, AttributeError):
        return ""  # a payload the extractor cannot read has no searchable text


def _summary(event: Event) -> str:
    line = f"- seq {event.get('seq')} | {event.get('type')} | {format_instant(event.get('time'))}"
    text = _semantic_text(event)
    if not text:
        return f"{line} | {NO_TEXT}"
    return f"{line}\n  " + text.replace("\n", "\n  ")


def render_event_read(session_id: str, title: TitleText, window: Any) -> str:
    """``session_event_read``: the whole target event as JSON, then neighbour summaries."""
    target = window.target
    seq = target.get("seq")
    lines = [_heading(session_id, title), f"Event seq {seq}:", "```json", pretty_json(target), "```"]
    before = [event for event in window.events if _seq_before(event, seq)]
    after = [event for event in window.events if _seq_before(seq, event)]
    if before:
        lines += ["", "Before:", *(_summary(event) for event in before)]
    if after:
        lines += ["", "After:", *(_summary(event) for event in after)]
    return "\n".join(lines)


def _seq_of(value: Any) -> Any:
    return value.get("seq") if isinstance(value, dict) else value


def _seq_before(first: Any, second: Any) -> bool:
    a, b = _seq_of(first), _seq_of(second)
    return type(a) in (int, float) and type(b) in (int, float) and a < b


# --------------------------------------------------------------------------- JSON


_encode_string = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _json_string(text: str) -> str:
    """A JSON string as JS ``JSON.stringify`` writes it (lone surrogates escaped)."""
    encoded = _encode_string(text)
    if not any("\ud800" <= char <= "\udfff" for char in encoded):
        return encoded
    out: list[str] = []
    index, length = 0, len(encoded)
    while index < length:
        char = encoded[index]
        if "\ud800" <= char <= "\udbff" and index + 1 < length and "\udc00" <= encoded[index + 1] <= "\udfff":
            out.append(char + encoded[index + 1])
            index += 2
            continue
        out.append(f"\\u{ord(char):04x}" if "\ud800" <= char <= "\udfff" else char)
        index += 1
    return "".join(out)


def _json_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return js_float_string(value) if math.isfinite(value) else "null"
    if type(value) is str:
        return _json_string(value)
    return _json_string(str(value))


def _json_tokens(value: Any) -> Iterator[str]:
    """``JSON.stringify(value, null, 2)`` as text pieces, with an explicit stack (any depth)."""
    stack: list[Any] = [(value, 0)]
    while stack:
        item = stack.pop()
        if type(item) is str:
            yield item
            continue
        node, depth = item
        if isinstance(node, dict) and node:
            pad, inner = "\n" + "  " * depth, "\n" + "  " * (depth + 1)
            parts: list[Any] = ["{"]
            for index, (key, child) in enumerate(node.items()):
                parts.append(("," if index else "") + inner + _json_string(str(key)) + ": ")
                parts.append((child, depth + 1))
            parts.append(pad + "}")
            stack.extend(reversed(parts))
        elif isinstance(node, list) and node:
            pad, inner = "\n" + "  " * depth, "\n" + "  " * (depth + 1)
            parts = ["["]
            for index, child in enumerate(node):
                parts.append(("," if index else "") + inner)
                parts.append((child, depth + 1))
            parts.append(pad + "]")
            stack.extend(reversed(parts))
        elif isinstance(node, dict):
            yield "{}"
        elif isinstance(node, list):
            yield "[]"
        else:
            yield _json_scalar(node)


def pretty_json(value: Any) -> str:
    """Two-space indented JSON in insertion key order, as JS ``JSON.stringify(v, null, 2)``."""
    return "".join(_json_tokens(value))
