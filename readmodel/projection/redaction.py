"""Redaction of raw events and log lines, streamed chunks included (a sessionq extension).

:mod:`readmodel.projection.secrets` finds secrets in one text.  A raw log is
harder: the harness streams an assistant message as ``assistant/chunk``
events, each carrying a piece of a content block (``text``, or a tool call's
``argumentsDelta``), so a secret can arrive cut into pieces none of which a
rule recognises alone.  This module redacts *streams*:

* A **run** is a maximal sequence of consecutive ``assistant/chunk`` events
  (a packed chunk row expands to consecutive events, so runs are the same in
  the log's lines and in its events).  Within a run the pieces of one block —
  same turn, step, chunk type, index and call id — are assembled in order, the
  assembled text is redacted, and the redacted spans are mapped back onto the
  pieces that carried them: the piece in which a secret starts shows its
  marker, every later piece of the same secret shows nothing of it, and the
  parts of each piece outside any secret are kept.  So the pieces of a block,
  joined, are exactly ``redact(assembled)``, and no piece keeps a character
  of a detected secret (:func:`redact_pieces`).
* Every event (or line) is then redacted as JSON text, which catches secrets
  inside one event exactly as before.

Three readers share these rules and agree piece for piece: the engine's raw
reads (:func:`redact_events`, :func:`redacted_window` for a window read with
its runs as context), the model tools (through the engine), and the export
(:func:`redacted_log_lines`).  Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Final

import msgspec

from readmodel.projection.extraction import extract_event_text
from readmodel.projection.secrets import REDACTED_MARK, find_secrets, marker
from readmodel.projection.secrets import redact as redact_text

CHUNK_TYPE: Final = "assistant/chunk"
_PIECE_FIELDS: Final = {"text-delta": "text", "reasoning-delta": "text", "tool-call-delta": "argumentsDelta"}
# Packed chunk rows (format-spec §4): row tag → (member chunk type, field of the pieces in ``data``).
_ROW_PIECES: Final = {"text-chunks": ("text-delta", "texts"), "reasoning-chunks": ("reasoning-delta", "texts"), "tool-call-chunks": ("tool-call-delta", "args")}
RUN_BUFFER_LIMIT: Final = 32 << 20
"""Characters of chunk lines the export holds while a run lasts; a longer run is redacted in parts."""

Event = dict[str, Any]


def _hashable(value: Any) -> Hashable:
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def _block_key(data: Any, chunk_type: str, index: Any, call_id: Any) -> Hashable:
    turn, step = (data.get("turn"), data.get("step")) if type(data) is dict else (None, None)
    return (_hashable(turn), _hashable(step), chunk_type, _hashable(index), _hashable(call_id))


def chunk_piece(event: Any) -> tuple[Hashable, str, str] | None:
    """``(block key, field, text)`` of a streamed piece of text, or ``None``."""
    if type(event) is not dict or event.get("type") != CHUNK_TYPE:
        return None
    data = event.get("data")
    chunk = data.get("chunk") if type(data) is dict else None
    if type(chunk) is not dict:
        return None
    chunk_type = chunk.get("type")
    field = _PIECE_FIELDS.get(chunk_type) if type(chunk_type) is str else None
    text = chunk.get(field) if field is not None else None
    if type(text) is not str:
        return None
    return _block_key(data, chunk_type, chunk.get("index"), chunk.get("id")), field, text  # type: ignore[arg-type]


def redact_pieces(keys: Sequence[Hashable], texts: Sequence[str]) -> list[str]:
    """``texts`` (pieces of blocks, in stream order) with the secrets of each block removed.

    Contract: for every block key, the redacted pieces joined equal
    ``redact(original pieces joined)``; a secret's marker is in the piece
    where the secret starts, and no piece keeps a character of a secret.
    """
    out = list(texts)
    blocks: dict[Hashable, list[int]] = {}
    for position, key in enumerate(keys):
        blocks.setdefault(key, []).append(position)
    for positions in blocks.values():
        assembled = "".join(texts[position] for position in positions)
        spans = find_secrets(assembled)
        if not spans:
            continue
        offset = 0
        for position in positions:
            start = offset
            end = offset = start + len(texts[position])
            touching = [span for span in spans if span.start < end and span.end > start]
            if not touching:
                continue
            parts: list[str] = []
            cursor = start
            for span in touching:  # disjoint and ascending
                if span.start > cursor:
                    parts.append(assembled[cursor : span.start])
                if span.start >= start:  # the secret starts here: its marker; later pieces show nothing of it
                    parts.append(marker(span.kind))
                cursor = min(span.end, end)
            parts.append(assembled[cursor:end])
            out[position] = "".join(parts)
    return out


def _redact_value(value: Any) -> Any:
    """``value`` (an event or a line's JSON value) redacted as JSON text; itself when nothing is found."""
    try:
        text = msgspec.json.encode(value).decode("utf-8")
    except (TypeError, OverflowError, UnicodeError):  # lone surrogates, integers past 64 bits
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    redacted = redact_text(text)
    return value if redacted is text else json.loads(redacted)


def _redact_runs(events: list[Any]) -> list[Any]:
    """``events`` with the pieces of every chunk run redacted (changed events are fresh copies)."""
    out = list(events)
    position, count = 0, len(events)
    while position < count:
        if type(events[position]) is not dict or events[position].get("type") != CHUNK_TYPE:
            position += 1
            continue
        end = position
        while end < count and type(events[end]) is dict and events[end].get("type") == CHUNK_TYPE:
            end += 1
        pieces = [(index, piece) for index in range(position, end) if (piece := chunk_piece(events[index])) is not None]
        redacted = redact_pieces([piece[0] for _, piece in pieces], [piece[2] for _, piece in pieces])
        for (index, (_key, field, text)), new in zip(pieces, redacted):
            if new != text:
                event = events[index]
                chunk = {**event["data"]["chunk"], field: new}
                out[index] = {**event, "data": {**event["data"], "chunk": chunk}}
        position = end
    return out


def redact_events(events: Sequence[Any]) -> list[Any]:
    """Raw events with every detected secret replaced by its marker, streamed pieces included.

    Events without a secret are returned as they are (the same objects).
    """
    return [_redact_value(event) for event in _redact_runs(list(events))]


def _is_chunk(event: Any) -> bool:
    return type(event) is dict and event.get("type") == CHUNK_TYPE


def redacted_window(read: Callable[[int, int], Sequence[Any]], first: int, last: int, count: int, page: int = 256) -> list[Any]:
    """Events ``first..last`` (positions in a log of ``count`` events), redacted with their runs as context.

    ``read(a, b)`` returns the events at positions ``a..b``.  A window that
    starts or ends inside a chunk run is widened (``page`` events at a time)
    to the whole run first, so each piece is redacted exactly as a read of the
    whole log redacts it; only the window's events are returned.
    """
    if last < first:
        return []
    events = list(read(first, last))
    lo, hi = first, first + len(events) - 1
    while lo > 0 and events and _is_chunk(events[0]):
        before = list(read(max(0, lo - page), lo - 1))
        if not before:
            break
        lo -= len(before)
        events[:0] = before
        if not all(map(_is_chunk, before)):
            break
    while hi < count - 1 and events and _is_chunk(events[-1]):
        after = list(read(hi + 1, min(count - 1, hi + page)))
        if not after:
            break
        hi += len(after)
        events.extend(after)
        if not all(map(_is_chunk, after)):
            break
    redacted = _redact_runs(events)
    return [_redact_value(event) for event in redacted[first - lo : first - lo + (last - first + 1)]]


def read_window(read: Callable[[int, int], Sequence[Any]], first: int, last: int, count: int, redact: bool) -> list[Any]:
    """``read(first, last)``, or with ``redact`` :func:`redacted_window` of it."""
    return redacted_window(read, first, last, count) if redact else list(read(first, last))


def list_reader(events: Sequence[Any]) -> Callable[[int, int], Sequence[Any]]:
    """A ``read(a, b)`` over events held in memory (a live session's log)."""
    return lambda first, last: events[first : last + 1]


def restored_documents(
    documents: list[tuple[int, str, Any, int, str]], raw_at: Callable[[list[int]], dict[int, Any]]
) -> list[tuple[int, str, Any, int, str]]:
    """Stored documents ``(seq, type, time, surface, text)``, with the exact extracted text restored
    where the index had to substitute U+FFFD (NUL, highlight markers, lone surrogates).

    ``raw_at(seqs)`` gives those events.  The restored text must not bring
    back a secret the indexer redacted: a stored marker means redaction ran,
    and redacting the restored text again is exact (it changes nothing but
    the detected spans).
    """
    damaged = [index for index, document in enumerate(documents) if "\ufffd" in document[4]]
    if not damaged:
        return documents
    raw = raw_at([documents[index][0] for index in damaged])
    for index in damaged:
        seq, etype, time, surface, stored = documents[index]
        text = extract_event_text(raw[seq])
        documents[index] = (seq, etype, time, surface, redact_text(text) if REDACTED_MARK in stored else text)
    return documents


def redact_titles(results: list[Any]) -> list[Any]:
    """Title observation results (``readTitleSnapshots``) with secrets in their titles replaced by markers.

    Fulfilled results whose title text changes are replaced by copies; the rest are kept.
    """
    out = []
    for result in results:
        value = getattr(result, "value", None)
        snapshot = getattr(value, "title", None)
        text = getattr(snapshot, "title", None)
        if type(text) is str and (redacted := redact_text(text)) != text:
            result = msgspec.structs.replace(result, value=msgspec.structs.replace(value, title=msgspec.structs.replace(snapshot, title=redacted)))
        out.append(result)
    return out


# --------------------------------------------------------------------------- log lines


def _line_pieces(value: Any) -> list[tuple[Hashable, list[Any], Any, str]] | None:
    """The streamed pieces of one decoded line: ``(block key, container, slot, text)``; ``None`` when
    the line is not a chunk event or packed chunk row (it ends a run)."""
    if type(value) is not dict:
        return None
    tag = value.get("type")
    if tag == CHUNK_TYPE:
        piece = chunk_piece(value)
        if piece is None:
            return []
        return [(piece[0], value["data"]["chunk"], piece[1], piece[2])]
    if tag not in _ROW_PIECES:
        return None
    chunk_type, field = _ROW_PIECES[tag]  # type: ignore[index]
    data = value.get("data")
    texts = data.get(field) if type(data) is dict else None
    if type(texts) is not list:
        return []
    key = _block_key(data, chunk_type, data.get("index"), data.get("id") if chunk_type == "tool-call-delta" else None)  # type: ignore[union-attr]
    return [(key, texts, slot, text) for slot, text in enumerate(texts) if type(text) is str]


def _encode_line(value: Any, newline: str) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if any("\ud800" <= char <= "\udfff" for char in text):  # a lone surrogate must stay an escape
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text + newline


def _redact_line(line: str) -> str:
    """One line outside chunk runs, redacted as JSON text.

    A line holding ``\\u`` escapes (which could spell a secret's ASCII
    letters) is also redacted decoded, and re-encoded if that finds more.
    """
    redacted = redact_text(line)
    if "\\u" not in redacted:
        return redacted
    try:
        value = json.loads(redacted)
    except ValueError:
        return redacted
    decoded = _redact_value(value)
    return redacted if decoded is value else _encode_line(decoded, "\n" if line.endswith("\n") else "")


class _RunBuffer:
    """The chunk lines of the current run, decoded, until the run ends."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, Any, list[tuple[Hashable, Any, Any, str]]]] = []
        self.size = 0

    def add(self, line: str, value: Any, pieces: list[tuple[Hashable, Any, Any, str]]) -> None:
        self.lines.append((line, value, pieces))
        self.size += len(line)

    def flush(self) -> Iterator[str]:
        flat = [piece for _line, _value, pieces in self.lines for piece in pieces]
        redacted = redact_pieces([piece[0] for piece in flat], [piece[3] for piece in flat])
        changed: set[int] = set()
        position = 0
        for number, (_line, value, pieces) in enumerate(self.lines):
            for key, container, slot, text in pieces:
                if redacted[position] != text:
                    container[slot] = redacted[position]
                    changed.add(number)
                position += 1
        for number, (line, value, _pieces) in enumerate(self.lines):
            newline = "\n" if line.endswith("\n") else ""
            yield redact_text(_encode_line(value, newline) if number in changed else line)
        self.lines.clear()
        self.size = 0


def redacted_log_lines(lines: Iterator[str]) -> Iterator[str]:
    """A log's lines (each with its LF, the last one possibly without) with every detected secret
    replaced by its marker, pieces of streamed chunks and packed chunk rows included.

    Lines outside chunk runs are redacted as JSON text and otherwise kept
    byte for byte; a chunk line whose pieces change is re-encoded (compact
    JSON, key order kept).  Memory: the current run's lines, at most
    :data:`RUN_BUFFER_LIMIT` characters (a longer run is redacted in parts).
    """
    run = _RunBuffer()
    for line in lines:
        pieces = None
        if '"assistant/chunk"' in line or '-chunks"' in line:  # cheap gate: only these lines can be chunks
            try:
                value = json.loads(line)
            except ValueError:
                value = None
            pieces = _line_pieces(value)
        if pieces is None:
            yield from run.flush()
            yield _redact_line(line)
            continue
        run.add(line, value, pieces)
        if run.size >= RUN_BUFFER_LIMIT:
            yield from run.flush()
    yield from run.flush()
