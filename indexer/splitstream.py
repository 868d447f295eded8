"""One long new log prepared by two worker processes: one reads it, the other projects it.

A long log is streamed to the writer by one worker (:func:`~indexer.streaming.stream_session`),
whose one thread decodes, validates and folds the log (the reader) and shapes its
rows (the projection): on two cores that worker is the cold build's critical
path while the second core is mostly idle.  Here the same work runs as a
pipeline across two processes:

* the **reading stage** (:func:`read_stage`) runs the very reader
  :func:`~indexer.ingest.ingest_log` runs (:func:`~indexer.ingest.log_reader`),
  with a sink that forwards what the reader hands over — each ``add`` of a
  batch of events and each replacement, in the order the reader makes those
  calls — to
* the **projecting stage** (:func:`project_stage`), which makes exactly those
  calls on a :class:`~indexer.projection.SessionProjector`, finishes the log as
  ``ingest_log`` does (:func:`~indexer.ingest.conclude_ingest`) and streams the
  recording to the writer as a single worker does
  (:func:`~indexer.streaming.stream_recording`).

Why the index is the same: the projector sees the same calls, with the same
batches, in the same order, as it does in one process, and its batches decide
every row boundary (flushes, runs, blocks); the reader's failures, and the
projector's, are reported in the order a single process would meet them (the
projecting stage applies every forwarded call before the reader's last word).
What crosses the pipe is chosen to cost the reading stage little and the
projecting stage less than decoding the events again (pickling the events
themselves costs about what decoding them does):

* every batch's raw lines, taken from the log by the reader where proven
  (:mod:`indexer.rawlines`) or encoded once by the reading stage
  (``encode_items``, which the projector would have run), and given to the
  projector as they are (``add(events, lines)``);
* for events the projector reads only the type, seq and time of (neither a
  surface nor a text type, no ``sourceEventSeqs``: request headers, chunks,
  steps — most events and most bytes), those three values, from which the
  projecting stage builds a small dict;
* the other events as their lines among the batch's (only their positions
  cross again), which the reading stage has checked decode back to values
  equal to the events (else the events go pickled): JSON keeps key order and
  the int/float/bool distinctions, so equal values are the same values to the
  projector.

Bounded memory: the reading stage sends messages of about :data:`OPS_BYTES` and
at most :data:`OPS_AHEAD` wait for its sender thread; the pipe's backpressure
does the rest.  Anything unexpected in either process ends the stream as
"crashed", and the writer then ingests the log itself (as for a single worker).
"""

from __future__ import annotations

import os
import pickle
import resource
import select
import struct
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Final

import msgspec

from readmodel.projection.extraction import TEXT_EVENT_TYPES
from readmodel.projection.surface import SURFACE_EVENT_TYPES
from readmodel.core.accelerators import LINESCAN, accelerated
from readmodel.store.blocks import encode_events

from .ingest import LogOutcome, conclude_ingest, log_reader
from .layout import Compression
from .preparation import BAD_LOG_ERRORS, PrepTask, alive, collector_paused, failure_of, note_warning, stream_pipe, take_warnings
from .streaming import Outbox, RelayedFailure, StreamingCursor, stream_recording
from .projection import SessionProjector, encode_items, expanded_items
from .packedrows import CHUNK_TYPE, PackedRow
from .workergc import settle_collector
from .columnadd import add_columns

OPS_BYTES: Final = 1 << 20
"""Bytes of lines after which the reading stage sends what it has forwarded."""
OPS_AHEAD: Final = 4
"""Messages of the reading stage waiting for its sender thread."""
SPLIT_ENV: Final = "SESSIONQ_SPLIT_STREAM"
"""``0`` in the environment: a long new log streams from one worker, as before."""

_FULL_TYPES: Final = SURFACE_EVENT_TYPES | TEXT_EVENT_TYPES
"""Types whose events the projector reads more of than type, seq and time."""
_ADD: Final = 0
_REPLACE: Final = 1
_WARN: Final = 2

_decode_lines: Final = msgspec.json.Decoder().decode_lines


def split_wanted(workers: int) -> bool:
    """Whether a long new log is split across two workers (it needs two of them)."""
    return workers >= 2 and os.environ.get(SPLIT_ENV, "1") != "0"


def submit_split(
    pool: ProcessPoolExecutor, task: PrepTask, compression: str, root: str, connection: Any, chunk_rows: int, dictionary: tuple[int, bytes] | None, context: Any
) -> tuple[list[Future[None]], list[Any]]:
    """Start both stages of ``task`` on ``pool``; the projecting one sends to ``connection``.

    Returns the futures (the reading stage's first, so it was queued — and its
    arguments pickled — first) and the writer's ends of the pipe between the
    stages, to close once the projecting stage has answered (then the stages see
    each other's end: the writer's copies would hide it).
    """
    receive, send = stream_pipe(context)
    reading = pool.submit(read_stage, task, compression, root, send, OPS_BYTES)
    projecting = pool.submit(project_stage, task, root, receive, connection, chunk_rows, dictionary)
    return [reading, projecting], [receive, send]


# -- the pipe between the stages ------------------------------------------------------

_HEAD: Final = struct.Struct("<QQ")  # a frame's size, and the size of its pickled part
_IOV_MAX: Final = 512
"""Buffers per ``writev`` (Linux takes up to 1024)."""


class FrameWriter:
    """The reading stage's end of the pipe: messages as frames of their own.

    A ``Connection`` pickles a message whole, copying every batch's lines into
    the pickle and out of it again at the other end, and reads a long message
    in pieces it allocates one by one; the lines are most of what crosses (about
    four bytes in five).  A frame is a header, the message pickled with each
    ``_ADD`` op's lines replaced by their length, and the lines themselves,
    written from where they are (``writev``).  Only :class:`FrameReader` reads it.
    """

    __slots__ = ("fd",)

    def __init__(self, connection: Any) -> None:
        self.fd = connection.fileno()

    def send(self, message: tuple[Any, ...]) -> None:
        """Write ``message`` whole (blocks while the pipe is full; ``BrokenPipeError``: no reader)."""
        lines: list[bytes] = []
        if message[0] == "ops":
            ops = []
            for op in message[1]:
                if op[0] == _ADD:
                    lines.append(op[3])
                    op = (*op[:3], len(op[3]), *op[4:])
                ops.append(op)
            message = ("ops", ops)
        pickled = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        size = len(pickled) + sum(map(len, lines))
        self._write([_HEAD.pack(size, len(pickled)), pickled, *lines])

    def _write(self, buffers: list[bytes]) -> None:
        fd = self.fd
        for start in range(0, len(buffers), _IOV_MAX):
            batch = buffers[start : start + _IOV_MAX]
            done = os.writev(fd, batch)
            total = sum(map(len, batch))
            if done < total:  # a pipe takes a long write in parts: the rest, from where it stopped
                rest = memoryview(b"".join(batch))[done:]
                while rest:
                    rest = rest[os.write(fd, rest) :]


class FrameReader:
    """The projecting stage's end of the pipe (see :class:`FrameWriter`); one buffer, reused."""

    __slots__ = ("connection", "fd", "buffer")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.fd = connection.fileno()
        self.buffer = bytearray(OPS_BYTES * 2)

    def poll(self, timeout: float) -> bool:
        """Whether a frame (or the end) can be read within ``timeout`` seconds."""
        return bool(self.connection.poll(timeout))

    def recv(self) -> tuple[Any, ...]:
        """The next message; ``EOFError`` at the end of the pipe."""
        head = self._read(_HEAD.size)
        size, pickled = _HEAD.unpack(head)
        if size > len(self.buffer):
            self.buffer = bytearray(size)
        view = self._read_into(size)
        message = pickle.loads(view[:pickled])
        if message[0] == "ops":
            at = pickled
            ops = message[1]
            for index, op in enumerate(ops):
                if op[0] == _ADD:
                    length = op[3]
                    ops[index] = (*op[:3], bytes(view[at : at + length]), *op[4:])
                    at += length
        return message  # type: ignore[no-any-return]

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            more = os.read(self.fd, size - len(data))
            if not more:
                raise EOFError
            data += more
        return data

    def _read_into(self, size: int) -> memoryview:
        view = memoryview(self.buffer)[:size]
        got = 0
        while got < size:
            read = os.readv(self.fd, [view[got:]])
            if not read:
                raise EOFError
            got += read
        return view


# -- the reading stage ------------------------------------------------------------


class Forwarder:
    """The reading stage's sink and replacement hook: records the calls and posts them in order.

    Messages are ``("ops", ops)``; an op is ``(_ADD, first_seq, count, lines,
    types, times, full_at, full)``, ``(_REPLACE, seq, shadowed)`` or ``(_WARN,
    message)`` (a warning the reader logged before the next call).  ``types`` is
    ``None`` when the whole batch is in ``full`` (a list of events); otherwise
    the events at positions ``full_at`` are ``full`` (a list of events) or, when
    ``full`` is ``None``, those positions' lines of ``lines`` decoded.
    """

    __slots__ = ("outbox", "ops_bytes", "ops", "size", "warned")

    def __init__(self, outbox: Outbox, ops_bytes: int = OPS_BYTES) -> None:
        self.outbox = outbox
        self.ops_bytes = ops_bytes
        self.ops: list[tuple[Any, ...]] = []
        self.size = 0
        self.warned = 0

    def add(self, events: list[Any], lines: bytes | None = None) -> None:
        """Forward one batch of the reader's events (its ``sink``; an item may be a
        :class:`~indexer.packedrows.PackedRow` standing for its members), with its
        raw lines when the reader has them (``encode_items(events)``)."""
        self._warnings()
        op = _column_op(events, lines)
        self.ops.append(op)
        self.size += len(op[3])
        if self.size >= self.ops_bytes:
            self.flush()

    def replacement(self, seq: int, shadowed: tuple[int, ...]) -> None:
        """Forward one replacement (the reader's ``on_replacement``)."""
        self._warnings()
        self.ops.append((_REPLACE, seq, shadowed))

    def flush(self) -> None:
        """Post what was forwarded since the last message."""
        self._warnings()
        if self.ops:
            ops, self.ops, self.size = self.ops, [], 0
            self.outbox.post(("ops", ops))

    def _warnings(self) -> None:
        messages = take_warnings()
        if len(messages) > self.warned:
            self.ops.extend((_WARN, message) for message in messages[self.warned :])
            self.warned = len(messages)


_batch_columns: Final = accelerated(LINESCAN, "batch_columns")


def _column_op(items: list[Any], lines: bytes | None = None) -> tuple[Any, ...]:
    """The ``_ADD`` op of a batch of the reader's items (dicts, and packed rows): its columns
    from ``indexer._linescan.batch_columns`` when built and the batch is one it takes (the
    common case: a few C steps per event instead of several Python ones), else
    :func:`_column_op_python`'s; the same op either way (a property test holds them equal).
    ``lines``, when given, are the batch's raw lines (``encode_items(items)``, by the reader)."""
    columns = _batch_columns(items, PackedRow, CHUNK_TYPE, _FULL_TYPES) if _batch_columns is not None else None
    if columns is None:
        return _column_op_python(items, lines)
    first, types, times, full_at, full, packed = columns
    if lines is None:
        lines = encode_items(items) if packed else encode_events(items)
    return (_ADD, first, len(types), lines, types, times, full_at, _full_payload(full, lines, full_at) if full_at else None)


def _column_op_python(items: list[Any], lines: bytes | None = None) -> tuple[Any, ...]:
    """:func:`_column_op` in Python."""
    return _packed_op(items, lines) if PackedRow in map(type, items) else _plain_op(items, lines)


def _plain_op(events: list[dict[str, Any]], lines: bytes | None = None) -> tuple[Any, ...]:
    """The ``_ADD`` op of a batch of events (dicts only; ``lines``: their raw lines, when known)."""
    count = len(events)
    if lines is None:
        lines = encode_events(events)
    first = events[0]["seq"]
    full_types = _FULL_TYPES
    seqs = [event["seq"] for event in events]
    if type(first) is int and seqs == list(range(first, first + count)):
        types = [event["type"] for event in events]
        times = [event.get("time") for event in events]
        full_at = [at for at, event in enumerate(events) if "sourceEventSeqs" in event or type(etype := event["type"]) is not str or etype in full_types]
        full: Any = _full_payload([events[at] for at in full_at], lines, full_at) if full_at else None
        return (_ADD, first, count, lines, types, times, full_at, full)
    return (_ADD, first, count, lines, None, None, None, list(events))  # never seen (the sink's contract): everything as it is


def _packed_op(items: list[Any], lines: bytes | None = None) -> tuple[Any, ...]:
    """The ``_ADD`` op of a batch holding packed rows: the op :func:`_plain_op` makes of
    the expanded batch, without building the members (a packed row's members are
    chunks, of which the projector reads only type, seq and time)."""
    if lines is None:
        lines = encode_items(items)
    full_types = _FULL_TYPES
    types: list[Any] = []
    times: list[Any] = []
    full_at: list[int] = []
    full_events: list[dict[str, Any]] = []
    first = items[0].first_seq if type(items[0]) is PackedRow else items[0]["seq"]
    expected = first
    contiguous = type(first) is int
    for item in items:
        if type(item) is PackedRow:
            seq, count = item.first_seq, len(item.times)
            types += [CHUNK_TYPE] * count
            times += item.times
        else:
            seq, count, etype = item["seq"], 1, item["type"]
            if "sourceEventSeqs" in item or type(etype) is not str or etype in full_types:
                full_at.append(len(types))
                full_events.append(item)
            types.append(etype)
            times.append(item.get("time"))
        contiguous = contiguous and seq == expected and type(seq) is int
        expected = seq + count if type(seq) is int else expected
    if not contiguous:
        return _plain_op(expanded_items(items), lines)
    return (_ADD, first, len(types), lines, types, times, full_at, _full_payload(full_events, lines, full_at) if full_at else None)


_json_exact: Final = accelerated(LINESCAN, "json_exact")
_lines_at: Final = accelerated(LINESCAN, "lines_at")


def _full_payload(events: list[dict[str, Any]], batch_lines: bytes, positions: list[int]) -> list[dict[str, Any]] | None:
    """What an op carries of the events it sends in full: ``None`` when their lines decode back
    to values equal to them (the projecting stage then decodes those lines out of the
    batch's, :func:`lines_at`), else the events themselves.

    ``events`` are the batch's events at ``positions`` (ascending), and
    ``batch_lines`` the batch's lines (one per event, from ``encode_events``,
    whose line of an event depends on that event alone).  A decoded event
    differs from the reader's only where JSON cannot say what the value was: a
    non-finite float (the standard library reads ``1e999`` as infinity; msgspec
    writes it as ``null``), a tuple, ``msgspec.Raw``.  Events made only of
    JSON's own values (``indexer._linescan.json_exact``: nearly all of them)
    are not decoded back to compare: that was 8% of a long log's reading stage.
    Their lines are not sent a second time either (they are in the batch's).
    """
    if _json_exact is not None and _json_exact(events):
        return None  # only JSON's own values: they decode back equal (no need to decode them to see)
    try:
        if _decode_lines(lines_at(batch_lines, positions)) == events:
            return None
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        pass
    return events


def lines_at(batch_lines: bytes, positions: list[int]) -> bytes:
    """The LF-terminated lines of ``batch_lines`` at ``positions`` (ascending, within its lines), joined."""
    lines = _lines_at(batch_lines, positions) if _lines_at is not None else None
    if lines is None:
        every = batch_lines.split(b"\n")  # the last piece is the empty one after the final LF
        lines = b"\n".join([every[at] for at in positions]) + b"\n"
    return lines  # type: ignore[no-any-return]


def read_stage(task: PrepTask, compression: str, root: str, target: Any, ops_bytes: int = OPS_BYTES) -> None:
    """A worker task: read ``task``'s log, forwarding the reader's calls to the projecting stage.

    Messages on ``target``: ``("hello", pid)``, any number of ``("ops", ops)``
    (:class:`Forwarder`), then exactly one of ``("read", decoded, (cpu_seconds,
    peak_rss_kib))`` (the reader's result, without events), ``("failed",
    (status, code, message))`` or ``("crashed", description)``.
    """
    settle_collector()
    started = time.process_time()
    channel = FrameWriter(target)
    outbox = Outbox(channel, OPS_AHEAD, name="split-read-sender")
    forward = Forwarder(outbox, ops_bytes)
    take_warnings().clear()
    try:
        outbox.post(("hello", os.getpid()))
        try:
            with collector_paused():
                # The projector is in the other process: nothing here asks for the fold's digests.
                reader = log_reader(task.path, Compression(compression), root, task.header, forward.add, forward.replacement, None, remember_digests=False)
                decoded = reader.read(None)
            forward.flush()
        except BAD_LOG_ERRORS as exc:
            # The calls made before the failure go first: the projector may fail on one of them first.
            forward.flush()
            outbox.post(("failed", failure_of(exc, task.header["id"])))
            return
        except Exception as exc:  # noqa: BLE001 - the writer ingests the log itself
            forward.flush()
            outbox.post(("crashed", f"{type(exc).__name__}: {exc}"))
            return
        outbox.finish()  # the sender's CPU time counts too, and the connection is free
        channel.send(("read", decoded, (time.process_time() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))
    except OSError:
        pass  # the projecting stage stopped listening (it failed, or the writer let the log go)
    finally:
        try:
            outbox.finish()
        except OSError:
            pass
        target.close()


# -- the projecting stage ---------------------------------------------------------


class StageCrashed(Exception):
    """The reading stage ended unexpectedly (the writer ingests the log itself)."""


def project_stage(task: PrepTask, root: str, source: Any, connection: Any, chunk_rows: int, dictionary: tuple[int, bytes] | None) -> None:
    """A worker task: project what the reading stage forwards from ``source`` and stream the
    recording to the writer on ``connection`` (the protocol of :func:`~indexer.streaming.stream_session`)."""
    try:
        stream_recording(task, connection, chunk_rows, dictionary, lambda cursor: _project(cursor, task, source, connection), "project")
    finally:
        source.close()


def _project(cursor: StreamingCursor, task: PrepTask, source: Any, writer: Any) -> tuple[LogOutcome, tuple[tuple[str, float, int], ...]]:
    """``ingest_log`` of a cold read, its reader being the reading stage's."""
    surface_keys: dict[int, int] = {}
    projector = SessionProjector(cursor, task.sid, 0, fts=None, surface_keys=surface_keys, redact_documents=task.redact)
    replacement = projector.replacement
    for message in _received(FrameReader(source), writer):
        kind = message[0]
        if kind == "ops":
            for op in message[1]:
                code = op[0]
                if code == _ADD:
                    apply_add(projector, op)
                elif code == _REPLACE:
                    replacement(op[1], op[2])
                else:
                    note_warning(op[1])
        elif kind == "read":
            outcome = conclude_ingest(
                cursor, task.sid, projector, message[1], 0, task.settled, None, fts=None, surface_keys=surface_keys, redact_documents=task.redact
            )  # fmt: skip
            return outcome, (("read", *message[2]),)
        elif kind == "failed":
            raise RelayedFailure(message[1])
        elif kind == "crashed":
            raise StageCrashed(message[1])
    raise StageCrashed("the reading process ended without its last message")


def apply_add(projector: SessionProjector, op: tuple[Any, ...]) -> None:
    """Make ``projector`` take the batch of an ``_ADD`` op, as ``projector.add(_events(op), lines)`` would."""
    if op[4] is not None and projector.use_runs:  # columns: no dict for an event the projector reads no more of
        add_columns(projector, op[1], op[4], op[5], op[6], _full_events(op), op[3])
    else:
        projector.add(_events(op), op[3])


def _events(op: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The batch of events an ``_ADD`` op stands for (see :class:`Forwarder`)."""
    _, first, count, _lines, types, times, full_at, full = op
    if types is None:
        return full  # type: ignore[no-any-return]
    events = [{"type": etype, "seq": seq, "time": at} for etype, seq, at in zip(types, range(first, first + count), times)]
    for at, event in zip(full_at, _full_events(op)):
        events[at] = event
    return events


def _full_events(op: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The events an ``_ADD`` op with columns sends in full, at its ``full_at`` positions."""
    full_at = op[6]
    if not full_at:
        return []
    full = op[7]
    return full if full is not None else _decode_lines(lines_at(op[3], full_at))  # type: ignore[no-any-return]


def _received(source: Any, writer: Any) -> Any:
    """The reading stage's messages, until its connection ends or it is gone.

    Also ends (with ``BrokenPipeError``) when the writer has stopped listening,
    so neither stage waits forever for the other.
    """
    reader_pid: int | None = None
    watch = select.poll()
    watch.register(writer.fileno(), select.POLLERR)  # a pipe's write end: the reader closed it
    while True:
        if source.poll(0.2):
            try:
                message = source.recv()
            except EOFError:
                return
            if message[0] == "hello":
                reader_pid = message[1]
                continue
            yield message
            if message[0] != "ops":
                return
            continue
        if reader_pid is not None and not alive(reader_pid):
            return
        if watch.poll(0):
            raise BrokenPipeError("the writer stopped listening")

