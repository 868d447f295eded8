"""A session's transcript as one self-contained HTML file (a sessionq extension).

The file reads offline and without scripts: one document, the stylesheet
inline (light and dark from ``prefers-color-scheme``), no external resource of
any kind (a ``Content-Security-Policy`` meta tag forbids scripts and loads as
a second line of defence), the transcript as the web page shows it:

* messages as markdown (:mod:`readmodel.export.markdown`, the page's rules:
  a ``<script>`` or a ``javascript:`` link in a message stays inert text);
* tool calls collapsed (``<details>``) and paired with their results: the
  output sits inside the call, as on the page, and the result's own event is a
  one-line link back to it (the output is written once);
* reasoning collapsed; a text longer than ``long_text`` characters shows its
  start and the whole of it in a collapsed "show all N characters";
* log-only events (turn and step markers, streamed chunks, ``tool/call``)
  left out unless asked for;
* every event keeps its number, type, surface, replacements and time (UTC),
  and ``#seq-N`` anchors link events within the file.

Memory stays bounded whatever the session's size: events are read in ranges
(``readEventRange``) twice — a first pass learns which result answers which
call, the second writes the document chunk by chunk.  A result that lies
beyond the range being written is read on its own.

:func:`prepare_transcript` resolves the session (raising the read's
``SessionQueryError``, e.g. not found) before anything is written, so an HTTP
adapter can still answer 404; :meth:`HtmlTranscript.chunks` then yields the
UTF-8 bytes of the document.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any, Final, Protocol


from readmodel.core.jsvalues import js_string
from readmodel.export.markdown import render as render_markdown

LONG_TEXT: Final = 4000
"""Characters (UTF-16 code units, as the page counts) shown before "show all"."""

RANGE: Final = 500
"""Events per range read."""

TRANSCRIPT_CSS: Final = Path(__file__).with_name("transcript.css")
"""The transcript rules, shared with the web page (``/static/transcript.css``)."""

STYLE: Final = Path(__file__).with_name("export.css").read_text(encoding="utf-8") + TRANSCRIPT_CSS.read_text(encoding="utf-8")

_CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_ICON: Final = (
    "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Crect width='16' "
    "height='16' rx='3' fill='%2320232a'/%3E%3Ccircle cx='7' cy='7' r='3.5' fill='none' stroke='%23ffe066' "
    "stroke-width='1.8'/%3E%3Cpath d='M9.5 9.5l3.5 3.5' stroke='%23ffe066' stroke-width='1.8'/%3E%3C/svg%3E"
)


class RangeReader(Protocol):
    """What the transcript reads: ``SessionQuery.read_event_range``."""

    def read_event_range(self, session_id: str, start_seq: Any, limit: Any, *, redact: bool | None = None) -> Any: ...


@dataclass(frozen=True)
class TranscriptOptions:
    """How the transcript is written.

    ``include_log_only``: also the log-only events (and turn dividers);
    ``redact``: detected secrets replaced by markers in everything written
    (the raw events are as logged: the ``--redact all`` policy);
    ``long_text``: characters of a long text shown before "show all";
    ``range_size``: events per read.
    """

    include_log_only: bool = False
    redact: bool = False
    long_text: int = LONG_TEXT
    range_size: int = RANGE


# --------------------------------------------------------------------------- text helpers


def _t(value: str) -> str:
    return escape(value, quote=False)


def _a(value: str) -> str:
    return escape(value, quote=True)


def _units(value: str) -> int:
    """JavaScript's ``length``: UTF-16 code units."""
    return len(value) + sum(1 for ch in value if ord(ch) > 0xFFFF)


def _cut(value: str, units: int) -> str:
    """The longest prefix of ``value`` of at most ``units`` UTF-16 code units."""
    if len(value) <= units // 2:
        return value
    taken = 0
    for index, ch in enumerate(value):
        taken += 2 if ord(ch) > 0xFFFF else 1
        if taken > units:
            return value[:index]
    return value


def _count(n: int) -> str:
    return f"{n:,}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _js(value: Any, indent: int | None = None) -> str:
    """``JSON.stringify`` (``""`` for a value it cannot write)."""
    try:
        if indent is None:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return json.dumps(value, ensure_ascii=False, indent=indent)
    except (TypeError, ValueError):
        return ""


def _str(value: Any) -> str:
    """A header or data field that should be text (logs may hold anything)."""
    return value if isinstance(value, str) else _js(value)


def _when(ms: Any) -> str:
    """A time in UTC; an unknown one (0, missing, not a number) says so."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not ms > 0:
        return '<span class="time-unknown" title="no time recorded">unknown</span>'
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return '<span class="time-unknown" title="no time recorded">unknown</span>'
    stamp = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f'<time datetime="{stamp}">{moment:%Y-%m-%d %H:%M:%S} UTC</time>'


def _content(event: Mapping[str, Any]) -> Sequence[Any] | None:
    data = event.get("data")
    if not isinstance(data, Mapping):
        return None
    if isinstance(data.get("content"), list):
        return data["content"]  # type: ignore[no-any-return]
    message = data.get("message")
    if isinstance(message, Mapping) and isinstance(message.get("content"), list):
        return message["content"]  # type: ignore[no-any-return]
    return None


def _blocks(event: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for block in _content(event) or ():
        if isinstance(block, Mapping):
            yield block


def _seq_link(seq: int) -> str:
    return f'<a href="#seq-{seq}">#{seq}</a>'


# --------------------------------------------------------------------------- the document


@dataclass
class _Call:
    seq: int
    name: str
    shown: bool  # its event is written: the result goes inside it


@dataclass
class HtmlTranscript:
    """A prepared transcript: the session resolved, calls and results paired."""

    reader: RangeReader
    session_id: str
    header: Mapping[str, Any]
    event_count: int
    title: str | None
    options: TranscriptOptions
    exported_at: datetime
    calls: dict[str, _Call] = field(default_factory=dict)
    results: dict[str, int] = field(default_factory=dict)  # call id -> seq of its (first) result
    surfaces: dict[str, int] = field(default_factory=lambda: {"current": 0, "shadowed": 0, "log-only": 0})
    replacements: int = 0

    # ----------------------------------------------------------------- reading

    def _ranges(self, start: int = 0) -> Iterator[tuple[list[dict[str, Any]], list[Any]]]:
        """(events, records) ranges up to the event count captured at preparation."""
        seq = start
        while seq < self.event_count:
            limit = min(self.options.range_size, self.event_count - seq)
            got = self._read(seq, limit)
            events = list(got.events)
            if not events:
                return  # the log shrank under us (rewritten): the file ends where it does
            yield events, list(got.records)
            seq += len(events)

    def _read(self, seq: int, limit: int) -> Any:
        """Events ``seq ..`` from the reader.  Redacted by the engine, which knows the
        chunk runs: a secret streamed across ``assistant/chunk`` events is removed from
        every piece (redacting each event alone would leave the pieces readable)."""
        if self.options.redact:
            return self.reader.read_event_range(self.session_id, seq, limit, redact=True)
        return self.reader.read_event_range(self.session_id, seq, limit)

    def _learn(self) -> None:
        for events, records in self._ranges():
            for event, record in zip(events, records):
                surface = record.surface
                self.surfaces[surface] = self.surfaces.get(surface, 0) + 1
                if record.replaces:
                    self.replacements += 1
                shown = self.options.include_log_only or surface != "log-only"
                for block in _blocks(event):
                    if block.get("type") == "tool-call" and isinstance(block.get("id"), str) and block["id"]:
                        self.calls.setdefault(block["id"], _Call(record.seq, _str(block.get("name") or "tool"), shown))
                    elif block.get("type") == "tool-result" and isinstance(block.get("toolCallId"), str):
                        self.results.setdefault(block["toolCallId"], record.seq)

    def _result_block(self, call_id: str, window: Mapping[int, Mapping[str, Any]]) -> tuple[int, Mapping[str, Any]] | None:
        """The result of ``call_id`` (its seq and block), from the range being
        written or read on its own."""
        seq = self.results.get(call_id)
        if seq is None:
            return None
        event = window.get(seq)
        if event is None:
            got = self._read(seq, 1)
            if not got.events:
                return None
            event = got.events[0]
        for block in _blocks(event):
            if block.get("type") == "tool-result" and block.get("toolCallId") == call_id:
                return seq, block
        return None

    # ----------------------------------------------------------------- writing

    def chunks(self) -> Iterator[bytes]:
        """The document, as UTF-8 bytes in chunks (a lone surrogate becomes ``?``)."""
        yield self._head().encode("utf-8", "replace")
        for events, records in self._ranges():
            window = {event["seq"]: event for event in events if isinstance(event.get("seq"), int)}
            out: list[str] = []
            for event, record in zip(events, records):
                if record.surface == "log-only" and not self.options.include_log_only:
                    continue
                out.append(self._row(event, record, window))
            yield "".join(out).replace("\x00", "\ufffd").encode("utf-8", "replace")
        yield self._tail().encode("utf-8", "replace")

    def _head(self) -> str:
        header = self.header
        session_id = _str(header.get("id", self.session_id))
        name = self.title or session_id
        meta = [f'<code class="cwd" title="working directory">{_t(_str(header["cwd"])) if header.get("cwd") else "(no cwd)"}</code>']
        meta.append(f'<span class="created">created {_when(header.get("createdAt"))}</span>')
        if self.title:
            meta.append(f'<code class="sid">{_t(session_id)}</code>')
        if header.get("origin"):
            meta.append(f"<span>{_t(_str(header['origin']))}</span>")
        if header.get("parentSession"):
            meta.append(f'<span>child of <code>{_t(_str(header["parentSession"]))}</code></span>')
        counts = [
            f'<span class="event-count">{_plural(self.event_count, "event")}</span>',
            f"<span>{self.surfaces.get('current', 0)} current</span>",
            f"<span>{self.surfaces.get('shadowed', 0)} shadowed</span>",
            f"<span>{self.surfaces.get('log-only', 0)} log-only</span>",
            f"<span>{_plural(self.replacements, 'replacement')}</span>",
        ]
        left_out = self.surfaces.get("log-only", 0)
        note = (
            f'<p class="hint">{_plural(left_out, "log-only event")} (turn and step markers, streamed chunks, tool-call '
            "records) left out of this file.</p>"
            if left_out and not self.options.include_log_only
            else ""
        )
        return (
            '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<meta name="color-scheme" content="light dark">\n'
            '<meta name="generator" content="sessionq">\n'
            f"<title>{_t(name)} · sessionq transcript</title>\n"
            f'<link rel="icon" href="{_ICON}">\n'
            f"<style>\n{STYLE}</style>\n</head>\n<body>\n"
            '<header><span class="brand">sessionq</span> <span class="what">session transcript</span></header>\n'
            '<main id="main">\n'
            f'<h1 class="session-title">{_t(name)}</h1>\n'
            f'<div class="meta">{"".join(meta)}</div>\n'
            f'<section class="panel surface-summary" aria-label="Surface"><div class="meta">{"".join(counts)}</div>{note}</section>\n'
            '<section class="events" aria-label="Events">\n'
        )

    def _tail(self) -> str:
        stamp = self.exported_at.astimezone(timezone.utc)
        return (
            "</section>\n</main>\n"
            f'<footer><p class="meta">Exported by sessionq on {stamp:%Y-%m-%d %H:%M:%S} UTC from the index '
            f"({_plural(self.event_count, 'event')}). A self-contained file: it loads nothing and runs no script.</p></footer>\n"
            "</body>\n</html>\n"
        )

    def _row(self, event: Mapping[str, Any], record: Any, window: Mapping[int, Mapping[str, Any]]) -> str:
        seq = record.seq
        surface = record.surface
        kind = _str(event.get("type"))
        body, compact = self._body(event, kind, window)
        badges = [f'<span class="badge surface {surface}" title="surface: {surface}">{surface}</span>']
        if record.replaces:
            links = ", ".join(_seq_link(s) for s in record.replaces)
            badges.append(f'<span class="badge replacement">replaces {links}</span>')
        if record.replaced_by is not None:
            badges.append(f'<span class="badge shadowed replaced-by">replaced by {_seq_link(record.replaced_by)}</span>')
        classes = ["event", surface]
        if record.replaces:
            classes.append("replacement")
        if compact and surface == "log-only":
            classes.append("compact")
        divider = ""
        data = event.get("data")
        if kind == "turn/start" and isinstance(data, Mapping):
            divider = f'<div class="turn-divider">Turn {_t(_str(data.get("turn")))}</div>\n'
        return (
            f'{divider}<div class="{" ".join(classes)}" id="seq-{seq}" data-seq="{seq}" data-type="{_a(kind)}">'
            f'<div class="head"><a class="seq" href="#seq-{seq}">#{seq}</a><span class="type">{_t(kind)}</span>'
            f'{"".join(badges)}<span class="time">{_when(event.get("time"))}</span></div>'
            f'<div class="body">{body}</div></div>\n'
        )

    # ----------------------------------------------------------------- bodies (the page's transcript.js)

    def _text(self, value: str, markdown: bool) -> str:
        def draw(text: str) -> str:
            return f'<div class="md">{render_markdown(text)}</div>' if markdown else f'<pre class="output"><code>{_t(text)}</code></pre>'

        units = _units(value)
        if units <= self.options.long_text:
            return draw(value)
        return (
            f'<div class="long-text" data-length="{units}"><div class="preview">{draw(_cut(value, self.options.long_text))}'
            f'<p class="meta cut">… cut at {_count(self.options.long_text)} characters</p></div>'
            f'<details class="show-all"><summary>show all {_count(units)} characters</summary>{draw(value)}</details></div>'
        )

    def _result_body(self, block: Mapping[str, Any]) -> str:
        parts = []
        content = block.get("content")
        for b in content if isinstance(content, list) else ():
            if isinstance(b, Mapping) and isinstance(b.get("text"), str):
                parts.append(self._text(b["text"], False))
            elif isinstance(b, Mapping) and b.get("type") == "image":
                parts.append(self._image(b))
            else:
                parts.append(self._text(_js(b), False))
        return "".join(parts) or '<span class="meta">(empty result)</span>'

    @staticmethod
    def _image(block: Mapping[str, Any]) -> str:
        attachment = block.get("attachment")
        ident = _str(attachment.get("attachmentId", "")) if isinstance(attachment, Mapping) else ""
        return f'<span class="meta">[image {_t(ident)}]</span>'

    @staticmethod
    def _chars(block: Mapping[str, Any]) -> int:
        content = block.get("content")
        return sum(_units(b["text"]) for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str)) if isinstance(content, list) else 0

    def _tool_call(self, block: Mapping[str, Any], window: Mapping[int, Mapping[str, Any]]) -> str:
        call_id = block.get("id")
        found = self._result_block(call_id, window) if isinstance(call_id, str) and call_id else None
        if found is None:
            status, output, error = "· no result", "", False
        else:
            seq, result = found
            error = bool(result.get("isError"))
            badge = ' <span class="badge error-badge">error</span>' if error else ""
            status = f"· result {_seq_link(seq)}{badge}"
            output = f'<div class="meta">result:</div>{self._result_body(result)}'
        args = block.get("arguments")
        name = _str(block.get("name") or "tool")
        return (
            f'<details class="tool-call" data-call-id="{_a(call_id if isinstance(call_id, str) else "")}">'
            f'<summary><span class="tool-name">{_t(name)}</span> <code class="tool-args">{_t(_brief(args))}</code> '
            f'<span class="tool-status meta">{status}</span></summary>'
            f'<pre class="args"><code>{_t(_pretty(args))}</code></pre>'
            f'<div class="tool-output{" is-error" if error else ""}">{output}</div></details>'
        )

    def _tool_result(self, block: Mapping[str, Any], seq: int) -> str:
        call_id = block.get("toolCallId")
        call = self.calls.get(call_id) if isinstance(call_id, str) else None
        error = ' <span class="badge error-badge">error</span>' if block.get("isError") else ""
        size = f" · {_count(self._chars(block))} characters"
        if call is not None and call.shown and call.seq < seq and self.results.get(call_id) == seq:  # type: ignore[arg-type]
            return (
                f'<span class="line tool-result-ref">{error}result of <span class="tool-name">{_t(call.name)}</span> '
                f'{_seq_link(call.seq)}<span class="meta">{size} (shown with the call)</span></span>'
            )
        named = f'<span class="tool-name">{_t(call.name)}</span> {_seq_link(call.seq)}' if call else '<span class="tool-name">tool call</span>'
        return (
            f'<details class="tool-result{" is-error" if error else ""}"><summary>{error} result of {named}'
            f'<span class="meta">{size}</span></summary>{self._result_body(block)}</details>'
        )

    def _block(self, b: Any, seq: int, window: Mapping[int, Mapping[str, Any]]) -> str:
        if not isinstance(b, Mapping):
            return ""
        kind = b.get("type")
        if kind == "text":
            return self._text(_str(b.get("text") or ""), True)
        if kind in ("reasoning", "thinking"):
            text = _str(b.get("text") or "")
            return (
                f'<details class="reasoning"><summary>Reasoning<span class="meta"> · {_count(_units(text))} characters</span></summary>'
                f"{self._text(text, True)}</details>"
            )
        if kind == "tool-call":
            return self._tool_call(b, window)
        if kind == "tool-result":
            return self._tool_result(b, seq)
        if kind == "image":
            return self._image(b)
        return self._text(b["text"], True) if isinstance(b.get("text"), str) else self._text(_js(b), False)

    def _body(self, event: Mapping[str, Any], kind: str, window: Mapping[int, Mapping[str, Any]]) -> tuple[str, bool]:
        """The body of ``event`` and whether it is one line."""
        raw = event.get("data")
        data: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        seq = event.get("seq") if isinstance(event.get("seq"), int) else -1

        def line(text: str) -> tuple[str, bool]:
            return f'<span class="line">{_t(text)}</span>', True

        def js(value: Any) -> str:  # a value as JavaScript writes it into a string
            return "undefined" if value is None else js_string(value)

        if kind == "turn/start":
            return line(f"turn {js(data.get('turn'))}")
        if kind == "turn/end":
            reason = data.get("reason") if isinstance(data.get("reason"), Mapping) else {}
            error = reason.get("error") if isinstance(reason.get("error"), Mapping) else {}
            detail = f": {_str(error['message'])}" if error.get("message") else ""
            return line(f"turn {js(data.get('turn'))} ended ({js(reason.get('kind'))}{detail})")
        if kind in ("step/start", "step/end"):
            return line(f"turn {js(data.get('turn'))}, step {js(data.get('step'))}")
        if kind == "assistant/chunk":
            chunk = data.get("chunk") if isinstance(data.get("chunk"), Mapping) else {}
            text = chunk.get("text")
            return line(_js(text) if isinstance(text, str) else _str(chunk.get("type") or ""))
        if kind == "session/title":
            return line(f"title: {js(data.get('title'))}")
        if kind == "tool/call":
            return f'<span class="call">→ {_t(js(data.get("name")))} {_t(_brief(data.get("arguments")))}</span>', True
        if kind in ("compaction/start", "compaction/end"):
            return line(f"compaction {js(data.get('compactionId'))}")
        if kind == "compaction/summary":
            shadowed = data.get("shadowedSeqs")
            span = data.get("shadowedRange")
            note = "summary of " + _plural(len(shadowed) if isinstance(shadowed, list) else 0, "event")
            if isinstance(span, Mapping):
                note += f" (#{js(span.get('start'))}–#{js(span.get('end'))})"
            tokens = data.get("shadowedTokenCount")
            if isinstance(tokens, (int, float)) and not isinstance(tokens, bool):
                note += f", {_js(tokens)} tokens"
            summary = data.get("summary")
            blocks = "".join(self._block(b, seq, window) for b in (summary if isinstance(summary, list) else ()))
            return f'<div class="message"><div class="meta">{_t(note)}</div>{blocks}</div>', False
        if kind == "subagent/descriptor":
            mode = f" ({js(data.get('mode'))})" if data.get("mode") else ""
            return line(f"subagent: {_str(data.get('label') or '')}{mode}")
        content = _content(event)
        if content is not None:
            return '<div class="message">' + "".join(self._block(b, seq, window) for b in content) + "</div>", False
        return self._text(_js(raw if raw is not None else {}), False), True


def _brief(args: Any) -> str:
    text = args if isinstance(args, str) else _js(args)
    try:
        text = _js(json.loads(text))
    except ValueError:
        pass
    return text[:117] + "…" if len(text) > 120 else text


def _pretty(args: Any) -> str:
    if not isinstance(args, str):
        return _js(args, 2)
    try:
        return _js(json.loads(args), 2)
    except ValueError:
        return args


def session_title(reader: Any, session_id: str) -> str | None:
    """The session's title through ``reader.read_title`` (``SessionQuery``), or
    ``None``: a title is decoration, so failing to read one is not an error."""
    try:
        snapshot = reader.read_title(session_id)
    except Exception:  # noqa: BLE001
        return None
    title = getattr(snapshot, "title", None)
    return title if isinstance(title, str) and title else None


def prepare_transcript(
    reader: RangeReader,
    session_id: str,
    *,
    title: str | None = None,
    options: TranscriptOptions = TranscriptOptions(),
    exported_at: datetime | None = None,
) -> HtmlTranscript:
    """The transcript of ``session_id`` ready to write (:meth:`HtmlTranscript.chunks`).

    Reads the session's events once (pairing calls with results); raises the
    read's ``SessionQueryError`` (``SESSION_QUERY_SESSION_NOT_FOUND`` …) before
    anything is written.  ``title`` is the session's title when it has one.
    """
    probe = reader.read_event_range(session_id, 0, 1)
    transcript = HtmlTranscript(
        reader=reader,
        session_id=session_id,
        header=probe.session,
        event_count=probe.event_count,
        title=title if isinstance(title, str) and title else None,
        options=options,
        exported_at=exported_at or datetime.now(timezone.utc),
    )
    transcript._learn()
    return transcript
