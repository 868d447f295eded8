"""Storage records: strict JSON lines, packed chunk rows, and the line scanner.

A transcript's event region is LF-terminated JSON lines (format-spec §2.4, §4,
§7.1).  Each line holds one event or one packed row of ``assistant/chunk``
events.  :class:`LineScanner` consumes the region incrementally (any chunking
of the bytes, across frame boundaries) and applies the harness's first-defect
rule: after the first unparsable line or seq gap every later line is dropped,
and the log is corrupt if a dropped line holds a ``turn/end``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import accumulate
from typing import Any, Final

import msgspec

from readmodel.jsvalues import MAX_SAFE_INTEGER, is_non_negative_safe_integer, is_number, is_record, is_safe_integer

ROW_TAGS: Final = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
_ROW_ENVELOPE_KEYS: Final = frozenset({"type", "seq0", "time0", "data"})
_TEXT_ROW_KEYS: Final = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_ROW_KEYS: Final = frozenset({"turn", "step", "index", "id", "dt", "args"})
_TOOL_ROW_KEYS_NAMED: Final = _TOOL_ROW_KEYS | {"name"}

_DECODER: Final = msgspec.json.Decoder()
_decode_fast: Final = _DECODER.decode
_decode_lines: Final = _DECODER.decode_lines


class LogFormatError(ValueError):
    """A transcript the harness refuses to read.

    ``kind`` is ``corrupt`` or ``unsupported`` (an intact log this build must
    not interpret).  ``stage`` records where the harness would have failed —
    ``parse``, ``identity``, ``coordinator`` or ``restore`` — which decides
    how the query side reports it.
    """

    def __init__(self, message: str, *, kind: str = "corrupt", stage: str = "parse") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.stage = stage


class RecordError(ValueError):
    """One line cannot be decoded into events (an unparsable-line defect)."""


class NullLineError(LogFormatError):
    """A line holding the JSON literal ``null``: the reference crashes on it."""


def _reject_constant(token: str) -> Any:
    raise ValueError(f"non-standard JSON token {token}")


def _parse_int(token: str) -> Any:
    # JSON -0 parses to negative zero in JS; keep that distinction.
    return -0.0 if token == "-0" else int(token)


def decode_json(line: bytes) -> Any:
    """Strict JSON as JS ``JSON.parse`` after lossy UTF-8 decoding.

    The fast path is msgspec; lines it refuses (invalid UTF-8 to replace, lone
    surrogate escapes, out-of-range numbers) take the standard library path,
    which rejects ``NaN``/``Infinity`` tokens like JS does.
    """
    try:
        return _decode_fast(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    text = line.decode("utf-8", "replace")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise RecordError(str(exc)) from None


def decode_json_exact(line: bytes) -> Any:
    """Like :func:`decode_json` but keeps JSON ``-0`` as negative zero (for headers)."""
    text = line.decode("utf-8", "replace")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except (ValueError, RecursionError) as exc:
        raise RecordError(str(exc)) from None


def _is_string_list(value: Any) -> bool:
    return type(value) is list and len(value) > 0 and all(type(item) is str for item in value)


def expand_row(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Validate a packed chunk row and expand it into its ``assistant/chunk`` events."""
    tag = row["type"]
    if row.keys() != _ROW_ENVELOPE_KEYS:
        raise RecordError(f"malformed {tag} storage row")
    seq0, time0, data = row["seq0"], row["time0"], row["data"]
    if not is_non_negative_safe_integer(seq0) or not is_safe_integer(time0) or not is_record(data):
        raise RecordError(f"malformed {tag} storage row")
    keys = data.keys()
    if tag == "tool-call-chunks":
        if not (keys == _TOOL_ROW_KEYS or keys == _TOOL_ROW_KEYS_NAMED):
            raise RecordError(f"malformed {tag} storage row")
        if type(data["id"]) is not str or ("name" in data and type(data["name"]) is not str):
            raise RecordError(f"malformed {tag} storage row")
        fragments = data["args"]
    else:
        if keys != _TEXT_ROW_KEYS:
            raise RecordError(f"malformed {tag} storage row")
        fragments = data["texts"]
    turn, step, index, gaps = data["turn"], data["step"], data["index"], data["dt"]
    if not (is_number(turn) and is_number(step) and is_number(index)):
        raise RecordError(f"malformed {tag} storage row")
    if not _is_string_list(fragments):
        raise RecordError(f"malformed {tag} storage row")
    if type(gaps) is not list or len(gaps) != len(fragments) - 1:
        raise RecordError(f"malformed {tag} storage row")
    if not is_safe_integer(seq0 + len(fragments) - 1):
        raise RecordError(f"malformed {tag} storage row")
    times = _row_times(tag, time0, gaps)
    seq0 = int(seq0)
    turn_step = (data["turn"], data["step"])
    if tag == "tool-call-chunks":
        call_id = data["id"]
        if "name" in data:
            name = data["name"]
            chunks = [{"type": "tool-call-delta", "index": index, "id": call_id, "name": name, "argumentsDelta": f} for f in fragments]
        else:
            chunks = [{"type": "tool-call-delta", "index": index, "id": call_id, "argumentsDelta": f} for f in fragments]
    else:
        kind = "text-delta" if tag == "text-chunks" else "reasoning-delta"
        chunks = [{"type": kind, "index": index, "text": f} for f in fragments]
    turn, step = turn_step
    return [
        {"type": "assistant/chunk", "seq": seq0 + k, "time": times[k], "data": {"turn": turn, "step": step, "chunk": chunk}}
        for k, chunk in enumerate(chunks)
    ]


def _row_times(tag: str, time0: Any, gaps: list[Any]) -> list[Any]:
    """Member times: ``time0`` plus each running sum of the gaps, all safe integers."""
    if all(type(gap) is int for gap in gaps):
        times = list(accumulate(gaps, initial=time0))
        if type(time0) is int and -MAX_SAFE_INTEGER <= min(times) and max(times) <= MAX_SAFE_INTEGER:
            return times
    # Rare: float-typed integral values (1.0), or a sum leaving the safe range.
    if not all(is_safe_integer(gap) for gap in gaps):
        raise RecordError(f"malformed {tag} storage row")
    times = [time0]
    now = time0
    for gap in gaps:
        now = now + gap
        if not is_safe_integer(now):
            raise RecordError(f"malformed {tag} storage row")
        times.append(now)
    return times


def decode_record(line: bytes) -> tuple[list[Any], bool]:
    """Decode one stored line into the events it holds and whether it was a packed row."""
    value = decode_json(line)
    if value is None:
        raise NullLineError("a stored line holds JSON null, which the harness cannot read")
    if type(value) is dict and value.get("type") in ROW_TAGS:
        return expand_row(value), True
    return [value], False


def _seq_matches(event: Any, expected: int) -> bool:
    if type(event) is not dict:
        return False
    seq = event.get("seq")
    return (type(seq) is int or type(seq) is float) and seq == expected


def _is_turn_end(event: Any) -> bool:
    return type(event) is dict and event.get("type") == "turn/end"


EventSink = Callable[[list[dict[str, Any]], bool], None]
"""Receives one accepted line's events and whether they came from a packed row."""

RegionSink = Callable[[list[Any]], None]
"""Receives a block of accepted lines: a dict per single-event line, a list per packed row."""


def deliver_per_line(items: list[Any], sink: EventSink) -> None:
    """Hand a region's items (see :class:`LineScanner`) to a per-line ``sink``."""
    for item in items:
        if type(item) is list:
            sink(item, True)
        else:
            sink([item], False)


class LineScanner:
    """Incremental first-defect line scanner over an event region.

    Bytes are fed with :meth:`feed` in any chunking; every accepted line's
    events are passed to ``sink`` at once, in order.  ``committed`` is the
    region offset just past the last accepted line; ``consumed`` counts every
    byte fed; ``issue`` holds the first defect, after which nothing more is
    accepted.  The header line is line 1, so the first event line is line 2.

    Lines accepted on the fast path (a whole block that decodes cleanly, up to
    its first defect) go to ``region_sink`` in one call per block: each item is
    a single event (a dict) or a packed row's expanded members (a list).
    Without a ``region_sink`` they go to ``sink`` line by line.  Lines the slow
    path handles always go to ``sink``, after the block's items.
    """

    __slots__ = ("sink", "region_sink", "next_seq", "committed", "consumed", "issue", "line_no", "_carry")

    def __init__(
        self,
        sink: EventSink,
        *,
        next_seq: int = 0,
        offset: int = 0,
        line_no: int = 1,
        region_sink: RegionSink | None = None,
    ) -> None:
        self.sink = sink
        self.region_sink = region_sink if region_sink is not None else self._per_line
        self.next_seq = next_seq
        self.committed = offset
        self.consumed = offset
        self.issue: str | None = None
        self.line_no = line_no
        self._carry = b""

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unterminated final line held back."""
        return len(self._carry)

    def feed(self, data: bytes) -> None:
        """Consume bytes; complete lines are processed, a trailing partial line is held."""
        if not data:
            return
        last_newline = data.rfind(b"\n")
        if last_newline < 0:
            self._carry += data
            self.consumed += len(data)
            return
        region = self._carry + data[: last_newline + 1] if self._carry else data[: last_newline + 1]
        offset = self.consumed - len(self._carry)  # region offset of the first line
        self._carry = data[last_newline + 1 :]
        self.consumed += len(data)
        line_count = region.count(b"\n")
        done = self._fast_lines(region, line_count) if self.issue is None else 0
        if done == line_count:
            self.committed = offset + len(region)
            return
        lines = region.split(b"\n")
        lines.pop()  # the empty string after the final LF
        for line in lines[:done]:
            offset += len(line) + 1
        if done:
            self.committed = offset
        for line in lines[done:]:
            offset += len(line) + 1
            self._line(line, offset)

    def _fast_lines(self, region: bytes, line_count: int) -> int:
        """Decode a block of lines in one call and accept them while all is well.

        Returns how many lines were accepted; the caller processes the rest
        one by one (the slow path owns every defect rule).
        """
        try:
            values = _decode_lines(region)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return 0
        if len(values) != line_count:
            return 0  # a blank or whitespace-only line is a defect: let the slow path see it
        return self._fast_region(values)

    def _per_line(self, items: list[Any]) -> None:
        """The default region sink: each fast-path line to ``sink`` on its own."""
        deliver_per_line(items, self.sink)

    def _fast_region(self, values: list[Any]) -> int:
        """The fast path with one ``region_sink`` call for the accepted prefix."""
        items: list[Any] = []
        append = items.append
        expected = self.next_seq
        for value in values:
            if type(value) is not dict:
                break
            if value.get("type") in ROW_TAGS:
                try:
                    members = expand_row(value)
                except RecordError:
                    break
                if members[0]["seq"] != expected:
                    break
                expected += len(members)
                append(members)
                continue
            seq = value.get("seq")
            if seq != expected or type(seq) is not int:
                break
            expected += 1
            append(value)
        accepted = len(items)
        self.line_no += accepted
        self.next_seq = expected
        if items:
            self.region_sink(items)
        return accepted

    def _line(self, line: bytes, end_offset: int) -> None:
        self.line_no += 1
        try:
            events, from_row = decode_record(line)
        except RecordError:
            if self.issue is None:
                self.issue = f"unparsable committed event at line {self.line_no}"
            return
        if self.issue is not None:
            if any(_is_turn_end(event) for event in events):
                raise LogFormatError(f"committed region is damaged: {self.issue} is followed by a turn/end")
            return
        expected = self.next_seq
        for offset, event in enumerate(events):
            if not _seq_matches(event, expected + offset):
                got = event.get("seq") if type(event) is dict else None
                self.issue = (
                    f"seq gap in committed region at line {self.line_no} "
                    f"(expected {expected + offset}, got {got!r})"
                )
                if any(_is_turn_end(e) for e in events):
                    raise LogFormatError(f"committed region is damaged: {self.issue} on a line holding a turn/end")
                return
        self.next_seq = expected + len(events)
        self.committed = end_offset
        self.sink(events, from_row)
