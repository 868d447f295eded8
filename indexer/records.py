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
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any, Final

import msgspec

from readmodel.jsvalues import MAX_SAFE_INTEGER, is_non_negative_safe_integer, is_safe_integer

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


# A number starting "-0" (at the start or after a structural character and
# JSON whitespace); "-0" inside strings (uuids) does not match.
_NEGATIVE_ZERO_TOKEN: Final = re.compile(rb"(?:^|[:,\[])[ \t\n\r]*-0")


def decode_json_exact(line: bytes) -> Any:
    """Like :func:`decode_json` but keeps JSON ``-0`` as negative zero (for headers)."""
    if b"-0" not in line or _NEGATIVE_ZERO_TOKEN.search(line) is None:
        # Without a -0 number msgspec's value is the standard library's (its
        # only other differences are the inputs it refuses, handled below).
        try:
            return _decode_fast(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
    text = line.decode("utf-8", "replace")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except (ValueError, RecursionError) as exc:
        raise RecordError(str(exc)) from None


# Exact types (bool is not a number here, a str subclass is not str); the set
# of an array's item types is one C-level pass.
_STR_ONLY: Final = frozenset({str})
_INT_ONLY: Final = frozenset({int})
_NUMBER_TYPES: Final = frozenset({int, float})


def _malformed_row(tag: str) -> RecordError:
    return RecordError(f"malformed {tag} storage row")


def expand_row(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Validate a packed chunk row and expand it into its ``assistant/chunk`` events.

    Raises :class:`RecordError` for any malformed row.  Each member is a fresh
    ``{type, seq, time, data: {turn, step, chunk}}`` dict (key order as the
    harness builds it); members share no mutable objects.
    """
    tag = row["type"]
    if row.keys() != _ROW_ENVELOPE_KEYS:
        raise _malformed_row(tag)
    seq0, time0, data = row["seq0"], row["time0"], row["data"]
    # Each check tries the common exact-int case inline before the general predicate.
    if not (type(seq0) is int and 0 <= seq0 <= MAX_SAFE_INTEGER or is_non_negative_safe_integer(seq0)):
        raise _malformed_row(tag)
    if not (type(time0) is int and -MAX_SAFE_INTEGER <= time0 <= MAX_SAFE_INTEGER or is_safe_integer(time0)):
        raise _malformed_row(tag)
    if type(data) is not dict:
        raise _malformed_row(tag)
    keys = data.keys()
    tool = tag == "tool-call-chunks"
    if tool:
        if not (keys == _TOOL_ROW_KEYS or keys == _TOOL_ROW_KEYS_NAMED):
            raise _malformed_row(tag)
        if type(data["id"]) is not str or ("name" in data and type(data["name"]) is not str):
            raise _malformed_row(tag)
        fragments = data["args"]
    else:
        if keys != _TEXT_ROW_KEYS:
            raise _malformed_row(tag)
        fragments = data["texts"]
    turn, step, index, gaps = data["turn"], data["step"], data["index"], data["dt"]
    if not (type(turn) in _NUMBER_TYPES and type(step) in _NUMBER_TYPES and type(index) in _NUMBER_TYPES):
        raise _malformed_row(tag)
    if not (type(fragments) is list and fragments and set(map(type, fragments)) == _STR_ONLY):
        raise _malformed_row(tag)
    count = len(fragments)
    if type(gaps) is not list or len(gaps) != count - 1:
        raise _malformed_row(tag)
    last_seq = seq0 + count - 1
    if not (type(last_seq) is int and last_seq <= MAX_SAFE_INTEGER or is_safe_integer(last_seq)):
        raise _malformed_row(tag)
    times = _row_times(tag, time0, gaps)
    seq0 = int(seq0)
    seqs = range(seq0, seq0 + count)
    if not tool:
        kind = "text-delta" if tag == "text-chunks" else "reasoning-delta"
        return [
            {"type": "assistant/chunk", "seq": seq, "time": time, "data": {"turn": turn, "step": step, "chunk": {"type": kind, "index": index, "text": text}}}
            for seq, time, text in zip(seqs, times, fragments)
        ]
    call_id = data["id"]
    if "name" in data:
        name = data["name"]
        return [
            {
                "type": "assistant/chunk",
                "seq": seq,
                "time": time,
                "data": {"turn": turn, "step": step, "chunk": {"type": "tool-call-delta", "index": index, "id": call_id, "name": name, "argumentsDelta": args}},
            }
            for seq, time, args in zip(seqs, times, fragments)
        ]
    return [
        {
            "type": "assistant/chunk",
            "seq": seq,
            "time": time,
            "data": {"turn": turn, "step": step, "chunk": {"type": "tool-call-delta", "index": index, "id": call_id, "argumentsDelta": args}},
        }
        for seq, time, args in zip(seqs, times, fragments)
    ]


def _row_times(tag: str, time0: Any, gaps: list[Any]) -> list[Any]:
    """Member times: ``time0`` plus each running sum of the gaps, all safe integers."""
    if type(time0) is int and (not gaps or set(map(type, gaps)) == _INT_ONLY):
        times = list(accumulate(gaps, initial=time0))
        if -MAX_SAFE_INTEGER <= min(times) and max(times) <= MAX_SAFE_INTEGER:
            return times
    # Rare: float-typed integral values (1.0), or a sum leaving the safe range.
    if not all(is_safe_integer(gap) for gap in gaps):
        raise _malformed_row(tag)
    times = [time0]
    now = time0
    for gap in gaps:
        now = now + gap
        if not is_safe_integer(now):
            raise _malformed_row(tag)
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

RegionConsumer = Callable[[list[Any], int], tuple[int, int]]
"""Takes a block's decoded line values and the seq its first event must carry.

It must accept exactly the prefix :func:`accept_values` accepts (processing
those lines, and only those, in order) and return how many values that is and
the seq the next line must carry.  Doing the acceptance walk itself lets a
consumer check and process each line in one pass.
"""


def accept_values(values: list[Any], start: int, expected: int) -> tuple[list[Any], int, int]:
    """The fast path's acceptance rule over ``values[start:]``, ``expected`` being the next seq.

    Accepts values up to the first defect: a value that is not an object, a
    packed row that is malformed or does not continue the seqs, a single
    event whose seq is not the exact int ``expected``.  Returns the items (a
    dict per single event, a packed row's members as a list), the index after
    the last accepted value and the seq the next line must carry.
    """
    items: list[Any] = []
    append = items.append
    index = start
    for value in values[start:] if start else values:
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
        else:
            seq = value.get("seq")
            if seq != expected or type(seq) is not int:
                break
            expected += 1
            append(value)
        index += 1
    return items, index, expected


def _one_value_per_line(region: bytes, line_count: int) -> bool:
    """Whether every line break of ``region`` lies between two top-level objects.

    ``decode_lines`` reads a stream of values and ignores where lines break,
    so equal counts of values and lines do not yet mean one value per line (a
    blank line can balance a line holding two).  A raw line feed cannot stand
    in a JSON string, and ``}`` then ``{`` with only white space between is
    valid JSON only between top-level values; so when every line feed follows
    ``}`` and precedes ``{`` (or ends the region), no value crosses a line and
    no line is empty, and with equal counts each line holds exactly one value.
    Writers emit compact objects one per line, so this holds for real logs.
    """
    return region.endswith(b"}\n") and region.count(b"}\n{") == line_count - 1


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
    Without a ``region_sink`` they go to ``sink`` line by line.  With a
    ``region_consumer`` (see :data:`RegionConsumer`) the block's decoded
    values go to it instead, and it accepts them itself.  Lines the slow path
    handles always go to ``sink``, after the block's items.
    """

    __slots__ = ("sink", "region_sink", "region_consumer", "next_seq", "committed", "consumed", "issue", "line_no", "_carry")

    def __init__(
        self,
        sink: EventSink,
        *,
        next_seq: int = 0,
        offset: int = 0,
        line_no: int = 1,
        region_sink: RegionSink | None = None,
        region_consumer: RegionConsumer | None = None,
    ) -> None:
        self.sink = sink
        self.region_sink = region_sink if region_sink is not None else self._per_line
        self.region_consumer = region_consumer
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
        if self._carry:
            region = self._carry + data[: last_newline + 1]
        else:
            # Writers end every batch with a line feed: then the region is the data itself, uncopied.
            region = data if last_newline == len(data) - 1 else data[: last_newline + 1]
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
        if len(values) != line_count or not _one_value_per_line(region, line_count):
            return 0  # blank lines, two values on a line, a value across lines: the slow path judges
        return self._fast_region(values)

    def _per_line(self, items: list[Any]) -> None:
        """The default region sink: each fast-path line to ``sink`` on its own."""
        deliver_per_line(items, self.sink)

    def _fast_region(self, values: list[Any]) -> int:
        """Accept the block's values up to the first defect; returns how many were accepted."""
        if self.region_consumer is not None:
            accepted, self.next_seq = self.region_consumer(values, self.next_seq)
        else:
            items, accepted, self.next_seq = accept_values(values, 0, self.next_seq)
            if items:
                self.region_sink(items)
        self.line_no += accepted
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
