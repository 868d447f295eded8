"""Preparing new sessions in worker processes while the one writer commits.

A cold build spends about two thirds of its CPU reading logs and shaping rows
(decompressing, validating, folding, extracting documents, encoding and
compressing raw blocks) and one third in SQLite.  Threads cannot share that
work — the reader is Python and the ``sqlite3`` module takes the GIL back for
every bound row — so sessions new to the index are *prepared* in worker
processes: each worker runs :func:`~indexer.ingest.ingest_log` against a
:class:`RecordingCursor`, which records the writes instead of executing them,
and the writer replays the recording inside the session's savepoint, exactly
where it would have ingested the session itself.  The index stays single
writer: workers never open the database.

Why the result is the same index:

* a session new to the index has no rows, so the only reads its ingest makes
  (surface keys of nodes it flushed earlier) are answered from the
  projectors' own map (``surface_keys``), and a recording answers any other
  read with "no row", which is what the database would say;
* the writer replays the writes in their recorded order, stores the documents
  (finding their texts in the index) and feeds their search rows to its own
  :class:`~indexer.projection.DeferredFts` at the points the projector
  handed them over, and sets generation and time itself — a prepared session
  lands in whichever transaction is open when its turn comes;
* a log the reader rejects comes back as its failure (status, code, message),
  recorded by the writer as it records its own; anything unexpected in a
  worker (a bug, a dead process) makes the writer ingest that session itself,
  so it fails, if it must, the way it always did.

Memory stays bounded: only logs up to :data:`PREPARE_MAX_BYTES` are prepared
(larger ones are ingested by the writer, streaming), and at most
:data:`WINDOW_BYTES` of logs are handed out ahead of the writer.
"""

from __future__ import annotations

import fcntl
import gc
import logging
import multiprocessing
import os
import pickle
import resource
import select
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from itertools import groupby
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Final

import msgspec

from .failures import as_query_error
from .ingest import LogOutcome, ingest_log, session_columns
from .layout import Compression
from .projection import insert_documents
from .records import LogFormatError
from .workergc import chunk_stretch
from readmodel.store.blocks import active_dictionary, use_dictionary

log = logging.getLogger("sessionq.indexer")

PREPARE_MAX_BYTES: Final = 16 * 1024 * 1024
"""Larger logs are ingested by the writer itself (their rows would not fit a bounded window)."""
WINDOW_BYTES: Final = 8 * 1024 * 1024
"""Compressed bytes of logs handed to workers and not yet replayed by the writer: a
few chunks per worker keep them busy, and a prepared session in memory takes several
times its log's size."""
CHUNK_BYTES: Final = 1024 * 1024
CHUNK_SESSIONS: Final = 64
"""Sessions per worker task: enough to amortise the pool's per-task cost (~0.1 ms)."""
RAMP_SESSIONS: Final = 4
"""The smallest task at either end of a pass (:func:`ramped_chunks`)."""
MIN_PARALLEL_BYTES: Final = 8 * 1024 * 1024
"""A pass with fewer bytes of new logs than this is not worth starting processes for."""

WORKER_NICENESS: Final = 10
"""Workers run this much nicer than the writer (``os.nice``)."""

BAD_LOG_ERRORS: Final = (LogFormatError, OSError, ValueError, TypeError)
"""What the reader and projector raise for a bad log (the writer adds ``sqlite3.DataError``)."""


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a bounded stretch of bulk work.

    Decoding a log allocates a dict or list per event, and the collector runs a
    pass every 700 net container allocations, walking the young objects — and
    now and then every object — to find almost nothing: reading a log leaves
    a few dozen cyclic objects per *session* (its pipeline's callbacks hold
    the pipeline), none per event (a 748,289-event log: 3,000 in all, the
    same peak RSS with the collector off).  Turning it off while a worker
    prepares a chunk or streams a log, and while the writer replays a
    parallel pass (which includes unpickling the workers' answers), saved 8%
    of a worker's CPU and two thirds of the unpickling in a same-process
    A/B.  Reference counting frees everything else as before; the cycles of
    a stretch wait until it ends, so a stretch must be bounded in sessions
    (a chunk; one streamed log; the writer collects as it goes, see
    :data:`WRITER_COLLECT_EVERY`).  Nests: the collector is back on only when
    the outermost stretch ends, and only if it was on before it.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


DEFAULT_MAX_WORKERS: Final = 4
"""More workers than this outrun the one writer without making the build faster."""


def default_workers() -> int:
    """One preparation process per core the indexer may use, at most :data:`DEFAULT_MAX_WORKERS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, DEFAULT_MAX_WORKERS))


def failure_of(exc: BaseException, session_id: str) -> tuple[str, str, str]:
    """``(status, code, message)`` the session row records for a bad log."""
    error = as_query_error(exc, session_id)
    if isinstance(exc, LogFormatError):
        status = "unsupported" if exc.kind == "unsupported" else "corrupt"
    else:
        status = "error"
    return status, error.code, error.message


# -- recording -------------------------------------------------------------------


class _NoRows:
    """The answer to a read through a recording: no row (the session has none yet)."""

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Any:
        return iter(())


_NO_ROWS: Final = _NoRows()


class RecordingCursor:
    """Stands in for the writer's cursor while a new session is ingested elsewhere.

    ``calls`` holds ``(sql, parameters, many)`` in call order; an entry whose
    ``sql`` is ``None`` carries documents (:func:`indexer.projection.insert_documents`,
    which the writer runs again when it replays them: it finds their texts in the
    index and hands their search rows to its own buffer).  Reads return no rows:
    valid only for a session that has no rows in the index.
    """

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, Any, bool]] = []

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        if sql.startswith("SELECT"):
            return _NO_ROWS
        self.calls.append((sql, parameters, False))
        return self

    def executemany(self, sql: str | None, rows: Any) -> Any:
        self.calls.append((sql, rows if type(rows) is list else list(rows), True))
        return self

    def insert_documents(self, docs: Any, fts: Any) -> None:
        """Record documents in the call order (see :func:`indexer.projection.insert_documents`)."""
        self.executemany(None, docs)


def replay(cur: Any, calls: Sequence[tuple[str | None, Any, bool]], fts: Any) -> None:
    """Execute a recording on the writer's cursor (documents' search rows go to ``fts``).

    A recording holds writes only: a cursor with a ``pipeline()`` (a server's,
    :mod:`indexer.pgwriter`) sends each run of them in one round trip; an error
    is raised when the run ends, still inside the caller's savepoint.
    """
    pipeline = getattr(cur, "pipeline", None)
    for search_rows, run in groupby(calls, key=_is_search_rows):
        if search_rows:
            for _sql, docs, _many in run:
                insert_documents(cur, docs, fts)
            continue
        with pipeline() if pipeline is not None else nullcontext():
            for sql, args, many in run:
                if many:
                    cur.executemany(sql, args)
                else:
                    cur.execute(sql, args)


def _is_search_rows(call: tuple[str | None, Any, bool]) -> bool:
    return call[0] is None


# -- the work of one worker ---------------------------------------------------------


class PrepTask(msgspec.Struct, array_like=True):
    """One new session for a worker (``settled`` is decided by the writer's clock)."""

    path: str
    sid: int
    header: dict[str, Any]
    settled: bool
    size: int
    redact: bool = True  # documents get secret markers (readmodel.projection.secrets)


class Prepared(msgspec.Struct):
    """A worker's answer for one session: a recording and its outcome, or the log's failure."""

    path: str
    sid: int
    calls: list[tuple[str | None, Any, bool]] = []
    outcome: LogOutcome | None = None
    columns: tuple[Any, ...] | None = None  # the session row's header columns (ingest.session_columns)
    failure: tuple[str, str, str] | None = None  # (status, code, message)
    warnings: list[str] = []
    crashed: str | None = None  # an unexpected exception: the writer ingests the session itself


class _Capture(logging.Handler):
    """Collects a worker's warnings, which the writer logs as its own."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


_capture: _Capture | None = None


def take_warnings() -> list[str]:
    """The warnings this worker captured since its task began (the list itself; empty outside a worker)."""
    return _capture.messages if _capture is not None else []


def note_warning(message: str) -> None:
    """Capture a warning logged by another process of the same stream, in its place."""
    if _capture is not None:
        _capture.messages.append(message)


def _init_worker(writer_pid: int, lower_now: bool = True) -> None:
    global _capture
    # The writer owns shutdown: a terminal's ^C reaches the whole process group.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A forked worker inherits the writer's handlers (the daemon's stop-at-a-boundary):
    # a terminated worker must end like a fork server's does.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # The writer is the one serial stage: when the cores are short, it goes first
    # (a cold start's workers: once they have done the head's work, lower_priority).
    if lower_now:
        _lower_priority()
    threading.Thread(target=_exit_with, args=(writer_pid,), name="writer-watch", daemon=True).start()
    _capture = _Capture()
    logger = logging.getLogger("sessionq")
    logger.addHandler(_capture)
    logger.setLevel(logging.WARNING)
    logger.propagate = False


def _lower_priority() -> None:
    try:
        os.nice(WORKER_NICENESS)
    except (AttributeError, OSError):  # not POSIX, or not permitted: equal priority is still correct
        pass


def lower_priority(pool: ProcessPoolExecutor) -> None:
    """Give the workers of ``pool`` (forked with ``head_first``) the priority they start with otherwise.

    A cold start's workers list the root and train the dictionary at the
    writer's priority: that work is the build's serial stage then (the
    writer waits for it), and niced, it waited for any other process on
    the machine.  Renicing another process of the same user to a lower
    priority needs no privilege; the pool's process table is private to
    ``concurrent.futures``, so without it the workers keep the writer's.
    """
    processes = getattr(pool, "_processes", None) or {}
    try:
        target = os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS
        for pid in list(processes):
            os.setpriority(os.PRIO_PROCESS, pid, target)
    except (AttributeError, OSError):  # not POSIX, or a worker gone: equal priority is still correct
        pass


def _exit_with(writer_pid: int) -> None:
    """End this worker when the writer process ends, however it ends.

    A worker is a child of the fork server, not of the writer, and holds its
    own task queue's pipe open: if the writer is killed (SIGKILL, OOM) the
    worker would wait for tasks forever.
    """
    try:
        watch = os.pidfd_open(writer_pid)
    except (AttributeError, OSError):  # not Linux 5.3+: poll
        while alive(writer_pid):
            time.sleep(1.0)
    else:
        poller = select.poll()  # not select(): it refuses descriptors >= 1024
        poller.register(watch, select.POLLIN)
        poller.poll()  # readable once the writer has exited
    os._exit(0)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prepare_one(task: PrepTask, compression: Compression, root: str) -> Prepared:
    cursor = RecordingCursor()
    if _capture is not None:
        _capture.messages = []
    try:
        outcome = ingest_log(
            cursor, task.sid, task.path, compression, root, task.header, None, task.settled,
            fts=None, surface_keys={}, redact_documents=task.redact,
        )  # fmt: skip
    except BAD_LOG_ERRORS as exc:
        return Prepared(task.path, task.sid, failure=failure_of(exc, task.header["id"]))
    except Exception as exc:  # noqa: BLE001 - handed back: the writer redoes the session itself
        return Prepared(task.path, task.sid, crashed=f"{type(exc).__name__}: {exc}")
    warnings = list(_capture.messages) if _capture is not None else []
    return Prepared(task.path, task.sid, cursor.calls, outcome, session_columns(task.header), warnings=warnings)


class ChunkResult(msgspec.Struct, array_like=True):
    """A worker task's answer: its sessions, and what preparing them cost the worker."""

    sessions: list[Prepared]
    cpu_seconds: float
    peak_rss_kib: int

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with protocol 5 inside whatever protocol carries it.

        The pool pickles answers with the default protocol (4 before Python
        3.14), which writes each ``bytearray`` (raw blocks, run members, blobs:
        a few per session and one per cited provenance list) through its
        ``__reduce_ex__``; protocol 5 has an opcode for them.  Pickling a
        chunk's answer took 30% less CPU, reading it back 10% less.
        """
        return (_chunk_result, (pickle.dumps((self.sessions, self.cpu_seconds, self.peak_rss_kib), protocol=5),))


def _chunk_result(pickled: bytes) -> ChunkResult:
    """The :class:`ChunkResult` its ``__reduce__`` pickled."""
    return ChunkResult(*pickle.loads(pickled))


class Protocol5:
    """Carries ``value`` pickled with protocol 5 inside a pickle of any protocol
    (see :meth:`ChunkResult.__reduce__`); it unpickles as ``value`` itself."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (pickle.loads, (pickle.dumps(self.value, protocol=5),))


def adopt_dictionary(dictionary: tuple[int, bytes] | None) -> None:
    """Compress raw blocks as the writer does: with its dictionary, or without one."""
    current = active_dictionary()
    if dictionary is None:
        if current is not None:
            use_dictionary(0, b"")
    elif current is None or current[0] != dictionary[0]:
        use_dictionary(*dictionary)


def prepare_chunk(tasks: list[PrepTask], compression: str, root: str, dictionary: tuple[int, bytes] | None = None) -> ChunkResult:
    """A worker task: prepare ``tasks`` in order (module-level so it pickles by name);
    raw blocks are compressed with ``dictionary``, the writer's (see :mod:`readmodel.store.blocks`)."""
    adopt_dictionary(dictionary)
    mode = Compression(compression)
    started = time.process_time()
    # A chunk is bounded (CHUNK_BYTES of logs).  In a worker, the collector stays off
    # until the worker's next task, when this answer has been sent (indexer.workergc).
    with chunk_stretch() if _capture is not None else collector_paused():
        sessions = [_prepare_one(task, mode, root) for task in tasks]
    return ChunkResult(sessions, time.process_time() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


# -- the writer's side ----------------------------------------------------------------

WRITER_COLLECT_EVERY: Final = 256
"""With the collector paused (a parallel pass), the writer collects the young generation
after every this many sessions it ingested itself."""


class Preparer:
    """Hands new sessions to worker processes ahead of the writer, in the writer's order.

    :meth:`take` returns a session's :class:`Prepared` (waiting for it if
    need be) or ``None`` when the writer must ingest it itself: it was never
    planned, or its worker failed.  :meth:`close` it before shutting ``pool`` down.
    """

    def __init__(self, tasks: Sequence[PrepTask], compression: Compression, root: str, pool: ProcessPoolExecutor) -> None:
        self.compression = compression.value
        self.root = root
        self._chunks: deque[list[PrepTask]] = deque(ramped_chunks(tasks))
        self._inflight: deque[tuple[list[PrepTask], Future[ChunkResult]]] = deque()
        self._inflight_bytes = 0
        self._ready: dict[str, Prepared] = {}
        self._planned = {task.path for task in tasks}
        self._broken = False
        self._ingested_here = 0  # sessions the writer ingested itself during the pass
        self.cpu_seconds = 0.0  # the workers' CPU time spent on the chunks answered so far
        self.peak_rss_kib = 0  # the largest worker's peak resident set
        self.wait_seconds = 0.0  # time the writer spent waiting for workers
        self._pool = pool
        self._fill()
        # The writer's part of a parallel pass (replaying, and unpickling the answers
        # on the pool's result thread) runs with the collector off until close().
        self._collector: Any = collector_paused()
        self._collector.__enter__()

    def _fill(self) -> None:
        while self._chunks and (not self._inflight or self._inflight_bytes < WINDOW_BYTES):
            chunk = self._chunks.popleft()
            future = self._pool.submit(prepare_chunk, chunk, self.compression, self.root, active_dictionary())
            self._inflight.append((chunk, future))
            self._inflight_bytes += sum(task.size for task in chunk)

    def take(self, path: str) -> Prepared | None:
        """The prepared session at ``path``; ``None``: the writer ingests it itself."""
        if path not in self._planned:
            self._ingested_here += 1
            if self._ingested_here % WRITER_COLLECT_EVERY == 0:
                # Reading a log leaves a few cycles per session (its pipeline's callbacks):
                # between sessions, the young generation holds them and little else.
                gc.collect(0)
            return None
        self._planned.discard(path)
        while path not in self._ready and self._inflight:
            chunk, future = self._inflight.popleft()
            self._inflight_bytes -= sum(task.size for task in chunk)
            started = time.perf_counter()
            try:
                answer = future.result()
            except Exception as exc:  # noqa: BLE001 - a dead worker: the writer takes over these sessions
                if not self._broken:
                    log.warning("session preparation failed (%s); the writer ingests those sessions itself", failure_detail(exc, self._pool))
                    self._broken = True
                continue
            finally:
                self.wait_seconds += time.perf_counter() - started
            self.cpu_seconds += answer.cpu_seconds
            self.peak_rss_kib = max(self.peak_rss_kib, answer.peak_rss_kib)
            for prepared in answer.sessions:
                self._ready[prepared.path] = prepared
            self._fill()
        prepared = self._ready.pop(path, None)
        if prepared is not None and prepared.crashed is not None:
            log.warning("session at %s: preparation failed (%s); ingesting it in the writer", path, prepared.crashed)
            return None
        return prepared

    def close(self) -> None:
        """Cancel what has not started; tasks running finish (their answers are dropped).

        Turns the garbage collector back on (idempotent)."""
        for _, future in self._inflight:
            future.cancel()
        self._inflight.clear()
        self._chunks.clear()
        self._ready.clear()
        collector, self._collector = self._collector, None
        if collector is not None:
            collector.__exit__(None, None, None)


def failure_detail(exc: BaseException, pool: ProcessPoolExecutor) -> str:
    """What a chunk's failure says, with why a pool broke when it can be told.

    ``BrokenProcessPool`` is raised for two different things: a worker process
    died (killed by a signal — the OOM killer's is SIGKILL — or exited), or an
    answer could not be read back in the writer (the exception's ``__cause__``
    holds that traceback).  The workers' exit codes are read from the
    executor's process table (private to ``concurrent.futures``, so only when it
    is there): a negative code is the signal that ended a worker; the survivors
    of a broken pool are terminated by the executor itself (-15).

    They are read only once the executor's management thread has finished
    with the broken pool (it joins every worker, so each code is cached): a
    fork server's worker reports its code once, through a pipe, and two
    threads polling it at once can both wake and one of them read nothing
    (multiprocessing then says 255, or nothing yet).
    """
    detail = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__
    if cause is not None:
        lines = [line for line in str(cause).splitlines() if line.strip() and line.strip() != "'''"]
        detail += f"; cause: {lines[-1].strip() if lines else type(cause).__name__}"
    if isinstance(exc, BrokenProcessPool) and _pool_settled(pool):
        processes = getattr(pool, "_processes", None) or {}
        codes = sorted({code for process in list(processes.values()) if (code := process.exitcode) is not None})
        if codes:
            detail += "; worker exit codes " + ", ".join(str(code) for code in codes) + " (negative: ended by that signal)"
    return detail


def _pool_settled(pool: ProcessPoolExecutor, timeout: float = 5.0) -> bool:
    """Whether ``pool``'s management thread is done (waited for up to ``timeout`` s).

    A broken pool's thread terminates the survivors and joins them, then ends;
    a pool without the (private) thread attribute has nothing to wait for.
    """
    manager = getattr(pool, "_executor_manager_thread", None)
    if manager is None or manager is threading.current_thread():
        return True
    manager.join(timeout)
    return not manager.is_alive()


def start_pool(workers: int) -> ProcessPoolExecutor:
    """Worker processes for one pass, started from the fork server when the first task
    arrives (shut them down with ``shutdown(cancel_futures=True)``)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=pipe_context(), initializer=_init_worker, initargs=(os.getpid(),))


def forked_pool(workers: int, *, head_first: bool = False) -> ProcessPoolExecutor | None:
    """Workers forked from this process at once; ``None`` when another thread runs here.

    The fork server's first worker costs a fresh interpreter importing the
    indexer (≈ 0.4 CPU-s and ≈ 0.5 s before the first task on this machine,
    a third of a 10 MB root's build); a fork of this process, which has
    imported everything already, costs a few milliseconds.  Forking is safe
    only while this thread is the process's only one (no other thread can
    hold a lock the children would inherit locked): a cold ``sessionq index
    --once`` at the start of its pass, before it starts any thread of its
    own.  The pool forks all of its workers on its first task, in the
    submitting thread, before starting its manager thread; so the first task
    is submitted here.  The workers never touch the parent's database
    connections (SQLite's locks are per process; they exit without closing
    anything; see also ``gc.freeze`` below).  ``head_first``: the workers keep
    this process's priority until :func:`lower_priority`.
    """
    if threading.active_count() != 1 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"), initializer=_init_worker, initargs=(os.getpid(), not head_first))
    # Everything the workers inherit goes to the collector's permanent generation first:
    # their collector never finalises a copy of the writer's objects (an unreachable
    # database connection closed by a worker), nor touches those pages (copy on write).
    gc.freeze()
    try:
        pool.submit(int)  # forks every worker now, from this (the only) thread
    finally:
        gc.unfreeze()
    return pool


_QUIET_TRACKER: Final = "ignore:resource_tracker:UserWarning:multiprocessing.resource_tracker"
"""A ``-W`` option for the resource tracker: no warnings of its own clean-up after a killed indexer."""


def _quiet_resource_tracker() -> None:
    """Keep the resource tracker from warning of "leaked semaphore objects" after a SIGKILL.

    A pool's queues hold named POSIX semaphores (the fork server's workers
    open them by name), and ``multiprocessing`` starts a resource tracker
    process that unlinks them if their owner dies without doing so itself.
    When the indexer is killed (SIGKILL, the OOM killer) while its pool is
    up, the tracker does exactly that — nothing is left behind — and then warns about
    it on the indexer's stderr, which tells an operator nothing actionable.
    No semaphore-free queue exists for non-``fork`` workers, so the warning,
    not the semaphores, is what goes: the tracker (and the fork server) are
    fresh interpreters started with this one's ``-W`` options, read from
    ``sys.warnoptions`` when they start, so this must run before the first
    pool.  Only warnings the tracker module itself issues are ignored.
    """
    if _QUIET_TRACKER not in sys.warnoptions:
        sys.warnoptions.append(_QUIET_TRACKER)


def pipe_context() -> Any:
    """Workers start from a fork server (a clean, single-threaded parent) where there is one.

    Plain ``fork`` would copy the daemon's threads' locks mid-flight; the fork
    server imports this module once, and each worker forks from it ready.
    Like every non-``fork`` start method, it requires the program's main
    module to guard its entry point (``if __name__ == "__main__"``).
    """
    _quiet_resource_tracker()
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        return context
    return multiprocessing.get_context("spawn")


PIPE_BYTES: Final = 1 << 20
"""Capacity asked for a stream's pipe (Linux's default is 64 KiB; 1 MiB is the
largest an unprivileged process may ask for by default, ``/proc/sys/fs/pipe-max-size``)."""


def stream_pipe(context: Any) -> tuple[Any, Any]:
    """A one-way pipe ``(receive, send)`` of ``context`` for a stream of large messages, with
    :data:`PIPE_BYTES` of capacity where the system grants it (else its default).

    A split stream's reading stage writes about four bytes of lines per byte of
    log in messages of about 1 MB (:data:`~indexer.splitstream.OPS_BYTES`);
    through a 64 KiB pipe each message is sixteen writes, each waking the other
    side and waiting for it.  Moving 432 MB between two processes took each side
    0.24-0.31 CPU-s through a default pipe and 0.13-0.16 through a 1 MiB one
    (four runs of six).  The writer's end of a streamed log gets one too.
    """
    receive, send = context.Pipe(duplex=False)
    widen(send.fileno())
    return receive, send


def widen(fd: int, size: int = PIPE_BYTES) -> bool:
    """Raise the capacity of the pipe ``fd`` to ``size`` bytes; ``False`` where refused (kept as it was)."""
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setpipe is None:
        return False
    try:
        fcntl.fcntl(fd, setpipe, size)
    except OSError:  # over pipe-max-size for this user, or the user's pipe pages are used up
        return False
    return True


def ramped_chunks(tasks: Sequence[PrepTask]) -> list[list[PrepTask]]:
    """``tasks`` in worker tasks, in order: :data:`CHUNK_SESSIONS` or :data:`CHUNK_BYTES` each, smaller at both ends.

    A whole chunk prepares in ≈ 50–100 ms: the writer, which replays a
    chunk faster than a worker prepares it, would wait that long for its
    first session, and at the end of the pass one worker would still prepare
    the last chunk while the other core idles.  So the first chunk is split
    into halves from the front (4, 4, 8, 16, 32 sessions of 64), the rest is
    chunked from the back (a short chunk falls in the middle, not at the
    end) and its last chunk split into halves from the back (32, 16, 8, 4,
    4): the writer starts after a few sessions and both workers finish within
    a few sessions of each other.  The pieces concatenate to ``tasks``: what
    is prepared, and its order, stay the same (a few more tasks, ≈ 0.1 ms each).
    """
    front = _chunked(tasks)[:1]
    if not front:
        return []
    rest = list(tasks[len(front[0]) :])
    back = [chunk[::-1] for chunk in reversed(_chunked(rest[::-1]))]  # chunked from the end
    ramp_down = _halved(back[-1], from_front=False) if back else []
    return _halved(front[0], from_front=True) + back[:-1] + ramp_down


def _halved(chunk: list[PrepTask], *, from_front: bool) -> list[list[PrepTask]]:
    """``chunk`` in pieces growing from :data:`RAMP_SESSIONS` by halves (mirrored: ``from_front=False``)."""
    pieces: list[list[PrepTask]] = []
    rest = chunk
    while len(rest) > RAMP_SESSIONS:
        half = len(rest) // 2 if from_front else (len(rest) + 1) // 2
        if from_front:
            pieces.append(rest[half:])
            rest = rest[:half]
        else:
            pieces.append(rest[:half])
            rest = rest[half:]
    pieces.append(rest)
    return pieces[::-1] if from_front else pieces


def _chunked(tasks: Sequence[PrepTask]) -> list[list[PrepTask]]:
    chunks: list[list[PrepTask]] = []
    current: list[PrepTask] = []
    size = 0
    for task in tasks:
        current.append(task)
        size += task.size
        if size >= CHUNK_BYTES or len(current) >= CHUNK_SESSIONS:
            chunks.append(current)
            current, size = [], 0
    if current:
        chunks.append(current)
    return chunks
