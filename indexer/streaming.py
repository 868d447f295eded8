"""One long log streamed to the writer: the worker's sending side.

A new log over :data:`~indexer.preparation.PREPARE_MAX_BYTES` is not prepared
whole: a worker runs :func:`~indexer.ingest.ingest_log` against a
:class:`StreamingCursor`, which hands its recording to the writer in chunks of
about :data:`STREAM_CHUNK_ROWS` rows as it grows (through an :class:`Outbox`,
a sender thread that compresses the chunk's raw blocks and writes the pipe),
and ends with how the log ended (:func:`stream_recording`'s protocol).  The
writer's end is :class:`~indexer.sessionstream.SessionStream`; a log read by
one worker and projected by another is :mod:`indexer.splitstream`.
"""

from __future__ import annotations

import queue
import resource
import threading
import time
from collections.abc import Sequence
from typing import Any, Final

from readmodel.store.blocks import compress_payload

from .ingest import LogOutcome, ingest_log
from .layout import Compression
from .preparation import BAD_LOG_ERRORS, PrepTask, Protocol5, RecordingCursor, adopt_dictionary, collector_paused, failure_of, take_warnings
from .projection import INSERT_BLOCK
from .workergc import settle_collector


class Outbox:
    """Messages sent on ``connection`` by a thread of their own, in the order they were posted.

    The thread's work (``prepare``, then pickling and the pipe's writes) mostly
    releases the GIL, so it overlaps with the poster's next piece of work; at
    most ``ahead`` messages wait for it (memory stays bounded), and a poster
    blocks while that many do.  :meth:`post` is the only way to the connection
    while the thread runs, and :meth:`finish` must be called before the
    connection is used (or closed) by anyone else.  What stopped the thread
    (a broken pipe: the reader stopped listening) is raised by the next
    :meth:`post` or by :meth:`finish`.
    """

    __slots__ = ("connection", "prepare", "_queue", "_thread", "_failure")

    def __init__(self, connection: Any, ahead: int, prepare: Any = None, name: str = "stream-sender") -> None:
        self.connection = connection
        self.prepare = prepare  # applied to each message on the thread before it is sent
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=ahead)
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._send_all, name=name, daemon=True)
        self._thread.start()

    def post(self, item: Any) -> None:
        """Queue ``item`` to be sent after everything posted before it."""
        self._put(item)
        if self._failure is not None:
            raise self._failure

    def finish(self) -> None:
        """Wait until everything posted has been sent; raises what stopped the thread, if anything."""
        if self._thread.is_alive():
            self._put(None)
            self._thread.join()
        if self._failure is not None:
            raise self._failure

    def _put(self, item: Any) -> None:
        while self._thread.is_alive():
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue  # the thread is blocked on the pipe, or has just failed

    def _send_all(self) -> None:
        prepare, send = self.prepare, self.connection.send
        try:
            while (item := self._queue.get()) is not None:
                send(prepare(item) if prepare is not None else item)
        except BaseException as exc:  # noqa: BLE001 - raised in the poster's thread by the next post or finish
            self._failure = exc


class StreamingCursor(RecordingCursor):
    """A recording sent to the writer in chunks of about ``chunk_rows`` rows as it grows.

    For one long log: the writer replays a chunk while the worker reads on,
    and the pipe's backpressure keeps at most a chunk or two in flight.

    Chunks leave through an :class:`Outbox`, whose thread also compresses the
    chunk's raw blocks (:meth:`insert_block` records them uncompressed):
    libzstd and the pipe's writes release the GIL, so compressing and sending
    overlap with the reading and folding of the next chunk — one log's
    preparation uses more than one core where one is free, and the worker no
    longer stops while the writer has not taken the previous chunk yet.  At
    most :data:`SEND_AHEAD` chunks wait for the thread (memory stays bounded),
    and every message leaves in the order it was posted: :meth:`post` is the
    only way to the connection while the thread runs, and :meth:`finish` must
    be called before the connection is used (or closed) by anyone else.
    """

    __slots__ = ("connection", "chunk_rows", "rows", "blocks", "payload_bytes", "_outbox")

    def __init__(self, connection: Any, chunk_rows: int) -> None:
        super().__init__()
        self.connection = connection
        self.chunk_rows = chunk_rows
        self.rows = 0
        self.blocks: list[int] = []  # positions in ``calls`` of raw blocks still to compress
        self.payload_bytes = 0  # their uncompressed bytes
        self._outbox = Outbox(connection, SEND_AHEAD, _compressed)

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        result = super().execute(sql, parameters)
        self.rows += 1
        if self.rows >= self.chunk_rows:
            self.send()
        return result

    def executemany(self, sql: str, rows: Any) -> Any:
        super().executemany(sql, rows)
        self.rows += len(self.calls[-1][1])
        if self.rows >= self.chunk_rows:
            self.send()
        return self

    def insert_block(self, key: tuple[int, int, int, int], payload: bytes) -> None:
        """Record a raw block's row with its payload uncompressed (the sender compresses it).

        Uncompressed payloads are several times their compressed size: a chunk also
        goes once it holds :data:`CHUNK_PAYLOAD_BYTES` of them."""
        self.blocks.append(len(self.calls))
        self.calls.append((INSERT_BLOCK, (*key, payload), False))
        self.rows += 1
        self.payload_bytes += len(payload)
        if self.rows >= self.chunk_rows or self.payload_bytes >= CHUNK_PAYLOAD_BYTES:
            self.send()

    def send(self) -> None:
        """Hand the recording so far to the sender (waits while :data:`SEND_AHEAD` chunks are queued)."""
        if self.calls:
            calls, blocks = self.calls, self.blocks
            self.calls, self.blocks, self.rows, self.payload_bytes = [], [], 0, 0
            self._outbox.post(("calls", calls, blocks))

    def post(self, message: tuple[Any, ...]) -> None:
        """Send ``message`` after every chunk handed over so far (rows recorded since the
        last :meth:`send` are not sent)."""
        self._outbox.post(message)

    def finish(self) -> None:
        """Wait until everything posted has been sent; raises what stopped the sender, if anything."""
        self._outbox.finish()


def _compressed(item: tuple[Any, ...]) -> Any:
    """A message as it goes to the writer: a chunk's raw blocks compressed (on the sender's thread),
    pickled with protocol 5 (the writer receives the message itself)."""
    if item[0] != "calls":
        return item
    _, calls, blocks = item
    for at in blocks:
        sql, args, many = calls[at]
        calls[at] = (sql, (*args[:4], bytearray(compress_payload(args[4]))), many)
    return Protocol5(("calls", calls))


SEND_AHEAD: Final = 2
"""Chunks of a streamed log recorded and waiting for the sender thread (a few MB each)."""


CHUNK_PAYLOAD_BYTES: Final = 4 * 1024 * 1024
"""Uncompressed raw-block bytes after which a streamed log's chunk is sent whatever its rows."""


STREAM_CHUNK_ROWS: Final = 8_192
"""Rows per message of a streamed log (a few MB of pickled rows)."""


def stream_session(
    task: PrepTask, compression: str, root: str, connection: Any, chunk_rows: int, dictionary: tuple[int, bytes] | None = None
) -> None:
    """A worker task for one long log: send its recording in chunks, then how it ended.

    Messages: ``("calls", calls)`` any number of times, then exactly one of
    ``("done", outcome, warnings, (cpu_seconds, peak_rss_kib, stages))``, ``("failed", (status, code,
    message))`` or ``("crashed", description)``; ``stages`` names the processes that
    prepared the log with each one's ``(name, cpu_seconds, peak_rss_kib)``.
    """

    def ingest(cursor: StreamingCursor) -> tuple[LogOutcome, tuple[tuple[str, float, int], ...]]:
        outcome = ingest_log(
            cursor, task.sid, task.path, Compression(compression), root, task.header, None, task.settled,
            fts=None, surface_keys={}, redact_documents=task.redact,
        )  # fmt: skip
        return outcome, ()

    stream_recording(task, connection, chunk_rows, dictionary, ingest, "stream")


class RelayedFailure(Exception):
    """Another process of a stream found the log bad: its ``(status, code, message)``."""

    def __init__(self, failure: tuple[str, str, str]) -> None:
        super().__init__(failure[2])
        self.failure = failure


def stream_recording(
    task: PrepTask,
    connection: Any,
    chunk_rows: int,
    dictionary: tuple[int, bytes] | None,
    ingest: Any,
    name: str,
) -> None:
    """Run ``ingest(cursor)`` against a :class:`StreamingCursor` on ``connection`` and send how it
    ended (the protocol of :func:`stream_session`).

    ``ingest`` returns the outcome and the costs of the other processes that
    worked on the log (``(name, cpu_seconds, peak_rss_kib)`` each); this one's is
    added as ``name``.  A bad log (one of :data:`BAD_LOG_ERRORS`, or a
    :class:`RelayedFailure`) ends as ``failed``, anything else unexpected as
    ``crashed`` (the writer then ingests the log itself).
    """
    settle_collector()
    adopt_dictionary(dictionary)
    cursor = StreamingCursor(connection, chunk_rows)
    started = time.process_time()
    take_warnings().clear()
    try:
        try:
            with collector_paused():
                outcome, others = ingest(cursor)
            cursor.send()
        except RelayedFailure as exc:
            cursor.post(("failed", exc.failure))
            return
        except BAD_LOG_ERRORS as exc:
            cursor.post(("failed", failure_of(exc, task.header["id"])))
            return
        except Exception as exc:  # noqa: BLE001 - handed back: the writer redoes the session itself
            cursor.post(("crashed", f"{type(exc).__name__}: {exc}"))
            return
        warnings = list(take_warnings())
        cursor.finish()  # every chunk sent: the sender's CPU time counts too, and the connection is free
        stages = (*others, (name, time.process_time() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
        cost = (sum(stage[1] for stage in stages), max(stage[2] for stage in stages), stages)
        connection.send(("done", outcome, warnings, cost))
    except OSError:
        pass  # the writer stopped listening (it failed the session, or it is gone)
    finally:
        try:
            cursor.finish()
        except OSError:
            pass
        connection.close()
