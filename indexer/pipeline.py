"""The per-event stages of reading a log, after the line scanner (format-spec §7.3).

Storage identity, retired vocabulary, legacy upgrades, message shapes, the
known-type gate, synthetic closers and restore validation (envelopes, request
headers, the surface fold), each with its rank: the harness runs them as
whole-log passes, so an earlier stage's failure wins even when a later stage
fails on an earlier event.  :class:`Pipeline` runs them in one streaming pass
and keeps the first failure of each stage (see :mod:`indexer.reader`).

This is the indexer's hottest code: some projection rules are inlined here
(the envelope and append checks, runs of plain log-only events) instead of
called per event, and the fast paths are property-tested against the slow ones
(tests/reader/test_fast_paths.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final


from readmodel.projection.eventmodel import (
    KNOWN_EVENT_TYPES,
    REJECTED_EVENT_TYPES,
    SURFACE_EVENT_TYPES,
    EventShapeError,
    check_envelope,
    check_message_shape,
    check_not_rejected_vocabulary,
    check_request_header,
    is_known_or_ignorable,
)
from readmodel.core.accelerators import LINESCAN, accelerated
from readmodel.core.clipping import clip_repr
from readmodel.core.jsvalues import MAX_SAFE_INTEGER
from readmodel.projection.surface import SurfaceFold, SurfaceFoldError

from .legacy import is_legacy_tool_result_replacement, upgrade_event
from .records import LogFormatError, RecordError, accept_values, deliver_per_line
from .packedrows import ROW_TAGS, PackedRow, check_row, row_members
from .rawlines import RegionLines
from .repair import WALK_STEPS, CloserState

Event = dict[str, Any]
EventSink = Callable[[list[Event]], None]

# Failure stages in the harness's order: a lower rank is reported first.
STAGE_RANK: Final = {"identity": 1, "retired": 2, "upgrade": 3, "message": 4, "gate": 5, "header": 6, "restore": 7}
NO_ERROR: Final = 99
_CORE_ENVELOPE: Final = frozenset({"type", "seq", "time", "data"})
_STEP_TYPES: Final = frozenset({"step/start", "step/end"})


class Pipeline:
    """Per-event stages after the scanner, with stage-ranked first-failure tracking."""

    def __init__(self, session_id: str, fold: SurfaceFold, closers: CloserState, sink: EventSink, next_seq: int) -> None:
        self.session_id = session_id
        self.fold = fold
        self.closers = closers
        self.sink = sink
        self.tool_result_ids: dict[int, str] = {}
        self.error_rank = NO_ERROR
        self.error: LogFormatError | None = None
        self.needs_history = False
        self.resuming = next_seq > 0
        self.defer_restore = False
        self.last_seq: int | None = None
        self.last_time: Any = None
        self.replacements: list[tuple[int, tuple[int, ...]]] = []
        # Whether the sink takes a packed row accepted on the fast path as one PackedRow
        # item, its members unbuilt (the indexer's projector does), instead of its members.
        self.packed_rows = False
        # Whether the sink takes a fast-path batch's raw lines as a second argument
        # (bytes, or None: it encodes the items itself), the indexer's projector does.
        self.raw_lines = False
        self.on_replacement: Callable[[int, tuple[int, ...]], None] = lambda seq, shadowed: self.replacements.append((seq, shadowed))

    def skip_restore(self) -> None:
        """Stop after the coordinator stages (the harness's ``readFrom``)."""
        self.error_rank = STAGE_RANK["restore"]

    def fail(self, stage: str, message: str, kind: str = "corrupt") -> None:
        rank = STAGE_RANK[stage]
        if rank < self.error_rank:
            self.error_rank = rank
            outer = "restore" if rank >= STAGE_RANK["header"] else "coordinator"
            self.error = LogFormatError(message, kind=kind, stage="identity" if stage == "identity" else outer)

    def accept(self, raw_events: list[Any], from_row: bool) -> None:
        if self.error_rank == NO_ERROR and from_row and not self.defer_restore:
            out = self._accept_row(raw_events)
        else:
            out = [event for event in map(self._process, raw_events) if event is not None]
        if out and self.error is None:
            self.sink(out)

    def consume_region(self, values: list[Any], expected: int, region: bytes | None = None) -> tuple[int, int]:
        """A block of decoded lines from the scanner's fast path (see :data:`RegionConsumer`).

        Accepts lines exactly as :func:`accept_values` does, checking and
        processing each in the same pass.  While no stage has failed, packed
        rows and plain log-only events (see :data:`_RUN_KINDS`; exactly the
        four core envelope keys and a safe integer time) only advance the fold,
        in runs, and the closer walk where it looks at them; every other event
        takes :meth:`_process_clean`.  The sink sees the events in log order,
        in batches that run on across appended surface events (for
        :data:`BATCH_EVENTS` events) and end before any other surface event is
        folded, so a replacement's callback never precedes the rows it shadows.
        With :attr:`packed_rows` a packed row whose times are exact ints reaches
        the sink as one :class:`~indexer.packedrows.PackedRow` in its members' place.
        With :attr:`raw_lines` and the ``region`` the values were decoded from,
        the sink also gets the batch's raw lines (:mod:`indexer.rawlines`).
        """
        if self.error_rank != NO_ERROR or self.defer_restore:
            items, accepted, expected = accept_values(values, 0, expected)
            self._accept_items(items)
            return accepted, expected
        lines = RegionLines(region, values) if region is not None and self.raw_lines else None
        base: int | None = 0  # out[i] was handed on for values[base + i]; None: not known
        out: list[Any] = []
        run_seq = run_len = 0
        packed = self.packed_rows
        line_kinds = _LINE_KINDS
        walk_steps, closers = WALK_STEPS, self.closers
        lowest, highest = -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER
        batch_end = expected + BATCH_EVENTS  # the seq from which a surface event starts a new batch
        plain_run, packed_row = _plain_run, PackedRow if packed else None
        position, size = 0, len(values)
        while position < size:
            if plain_run is not None:
                # The plain lines from here in C: the rules below, for the lines they take without a question.
                stop, after = plain_run(values, position, expected, line_kinds, _INERT, _WALKED, _ROW, walk_steps, closers, packed_row, out)
                if stop != position:
                    if not run_len:
                        run_seq = expected
                    run_len += after - expected
                    expected, position = after, stop
                    if position == size:
                        index = size
                        break
            index = position
            value = values[index]
            position += 1
            # The acceptance rule first (accept_values, inlined).
            if type(value) is not dict:
                break
            etype = value.get("type")
            kind = line_kinds.get(etype) if type(etype) is str else None  # a list or object type is not hashable
            if kind is _ROW:
                try:
                    first, times = check_row(value)
                except RecordError:
                    break
                if first != expected:
                    break
                # Row members are inert, valid and log-only by construction: part of the run.
                if not run_len:
                    run_seq = expected
                count = len(times)
                expected += count
                run_len += count
                if packed and type(times[-1]) is int:  # every time an exact int (a float would stay in the sums)
                    out.append(PackedRow(value, first, times))
                else:
                    out.extend(row_members(value, first, times))
                    base = None  # several items for one line
                continue
            seq = value.get("seq")
            if seq != expected or type(seq) is not int:
                break
            expected += 1
            if kind is not None and len(value) == 4 and "data" in value:
                # With type, seq and data present, an int time makes the keys exactly the core four.
                time = value.get("time")
                if type(time) is int and lowest <= time <= highest:
                    plain = kind is _INERT
                    if not plain:
                        if kind is _WALKED:
                            # No rule but the closer walk applies to steps and tool calls.
                            walk_steps[etype](closers, value)
                            plain = True
                        else:
                            plain = self._plain_checked(value, kind)
                    if plain:
                        if not run_len:
                            run_seq = seq
                        run_len += 1
                        out.append(value)
                        continue
            if run_len:
                self._skip_run(run_seq, run_len)
                run_len = 0
            clean = type(etype) is str  # anything else is an unknown type: the full path gates it
            if clean and etype in SURFACE_EVENT_TYPES:
                if seq < batch_end and self._appended_surface(value, etype):
                    event = value  # an append: the fold replaces nothing, the batch goes on
                else:
                    # The batch is full, or the full path may replace: the sink takes what it holds first.
                    if out and self.error is None:
                        self._hand_over(out, lines, base)
                        out, base = [], index
                    batch_end = seq + BATCH_EVENTS
                    event = self._process_clean(value, etype)  # the append's fast path first, as for any event
            else:
                event = self._process_clean(value, etype) if clean else self._process(value)
            if self.error_rank != NO_ERROR:
                items, accepted, expected = accept_values(values, index + 1, expected)
                self._accept_items(items)
                return accepted, expected
            if event is not None:
                out.append(event)
            elif not out:
                base = index + 1
            else:
                base = None  # a line without an item
        else:
            index = size
        if run_len:
            self._skip_run(run_seq, run_len)
        if out and self.error is None:
            last = out[-1]
            if type(last) is PackedRow:
                self.last_seq, self.last_time = expected - 1, last.times[-1]
            else:
                self.last_seq, self.last_time = last["seq"], last["time"]
            self._hand_over(out, lines, base)
        return index, expected

    def _hand_over(self, out: list[Any], lines: RegionLines | None, base: int | None) -> None:
        """Give ``out`` to the sink, with its raw lines when they are known."""
        if lines is None:
            self.sink(out)
        else:
            self.sink(out, lines.lines(out, base))

    def _plain_checked(self, event: Event, kind: str) -> bool:
        """Apply the rules of a plain turn event or request header; False (nothing changed) to take the full path.

        A turn event passes the legacy upgrade, which must leave it as it is
        (a current shape) for the event to count as plain, then the closer
        walk; a request header must pass its own checks.
        """
        if kind is _REQUEST:
            # The retired-vocabulary rule and the request-header checks, both pure.
            try:
                check_not_rejected_vocabulary(event)
                check_request_header(event)
            except EventShapeError:
                return False
            return True
        if kind is _TURN:
            try:
                if upgrade_event(event, self.session_id, self.tool_result_ids) is not event:
                    return False
            except EventShapeError:
                return False
        WALK_STEPS[event["type"]](self.closers, event)
        return True

    def _process_clean(self, raw: Event, etype: Any) -> Event | None:
        """:meth:`_process` for an event of (hashable) type ``etype`` while no stage has failed.

        The same stages in the same order, with the same failures; a stage is
        skipped only where its check is a no-op for the event's type (each
        check function looks at the type first).
        """
        if etype in SURFACE_EVENT_TYPES and self._appended_surface(raw, etype):
            return raw
        if etype in _VOCABULARY_CHECKED:
            try:
                check_not_rejected_vocabulary(raw)
            except EventShapeError as exc:
                self.fail("retired", str(exc))
                return None
        event = raw
        if etype in _UPGRADED_TYPES:
            if self.resuming and etype == "tool/result" and is_legacy_tool_result_replacement(raw):
                # The ids of earlier tool results are not kept across resumes.
                self.needs_history = True
            try:
                event = upgrade_event(raw, self.session_id, self.tool_result_ids)
            except EventShapeError as exc:
                self.fail("upgrade", str(exc))
                return None
            etype = event["type"]  # steering/message becomes user/message
        if etype in SURFACE_EVENT_TYPES:
            try:
                check_message_shape(event)
            except EventShapeError as exc:
                self.fail("message", str(exc))
                return None
            if etype == "tool/result":
                self._remember_tool_result(event)
        elif etype not in KNOWN_EVENT_TYPES:
            try:
                _gate(event)
            except EventShapeError as exc:
                self.fail("gate", str(exc), "unsupported")
                return None
        if etype in _CLOSER_TYPES:
            self.closers.observe(event)
        self.last_seq, self.last_time = event["seq"], event.get("time")
        try:
            check_envelope(event)
            if etype == "request/header":
                check_request_header(event)
            replacement = self.fold.apply(event)
            if replacement is not None:
                self.on_replacement(replacement.seq, tuple(replacement.shadowed_seqs))
        except (EventShapeError, SurfaceFoldError) as exc:
            self.fail("restore", str(exc))
        return event

    def _accept_items(self, items: list[Any]) -> None:
        deliver_per_line(items, self.accept)

    def _skip_run(self, first_seq: int, count: int) -> None:
        try:
            self.fold.skip_log_only(first_seq, count)
        except SurfaceFoldError as exc:
            self.fail("restore", str(exc))

    def _accepted(self, event: Event) -> Event | None:
        """An event that passed every coordinator stage: restore-check it unless skipping."""
        if self.error_rank < STAGE_RANK["restore"]:
            return None
        if self.error_rank == STAGE_RANK["restore"]:
            # Either a restore failure was recorded, or restore checks are skipped.
            return event if self.error is None else None
        if not self.defer_restore:
            self.restore_check(event, message_checked=True)
        return event

    def _accept_row(self, members: list[Event]) -> list[Event]:
        """Fast path for a packed row while no stage has failed.

        Row members were built and range-checked by the row decoder: a known
        type, a valid envelope, log-only, and inert for the closer walk, so
        only the surface fold (which tracks seq contiguity) needs to see them.
        """
        try:
            self.fold.skip_log_only(members[0]["seq"], len(members))
        except SurfaceFoldError as exc:
            self.fail("restore", str(exc))
        last = members[-1]
        self.last_seq, self.last_time = last["seq"], last["time"]
        return members

    def _process(self, raw: Any) -> Event | None:
        etype = raw.get("type") if type(raw) is dict else None
        if self.error_rank == NO_ERROR and not self.defer_restore and type(etype) is str and etype in _INERT_TYPES:
            return self._process_inert(raw)
        try:
            check_not_rejected_vocabulary(raw)
        except EventShapeError as exc:
            self.fail("retired", str(exc))
            return None
        if self.error_rank <= STAGE_RANK["upgrade"]:
            return None
        if self.resuming and is_legacy_tool_result_replacement(raw):
            # The ids of earlier tool results are not kept across resumes.
            self.needs_history = True
        try:
            event = upgrade_event(raw, self.session_id, self.tool_result_ids)
        except EventShapeError as exc:
            self.fail("upgrade", str(exc))
            return None
        if self.error_rank <= STAGE_RANK["message"]:
            return None
        try:
            check_message_shape(event)
        except EventShapeError as exc:
            self.fail("message", str(exc))
            return None
        self._remember_tool_result(event)
        if self.error_rank <= STAGE_RANK["gate"]:
            return None
        try:
            _gate(event)
        except EventShapeError as exc:
            self.fail("gate", str(exc), "unsupported")
            return None
        self.closers.observe(event)
        self.last_seq, self.last_time = event["seq"], event.get("time")
        return self._accepted(event)

    def _process_inert(self, event: Event) -> Event | None:
        """Fast path for known log-only types that no upgrade, message rule or
        closer walk concerns: only the envelope and the fold apply to them."""
        self.last_seq, self.last_time = event["seq"], event.get("time")
        try:
            check_envelope(event)
            self.fold.apply(event)
        except (EventShapeError, SurfaceFoldError) as exc:
            self.fail("restore", str(exc))
            return None
        return event

    def restore_check(self, event: Event, message_checked: bool = False) -> None:
        """Envelope, request header, message and surface validation of one event."""
        if self.error_rank <= STAGE_RANK["restore"]:
            return
        try:
            check_envelope(event)
            check_request_header(event)
            if not message_checked:
                check_message_shape(event)
            replacement = self.fold.apply(event)
            if replacement is not None:
                self.on_replacement(replacement.seq, tuple(replacement.shadowed_seqs))
        except EventShapeError as exc:
            self.fail("restore", str(exc))
        except SurfaceFoldError as exc:
            self.fail("restore", str(exc))

    def _appended_surface(self, event: Event, etype: str) -> bool:
        """Fast path for a current-shape surface event appended to the surface.

        Handles the event and returns True only when every coordinator stage
        passes (a message of the right shape makes the legacy upgrade the
        identity) and the envelope is valid; the fold may still refuse it, a
        restore failure as on the full path.  Otherwise changes nothing and
        returns False.
        """
        # The checks in C where it can tell (a current-shape message: nearly all), else in Python.
        if not (_appendable is not None and _appendable(event) is True or appendable_python(event)):
            return False
        time = event["time"]
        if etype == "tool/result":
            self._remember_tool_result(event)
        if etype != "user/message":
            WALK_STEPS[etype](self.closers, event)
        self.last_seq, self.last_time = event["seq"], time
        try:
            self.fold.append(event)
        except SurfaceFoldError as exc:
            self.fail("restore", str(exc))
        return True

    def _remember_tool_result(self, event: Event) -> None:
        if event.get("type") == "tool/result":
            data = event.get("data")
            message = data.get("message") if type(data) is dict else None
            if type(message) is dict and type(message.get("id")) is str:
                self.tool_result_ids[event["seq"]] = message["id"]


def appendable_python(event: Event) -> bool:
    """Whether a surface event passes the appended-surface fast path's checks: an append's
    envelope (``surfaceOp`` the str ``"append"``, a safe integer time, no other keys than an
    append's) and :func:`check_message_shape` (``indexer._linescan.appendable`` in C)."""
    op = event.get("surfaceOp")
    time = event.get("time")
    if not (
        type(op) is str
        and op == "append"
        and type(time) is int
        and -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
        and event["seq"] <= MAX_SAFE_INTEGER  # an int >= 0, the fold's next: the scanner checked it
        and "data" in event
        and event.keys() <= _APPEND_ENVELOPE
    ):
        return False
    try:
        check_message_shape(event)
    except EventShapeError:
        return False
    return True


_plain_run: Final = accelerated(LINESCAN, "plain_run")
_appendable: Final = accelerated(LINESCAN, "appendable")

BATCH_EVENTS: Final = 64
"""Events of a fast-path batch after which the next surface event starts a new one.

A batch runs on across appended surface events (their fold replaces nothing)
and ends before any other surface event, whose fold may replace rows the sink
must have taken first.  Each batch costs the sink a fixed amount (raw lines,
a split stream's op, the projector's add), and most events fall between
surface events a few at a time; the bound keeps a batch, and what the sink
holds between its flushes, small."""

# Known types that no legacy upgrade, message check, request-header check,
# retired-vocabulary rule or closer walk looks at.
_INERT_TYPES: Final = KNOWN_EVENT_TYPES - SURFACE_EVENT_TYPES - {
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "tool/call",
    "request/header",
}


# Dispatch sets of :meth:`_Pipeline._process_clean` (which checks apply to a type).
_VOCABULARY_CHECKED: Final = REJECTED_EVENT_TYPES | {"request/header"}
_UPGRADED_TYPES: Final = frozenset({"turn/start", "turn/end", "steering/message"}) | SURFACE_EVENT_TYPES
_CLOSER_TYPES: Final = frozenset(WALK_STEPS)

# Types whose plain events (core envelope, safe integer time) need only the fold,
# in runs: inert ones, those only the closer walk also looks at (turn events
# once the legacy upgrade has left them as they are), and request headers
# that pass their checks.
_INERT: Final = "inert"
_WALKED: Final = "walked"
_TURN: Final = "turn"
_REQUEST: Final = "request"
_RUN_KINDS: Final = {
    "request/header": _REQUEST,
    **{etype: _INERT for etype in _INERT_TYPES},
    **{etype: _WALKED for etype in (*_STEP_TYPES, "tool/call")},
    "turn/start": _TURN,
    "turn/end": _TURN,
}
# The fast path's dispatch on a line's "type": packed rows, and the run kinds.
_ROW: Final = "row"
_LINE_KINDS: Final = {**_RUN_KINDS, **{tag: _ROW for tag in ROW_TAGS}}
# Envelope keys of a surface event appended without a replacement.
_APPEND_ENVELOPE: Final = _CORE_ENVELOPE | {"surfaceOp", "sourceEventSeqs"}


def _gate(event: Any) -> None:
    if not is_known_or_ignorable(event):
        etype = event.get("type") if type(event) is dict else None
        raise EventShapeError(f"event {event.get('seq') if type(event) is dict else '?'} has unknown required type {clip_repr(etype)}")
