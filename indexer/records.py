"""Storage records: strict JSON lines and the line scanner.

A transcript's event region is LF-terminated JSON lines (format-spec §2.4, §4,
§7.1).  Each line holds one event or one packed row of ``assistant/chunk``
events (:mod:`indexer.packedrows`).  :class:`LineScanner` consumes the region incrementally (any chunking
of the bytes, across frame boundaries) and applies the harness's first-defect
rule: after the first unparsable line or seq gap every later line is dropped,
and the log is corrupt if a dropped line holds a ``turn/end``.  For callers
that only validate and store events, it can leave the bulky payloads of
request headers undecoded (:func:`decode_request_header_lazily`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, UnsetType

from readmodel.core.accelerators import LINESCAN, accelerated

from .logerrors import LogFormatError, NullLineError, RecordError
from .packedrows import ROW_TAGS, expand_row


_DECODER: Final = msgspec.json.Decoder()
_decode_fast: Final = _DECODER.decode
_decode_lines: Final = _DECODER.decode_lines


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
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        pass  # RecursionError: nesting too deep for msgspec; the standard library judges (and refuses) it too
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
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            pass
    text = line.decode("utf-8", "replace")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except (ValueError, RecursionError) as exc:
        raise RecordError(str(exc)) from None


# ---------------------------------------------------------------------------
# Lazy request-header payloads
# ---------------------------------------------------------------------------
#
# A request header snapshots the whole request envelope: its system prompt and
# tool schemas make up about half of a log's bytes (and a third of the time
# spent decoding JSON), only to be re-encoded for the index.  No reader stage
# looks inside them (format-spec §5.3 checks only config, adapterDefaults and
# reason), so for callers that only validate and store events they may stay
# undecoded, as ``msgspec.Raw``: about five times cheaper, and with known
# payloads (see _PayloadCache) not even scanned.


class _LazyHeader(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    # The writer's key order (format-spec §5.3): any other order fails the
    # re-encoding check below and takes the ordinary path.
    config: Any
    adapterDefaults: Any = UNSET
    system: Raw | UnsetType = UNSET
    tools: Raw | UnsetType = UNSET


class _LazyHeaderData(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    header: _LazyHeader
    reason: Any = UNSET


class _LazyHeaderEvent(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    type: str
    seq: Any
    time: Any
    data: _LazyHeaderData


LAZY_HEADER_PREFIX: Final = b'{"type":"request/header",'
"""How every line :func:`decode_request_header_lazily` may accept starts."""
_LAZY_HEADER_MARK: Final = b"\n" + LAZY_HEADER_PREFIX
_decode_lazy_header: Final = msgspec.json.Decoder(_LazyHeaderEvent).decode
_encode: Final = msgspec.json.Encoder().encode
# Lines nested deeper than this (in a payload, or in the other values) are
# decoded as usual: whether msgspec decodes a very deep value depends on the
# interpreter's stack depth at the call, which must not decide what the
# reader returns.
_CANONICAL_MAX_DEPTH: Final = 128
_OTHER_MAX_DEPTH: Final = 64


def _within_depth(value: Any, limit: int) -> bool:
    """Whether no item of ``value`` (decoded JSON) lies inside more than ``limit`` containers."""
    level = [value]
    for _ in range(limit + 1):  # the last round finds the level below the deepest containers empty
        deeper: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is dict:
                deeper += item.values()
            elif kind is list:
                deeper += item
        if not deeper:
            return True
        level = deeper
    return False


def _is_canonical(payload: bytes) -> bool:
    """Whether the JSON value ``payload`` is exactly msgspec's encoding of its own decoding.

    That rules out everything msgspec accepts when it skips a value as
    ``Raw`` but decodes differently or refuses: invalid UTF-8, out-of-range
    numbers (``1e999``), non-canonical numbers (``-0``, ``1.50``, ``1E5``),
    escapes it would not write (``\\u0041``, ``\\/``, surrogate pairs),
    white space, duplicate keys.
    """
    try:
        value = _decode_fast(payload)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return False
    if not (payload.count(b"[") + payload.count(b"{") < _CANONICAL_MAX_DEPTH or _within_depth(value, _CANONICAL_MAX_DEPTH)):
        return False
    try:
        return _encode(value) == payload
    except (UnicodeEncodeError, OverflowError, TypeError):
        return False


class _PayloadCache:
    """Memoised :func:`_is_canonical`, with the canonical payloads indexed by their last bytes.

    Request headers repeat the same tool schemas (and often the same system
    prompt) across requests and sessions, so comparing bytes with a known
    payload replaces decoding it; finding a known payload by its last bytes
    (:meth:`ending_at`) replaces even scanning it.  Neither changes a result:
    the cache only remembers a pure predicate of the bytes.  Bounded in
    entries and bytes, oldest first out.  Lookups take no lock; inserting and
    evicting (after a miss, which costs a full decode anyway) do.
    """

    TAIL: Final = 64  # bytes of a payload's end that index it; shorter payloads are not indexed

    def __init__(self, max_entries: int, max_bytes: int, max_entry_bytes: int) -> None:
        self.verdicts: dict[bytes, bool] = {}
        self.by_tail: dict[bytes, tuple[bytes, ...]] = {}  # tuples: replaced, never mutated, for lock-free readers
        self.size = 0
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self.lock = threading.Lock()

    def check(self, payload: bytes) -> bool:
        """:func:`_is_canonical` of ``payload``."""
        verdict = self.verdicts.get(payload)
        if verdict is None:
            verdict = _is_canonical(payload)
            if len(payload) <= self.max_entry_bytes:
                self._remember(payload, verdict)
        return verdict

    def ending_at(self, line: bytes, end: int) -> bytes | None:
        """A known canonical payload equal to the bytes of ``line`` just before ``end``, if any."""
        if end < self.TAIL:
            return None
        for payload in self.by_tail.get(line[end - self.TAIL : end], ()):
            start = end - len(payload)
            if start >= 0 and line.startswith(payload, start):
                return payload
        return None

    def _remember(self, payload: bytes, verdict: bool) -> None:
        with self.lock:
            if payload in self.verdicts:
                return
            self.verdicts[payload] = verdict  # insertion order: the oldest entry is first
            self.size += len(payload)
            if verdict and len(payload) >= self.TAIL:
                tail = payload[-self.TAIL :]
                self.by_tail[tail] = (*self.by_tail.get(tail, ()), payload)
            while len(self.verdicts) > self.max_entries or self.size > self.max_bytes:
                oldest = next(iter(self.verdicts))
                if self.verdicts.pop(oldest) and len(oldest) >= self.TAIL:
                    tail = oldest[-self.TAIL :]
                    rest = tuple(known for known in self.by_tail[tail] if known is not oldest)
                    if rest:
                        self.by_tail[tail] = rest
                    else:
                        del self.by_tail[tail]
                self.size -= len(oldest)


_PAYLOADS: Final = _PayloadCache(max_entries=256, max_bytes=16 << 20, max_entry_bytes=1 << 20)

_TOOLS_KEY: Final = b',"tools":'
_SYSTEM_KEY: Final = b',"system":'
_REASON_KEY: Final = b'},"reason":'  # the header's closing brace, then data's last key
_REASON_SPAN: Final = 512  # how far from the end of the line the reason key is looked for


def decode_request_header_lazily(line: bytes) -> dict[str, Any] | None:
    """A ``request/header`` line as an event whose ``system`` and ``tools`` stay raw JSON.

    Returns ``None`` unless the line is compact JSON in the writer's key order
    (``type, seq, time, data{header{config, adapterDefaults?, system?,
    tools?}, reason?}``, no other key) and ``msgspec.json.encode`` of the
    result is ``line``, where ``system`` and ``tools`` are ``msgspec.Raw``
    holding canonical JSON (see :func:`_is_canonical`) and every other value
    is one msgspec decoded.  Then :func:`decode_json` of the line gives the
    result with those two payloads decoded (JSON parses a serialisation back
    to the tree serialised; msgspec's values survive its own encoding), and
    encoding that gives ``line`` again: the event, and the bytes stored for
    it, are those of the ordinary path.  A pure function of ``line``.
    """
    event = _spliced(line)
    return event if event is not None else _lazy_event(line, line, None, None)


def _spliced(line: bytes) -> dict[str, Any] | None:
    """:func:`decode_request_header_lazily` without scanning known payloads, or ``None``.

    The header's last values are found by their bytes among the known
    canonical payloads, by where the header ends (before ``data.reason``, or
    the line's last three braces), and replaced by a placeholder for
    decoding; the re-encoding check in :func:`_lazy_event` makes any wrong
    guess harmless.
    """
    end = line.rfind(_REASON_KEY, max(0, len(line) - _REASON_SPAN))
    if end < 0:
        if not line.endswith(b"}}}"):
            return None
        end = len(line) - 3
    ending_at = _PAYLOADS.ending_at
    last = ending_at(line, end)
    if last is None:
        return None
    start = end - len(last)
    # (Offsets are checked before use: a negative start would count from the end.)
    if start > len(_TOOLS_KEY) and line.startswith(_TOOLS_KEY, start - len(_TOOLS_KEY)):
        before = start - len(_TOOLS_KEY)
        system = ending_at(line, before)
        if system is not None:
            key = before - len(system) - len(_SYSTEM_KEY)
            if key > 0 and line.startswith(_SYSTEM_KEY, key):
                skeleton = line[: before - len(system)] + b'0,"tools":0' + line[end:]
                return _lazy_event(skeleton, line, Raw(system), Raw(last))
        return _lazy_event(line[:start] + b"0" + line[end:], line, None, Raw(last))
    if start > len(_SYSTEM_KEY) and line.startswith(_SYSTEM_KEY, start - len(_SYSTEM_KEY)):
        return _lazy_event(line[:start] + b"0" + line[end:], line, Raw(last), None)
    return None


def _lazy_event(text: bytes, line: bytes, system: Raw | None, tools: Raw | None) -> dict[str, Any] | None:
    """The lazily decoded event of ``line``, decoded from ``text``, or ``None``.

    ``text`` is ``line``, or ``line`` with known canonical payloads replaced
    by placeholders: ``system`` and ``tools``, when given, replace what
    ``text`` holds for them; a raw payload ``text`` holds itself must pass
    the canonical check.  The result stands only if it encodes to ``line``.
    """
    try:
        event = _decode_lazy_header(text)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    header = event.data.header
    if not _within_depth([header.config, header.adapterDefaults, event.data.reason], _OTHER_MAX_DEPTH):
        return None
    if system is None:
        system = header.system
        if system is not UNSET and not _PAYLOADS.check(bytes(system)):
            return None
    if tools is None:
        tools = header.tools
        if tools is not UNSET and not _PAYLOADS.check(bytes(tools)):
            return None
    # Plain dicts in the writer's key order, as decode_json builds them.
    fields: dict[str, Any] = {"config": header.config}
    if header.adapterDefaults is not UNSET:
        fields["adapterDefaults"] = header.adapterDefaults
    if system is not UNSET:
        fields["system"] = system
    if tools is not UNSET:
        fields["tools"] = tools
    data: dict[str, Any] = {"header": fields}
    if event.data.reason is not UNSET:
        data["reason"] = event.data.reason
    result = {"type": event.type, "seq": event.seq, "time": event.time, "data": data}
    # Key order, duplicates, unknown keys, white space, numbers and escapes outside the payloads.
    return result if _encode(result) == line else None


def decode_lines_lazily(region: bytes) -> list[Any]:
    """``decode_lines(region)`` with request-header lines decoded by :func:`decode_request_header_lazily`.

    Contract: ``region`` ends with a line feed.  A request-header line the
    lazy decoder refuses is decoded as usual; the result may then differ
    from ``decode_lines(region)`` only where a line holds other than exactly
    one value (the caller checks that every line holds one, as it must for
    ``decode_lines`` anyway).  Raises what ``decode_lines`` raises.
    """
    if region.startswith(LAZY_HEADER_PREFIX):
        at = 0
    else:
        at = region.find(_LAZY_HEADER_MARK)
        if at < 0:
            return _decode_lines(region)
        at += 1
    view = memoryview(region)  # the lines between request headers decode without a copy
    values: list[Any] = []
    start = 0  # the first line not yet decoded
    while at >= 0:
        if at > start:
            values += _decode_lines(view[start:at])
        end = region.index(b"\n", at)
        line = region[at:end]
        event = decode_request_header_lazily(line)
        values.append(event if event is not None else _decode_fast(line))
        start = end + 1
        at = region.find(_LAZY_HEADER_MARK, end)  # the mark's LF is the one ending this line
        if at >= 0:
            at += 1
    if start < len(region):
        values += _decode_lines(view[start:])
    return values


def decode_record(line: bytes, lazy: bool = False) -> tuple[list[Any], bool]:
    """Decode one stored line into the events it holds and whether it was a packed row.

    ``lazy``: decode a request-header line with :func:`decode_request_header_lazily` when it can.
    """
    if lazy and line.startswith(LAZY_HEADER_PREFIX):
        event = decode_request_header_lazily(line)
        if event is not None:
            return [event], False
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

RegionConsumer = Callable[[list[Any], int, bytes], tuple[int, int]]
"""Takes a block's decoded line values, the seq its first event must carry, and the
block itself (the LF-terminated lines the values were decoded from, one each).

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


def _framed_line_count_python(region: bytes) -> int:
    """The number of lines of ``region`` (which ends with a line feed) when
    every line break lies between two top-level objects, else 0.

    ``decode_lines`` reads a stream of values and ignores where lines break,
    so equal counts of values and lines do not yet mean one value per line (a
    blank line can balance a line holding two).  A raw line feed cannot stand
    in a JSON string, and ``}`` then ``{`` with only white space between is
    valid JSON only between top-level values; so when every line feed follows
    ``}`` and precedes ``{`` (or ends the region), no value crosses a line and
    no line is empty, and with as many values as lines each line holds
    exactly one value.  Writers emit compact objects one per line, so this
    holds for real logs.

    One ``find`` (memchr) per line: several times faster than counting line
    feeds and ``}\n{`` with ``bytes.count``, which compares byte by byte.
    """
    last = len(region) - 1
    if last < 1 or region[last - 1] != 0x7D:  # "}" before the final LF
        return 0
    find = region.find
    count = 1
    at = find(b"\n")
    while at != last:
        if region[at - 1] != 0x7D or region[at + 1] != 0x7B:  # "}" LF "{"; at 0, region[-1] is the final LF
            return 0
        count += 1
        at = find(b"\n", at + 1)
    return count


# The C version when built (indexer/_linescan.c): the same counts.
_framed_line_count: Final[Callable[[bytes], int]] = accelerated(LINESCAN, "framed_line_count") or _framed_line_count_python


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

    With ``lazy_payloads`` every decode path (block and line by line) reads
    request-header lines with :func:`decode_request_header_lazily`: their
    ``system`` and ``tools`` may be ``msgspec.Raw``, each event otherwise
    equal to the one decoded without it and encoding to the same bytes.
    """

    __slots__ = ("sink", "region_sink", "region_consumer", "next_seq", "committed", "consumed", "issue", "line_no", "lazy_payloads", "_carry", "_decode_block")

    def __init__(
        self,
        sink: EventSink,
        *,
        next_seq: int = 0,
        offset: int = 0,
        line_no: int = 1,
        region_sink: RegionSink | None = None,
        region_consumer: RegionConsumer | None = None,
        lazy_payloads: bool = False,
    ) -> None:
        self.sink = sink
        self.lazy_payloads = lazy_payloads
        self._decode_block = decode_lines_lazily if lazy_payloads else _decode_lines
        # ``None``: line by line to ``sink``.  Not a bound method of this scanner: that
        # would be a reference cycle keeping the whole reading (pipeline, fold, the
        # caller's projector) alive until the collector runs, which a worker pays for
        # every session it prepares (the collector is off while it prepares a chunk).
        self.region_sink = region_sink
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
        # 0 when some line is not one framed object: then the slow path judges every line.
        line_count = _framed_line_count(region) if self.issue is None else 0
        done = self._fast_lines(region, line_count) if line_count else 0
        if line_count and done == line_count:
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

        ``line_count`` is :func:`_framed_line_count` of ``region`` (not 0).
        Returns how many lines were accepted; the caller processes the rest
        one by one (the slow path owns every defect rule).
        """
        try:
            values = self._decode_block(region)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return 0  # RecursionError: a line nested too deep for msgspec
        if len(values) != line_count:
            return 0  # a line holds more than one value: the slow path judges
        return self._fast_region(values, region)

    def _fast_region(self, values: list[Any], region: bytes) -> int:
        """Accept the block's values up to the first defect; returns how many were accepted."""
        if self.region_consumer is not None:
            accepted, self.next_seq = self.region_consumer(values, self.next_seq, region)
        else:
            items, accepted, self.next_seq = accept_values(values, 0, self.next_seq)
            if items:
                if self.region_sink is not None:
                    self.region_sink(items)
                else:
                    deliver_per_line(items, self.sink)
        self.line_no += accepted
        return accepted

    def _line(self, line: bytes, end_offset: int) -> None:
        self.line_no += 1
        try:
            events, from_row = decode_record(line, self.lazy_payloads)
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
