"""The indexer daemon: one exclusive writer that keeps the index in step with a root.

Threads and their jobs:

* watcher threads (watchdog observers) classify notifications
  (:mod:`indexer.watching`) and only *enqueue* work on the :class:`WorkQueue`;
* the one writer thread (the process's main thread) takes due work from the
  queue and runs every reconcile — the :class:`~indexer.reconcile.Reconciler`
  is not thread-safe and SQLite has one writer anyway.

Work is debounced per transcript path on the leading edge: the first
notification of a burst is due at once (an append is searchable after one
reconcile, not after a quiet period); later notifications of the same burst
(each within the quiet period of the one before) become one trailing
reconcile once the burst has been quiet, but no path waits longer than
``max_delay`` while it keeps changing.  Full passes run at start, on notifications that
can change the layout, every ``rescan`` seconds as a safety net against missed
notifications, and after a failed reconcile (with back-off).  A held tail (a
torn or open last frame that has not settled) gets a re-check scheduled for
when it settles, since no further notification may ever arrive for it.

Exclusivity is per source: an exclusive ``flock`` on ``<db>.source-<NAME>.lock``
plus a shared one on ``<db>.lock`` (:class:`IndexLock`), taken before the
database is opened (so a schema upgrade, which takes ``<db>.lock``
exclusively, never races a running daemon) and held for the life of the
process; the kernel releases them if the process dies.  Daemons of different
sources write one index one transaction after another (``BEGIN IMMEDIATE``).

Shutdown (SIGINT/SIGTERM): the first signal lets the transaction in progress
commit, then stops at the next transaction boundary; a second signal
interrupts at once, which rolls the open transaction back.  Either way the
observers are stopped, the lock released, and the exit status is 0.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import signal
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Final

from sqlalchemy import Engine, event

from readmodel.store.status import source_lock_path, source_writer_pids, writer_lock_path

from .layout import Compression
from .logs import progress_bar
from .reconcile import ReconcileReport, Reconciler
from .storage import disk_full_message, free_bytes, is_disk_full

log = logging.getLogger("sessionq.daemon")

DEFAULT_RESCAN_SECONDS: Final = 300.0
DEFAULT_QUIET_SECONDS: Final = 0.01
"""Debounce quiet period per path: notifications closer than this are one burst.
The first of a burst is reconciled at once; the rest once the burst has been quiet this long."""
DEFAULT_MAX_DELAY_SECONDS: Final = 0.1
"""A path that keeps changing is still reconciled at least this often."""
_RETRY_MIN_SECONDS: Final = 1.0
_RETRY_MAX_SECONDS: Final = 60.0
_SPACE_RETURNED_BYTES: Final = 1024 * 1024
"""A full disk that gained this much room since the last failure is retried at once, not after the back-off."""
_SETTLE_MARGIN_SECONDS: Final = 0.01
_WATCH_CHECK_SECONDS: Final = 1.0
"""How often an idle writer checks that the root it watches is still the same directory."""


class DaemonError(RuntimeError):
    """The daemon cannot start (lock held, root unusable); the message is for the user."""


class PassFailed(RuntimeError):
    """The pass of :meth:`Daemon.run_once` failed; the message is for the user, the cause is the error."""

    def __init__(self, message: str, *, disk_full: bool) -> None:
        super().__init__(message)
        self.disk_full = disk_full


class Stopping(BaseException):
    """Raised at a transaction boundary to abandon a pass on shutdown.

    A ``BaseException`` so that no ``except Exception`` on the way swallows it.
    """


# -- exclusivity ---------------------------------------------------------------------


class IndexLock:
    """The indexer's ``flock`` locks beside a file index, held until :meth:`release`.

    Without a source (``db upgrade``, ``prune``): an exclusive lock on
    ``<db>.lock`` — no daemon may run meanwhile.  With a source (a daemon):
    a *shared* lock on ``<db>.lock`` (daemons of different sources run side
    by side; an upgrade waits for all of them) and an exclusive lock on
    ``<db>.source-<NAME>.lock`` (one daemon per source).  PostgreSQL maps
    these onto ``pg_advisory_lock_shared`` / ``pg_advisory_lock`` keys.

    Lock files are never deleted: removing one while another process waits
    on the same inode would let two writers in.  The holder of an exclusive
    lock writes its pid into that lock's file, for the message the next
    contender prints (and for ``status``).  Non-blocking: a held lock raises
    :class:`DaemonError` at once.
    """

    def __init__(self, db: str, source: str | None = None) -> None:
        self.db = db
        self.source = source
        self.path = writer_lock_path(db)
        self.source_path = source_lock_path(db, source) if source is not None else None
        self._fds: list[tuple[int, bool]] = []  # (descriptor, exclusive)

    def acquire(self) -> None:
        """Take the lock(s) or raise :class:`DaemonError` at once naming the holder."""
        if self.path is None:
            log.warning("no exclusive lock for non-file database %s; run only one indexer per source against it", self.db)
            return
        try:
            if self.source_path is None:
                self._fds.append((_lock(self.path, fcntl.LOCK_EX, self.db, None), True))
            else:
                self._fds.append((_lock(self.path, fcntl.LOCK_SH, self.db, None), False))
                self._fds.append((_lock(self.source_path, fcntl.LOCK_EX, self.db, self.source), True))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for fd, exclusive in reversed(self._fds):
            if exclusive:  # its pid is ours: clear it
                try:
                    os.ftruncate(fd, 0)
                except OSError:
                    pass
            os.close(fd)  # closing the descriptor drops the flock
        self._fds = []

    def __enter__(self) -> "IndexLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lock(path: str, mode: int, db: str, source: str | None) -> int:
    """Open ``path`` and ``flock`` it (``mode``) without blocking; the descriptor, or :class:`DaemonError`."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _read_pid(fd) or _holders(db)
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            who = f" (pid {holder})" if holder else ""
            what = f"for source {source} " if source is not None else ""
            raise DaemonError(
                f"another sessionq indexer{who} {what}is already writing {db} (lock {path} is held); "
                "stop it first or use another --db" + (" or --source" if source is not None else "")
            ) from None
        raise DaemonError(f"cannot lock {path}: {exc}") from exc
    if mode == fcntl.LOCK_EX:
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:
            # The flock is the lock; the pid only names the holder in messages.  A full
            # disk must not stop a daemon that would otherwise wait for room and recover.
            log.debug("could not record the pid in %s: %s", path, exc)
    return fd


def _holders(db: str) -> str:
    """The pids of the daemons holding source locks on ``db`` (for the message of a refused upgrade)."""
    return ", ".join(str(pid) for pid in sorted(set(source_writer_pids(db).values())))


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""


# -- the work queue ------------------------------------------------------------------


@dataclass
class Work:
    """What the writer should do now: a full pass, or a targeted pass over paths."""

    full: bool = False
    paths: list[str] = field(default_factory=list)
    reason: str = ""


class WorkQueue:
    """Debounced, thread-safe work for the single writer.

    Watcher threads call :meth:`touch` and :meth:`request_full`; the writer
    calls :meth:`take`, which blocks until something is due or :meth:`stop`
    is called.  The condition uses a re-entrant lock so a signal handler that
    runs on the writer thread while it holds the lock can still :meth:`stop` it.
    :meth:`take` reports why: ``change`` (notifications), ``settle`` (only timed
    re-checks of held tails), or the reason given to :meth:`request_full`.
    """

    def __init__(
        self,
        *,
        quiet: float = DEFAULT_QUIET_SECONDS,
        max_delay: float = DEFAULT_MAX_DELAY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet = quiet
        self.max_delay = max_delay
        self.clock = clock
        self._cond = threading.Condition(threading.RLock())
        self._paths: dict[str, tuple[float, float, bool]] = {}  # path -> (first seen, due, timed re-check only)
        self._last_touch: dict[str, float] = {}  # path -> its last notification (bursts in progress; pruned)
        self._full_due: float | None = None
        self._full_reason = ""
        self._stopped = False

    def touch(self, path: str) -> None:
        """A notification for ``path``.

        The first of a burst is due at once (leading edge).  One within the
        quiet period of the path's previous notification continues the burst:
        due after a quiet period (trailing edge), capped by ``max_delay`` from
        the first notification waiting; one that finds the path already due
        leaves it due.
        """
        with self._cond:
            now = self.clock()
            last = self._last_touch.get(path)
            self._last_touch[path] = now
            if len(self._last_touch) > 4096:
                self._prune(now)
            pending = self._paths.get(path)
            if pending is not None and not pending[2]:
                if pending[1] <= now:
                    return  # already due: the reconcile that takes it reads this change too
                first = pending[0]
            elif last is None or now - last >= self.quiet:
                self._paths[path] = (now, now, False)  # a new burst (a timed re-check, if any, is absorbed)
                self._cond.notify()
                return
            else:
                first = now
            self._paths[path] = (first, min(now + self.quiet, first + self.max_delay), False)
            self._cond.notify()

    def _prune(self, now: float) -> None:
        """Forget the last notification of paths whose burst is over."""
        for path in [p for p, at in self._last_touch.items() if now - at >= self.quiet]:
            del self._last_touch[path]

    def schedule(self, path: str, delay: float) -> None:
        """A timed re-check of ``path`` (held tails); an earlier due time wins."""
        with self._cond:
            now = self.clock()
            due = now + max(delay, 0.0)
            current = self._paths.get(path)
            if current is None:
                self._paths[path] = (now, due, True)
            elif due < current[1]:
                self._paths[path] = (current[0], due, current[2])
            self._cond.notify()

    def request_full(self, delay: float | None = None, reason: str = "layout") -> None:
        """A full pass after ``delay`` (default: the quiet period); an earlier one wins."""
        with self._cond:
            due = self.clock() + (self.quiet if delay is None else max(delay, 0.0))
            if self._full_due is None or due < self._full_due:
                self._full_due = due
                self._full_reason = reason
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def take(self, timeout: float | None = None) -> Work | None:
        """Block until work is due; ``None`` when stopped or after ``timeout`` idle seconds."""
        with self._cond:
            deadline = None if timeout is None else self.clock() + timeout
            while not self._stopped:
                now = self.clock()
                if self._full_due is not None and self._full_due <= now:
                    reason = self._full_reason
                    self._full_due = None
                    # A full pass covers every path that is due; paths still in
                    # their quiet period stay queued (cheap if unchanged by then).
                    for path in [p for p, entry in self._paths.items() if entry[1] <= now]:
                        del self._paths[path]
                    return Work(full=True, reason=reason)
                due_paths = sorted(p for p, entry in self._paths.items() if entry[1] <= now)
                if due_paths:
                    entries = [self._paths.pop(path) for path in due_paths]
                    timed = all(entry[2] for entry in entries)
                    return Work(paths=due_paths, reason="settle" if timed else "change")
                wake_at = [entry[1] for entry in self._paths.values()]
                if self._full_due is not None:
                    wake_at.append(self._full_due)
                if deadline is not None:
                    if now >= deadline:
                        return None
                    wake_at.append(deadline)
                self._cond.wait(None if not wake_at else max(min(wake_at) - now, 0.0))
            return None


# -- failures of the writer's work -----------------------------------------------------------


class FailureEpisode:
    """Consecutive failures of one kind of work on the index (passes, checkpoints), reported once.

    The first failure of an episode — or one of a different kind — is logged at
    ``level`` in one line; repeats are logged at debug level only, so a full
    disk retried with back-off does not flood the log; the first success after
    failures ends the episode with one info line.  All failures caused by a
    full disk are one kind, whatever the free byte count in their message.
    """

    def __init__(self, what: str, retrying: str, db_path: str | None, level: int) -> None:
        self.what = what
        self.retrying = retrying
        self.db_path = db_path
        self.level = level
        self.failures = 0
        self.disk_full = False
        self.free_at_failure: int | None = None
        self._kind: str | None = None
        self._since = 0.0

    def describe(self, exc: BaseException) -> str:
        """The failure in one line for the user (a full disk is named as such)."""
        self.disk_full = is_disk_full(exc, self.db_path)
        return disk_full_message(self.db_path) if self.disk_full else f"{type(exc).__name__}: {exc}"

    def failed(self, exc: BaseException, retry_s: float, **fields: Any) -> None:
        """Count a failure; log it when it starts the episode or changes its kind."""
        message = self.describe(exc)
        kind = "disk-full" if self.disk_full else message
        self.free_at_failure = free_bytes(self.db_path)
        if self.failures == 0:
            self._since = time.monotonic()
        self.failures += 1
        first = kind != self._kind
        self._kind = kind
        log.log(
            self.level if first else logging.DEBUG,
            f"{self.what} failed: {message}; {self.retrying}",
            extra={"fields": {**fields, "retry_s": retry_s, "failures": self.failures}},
            exc_info=first and log.isEnabledFor(logging.DEBUG),
        )

    def succeeded(self) -> None:
        """End the episode (if there is one) with one line saying how long it lasted."""
        if self.failures:
            elapsed = round(time.monotonic() - self._since, 1)
            log.info(f"{self.what} succeeded again", extra={"fields": {"failures": self.failures, "after_s": elapsed}})
        self.failures = 0
        self.disk_full = False
        self.free_at_failure = None
        self._kind = None

    def space_returned(self) -> bool:
        """During a full-disk episode: the filesystem has gained room since the last failure."""
        if not self.disk_full or self.free_at_failure is None:
            return False
        free = free_bytes(self.db_path)
        return free is not None and free >= self.free_at_failure + _SPACE_RETURNED_BYTES


# -- checkpoints ---------------------------------------------------------------------------

WAL_CHECKPOINT_BYTES: Final = 4 * 1024 * 1024
_CHECKPOINT_INTERVAL_SECONDS: Final = 0.5


def disable_autocheckpoint(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.execute("PRAGMA wal_autocheckpoint = 0")


class Checkpointer:
    """Copies committed WAL frames into the database file off the writer's path.

    SQLite's automatic checkpoint runs inside the COMMIT that crosses its
    threshold, so the commit of a large transaction (the initial pass over a
    long log writes gigabytes) and every few small ones stall while pages are
    copied and synced — and an appended frame waits behind them.  The daemon
    turns the automatic checkpoint off on its own connections and runs passive
    checkpoints here, on a connection of this thread's: they block neither the
    writer nor readers, and SQLite reuses the WAL from its start once a
    checkpoint has caught up.
    """

    def __init__(self, path: str, *, wal_bytes: int = WAL_CHECKPOINT_BYTES, interval: float = _CHECKPOINT_INTERVAL_SECONDS) -> None:
        self.path = path
        self.wal_bytes = wal_bytes
        self.interval = interval
        self.checkpoints = 0
        # A failed checkpoint (full disk, I/O error) is retried with a bounded back-off.
        self.failures = FailureEpisode("checkpoint", "retrying with back-off", path, logging.WARNING)
        self._next_attempt = 0.0
        self._stop = threading.Event()
        self._final = True
        self._thread = threading.Thread(target=self._run, name="sessionq-checkpoint", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, *, final: bool = True) -> None:
        """Stop after a last checkpoint of whatever was committed (``final=False``: without it)."""
        self._final = final
        self._stop.set()
        self._thread.join()

    def _wal_size(self) -> int:
        try:
            return os.path.getsize(self.path + "-wal")
        except OSError:
            return 0

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
            while not self._stop.wait(self.interval):
                if self._wal_size() >= self.wal_bytes and time.monotonic() >= self._next_attempt:
                    self._checkpoint(conn)
            if self._final:
                self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: Any) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except Exception as exc:  # noqa: BLE001 - a missed checkpoint only lets the WAL grow until the next one
            delay = min(self.interval * 2 ** (self.failures.failures + 1), _RETRY_MAX_SECONDS)
            self._next_attempt = time.monotonic() + delay
            self.failures.failed(exc, delay)
            return
        self.checkpoints += 1
        self.failures.succeeded()


# -- the daemon ----------------------------------------------------------------------------


@dataclass
class DaemonOptions:
    """Tunables of :class:`Daemon` (CLI flags)."""

    poll: float | None = None
    rescan: float = DEFAULT_RESCAN_SECONDS
    quiet: float = DEFAULT_QUIET_SECONDS
    max_delay: float = DEFAULT_MAX_DELAY_SECONDS
    progress: bool = False


def _fields(kind: str, report: ReconcileReport, **extra: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        **extra,
        "scanned": report.scanned,
        "unchanged": report.unchanged,
        "appended": report.appended,
        "reloaded": report.reloaded,
        "deleted": report.deleted,
        "failed": report.failed,
        "events": report.events,
        "txns": report.transactions,
        "problems": report.problems,
        # Passes that used preparation workers say how many sessions they prepared.
        **({"prepared": report.prepared, "worker_cpu_s": round(report.worker_cpu_seconds, 2)} if report.prepared else {}),
        "ms": round(report.seconds * 1000, 2),
    }


class Daemon:
    """Runs the writer loop for one root and index.  Construct, then :meth:`run` or :meth:`run_once`.

    The caller owns the engine and the :class:`IndexLock`; the daemon owns the
    observers it starts and stops them before returning.
    """

    def __init__(self, engine: Engine, root: str, compression: Compression, reconciler: Reconciler, options: DaemonOptions) -> None:
        self.engine = engine
        self.root = os.path.abspath(root)
        self.compression = compression
        self.reconciler = reconciler
        self.options = options
        self.queue = WorkQueue(quiet=options.quiet, max_delay=options.max_delay)
        self._signals = 0
        self._observer: Any = None
        self._retry = _RETRY_MIN_SECONDS
        self.failures = FailureEpisode("reconcile", "retrying with a full pass", _database_file(engine), logging.ERROR)
        self._warned_missing = False
        self._warned_unwatchable = False
        self._watched: tuple[int, int] | None = None
        self._progress_update: Callable[[int, int, int], None] | None = None
        self.reconciler.progress = self._on_commit

    # -- signals -------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        """SIGINT/SIGTERM: first stop at a transaction boundary, second interrupt now."""
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info("stopping", extra={"fields": {"signal": signal.Signals(signum).name}})
            self.queue.stop()
            return
        # Raised wherever the writer is; an open transaction rolls back on the way out.
        raise KeyboardInterrupt

    @property
    def stopping(self) -> bool:
        return self.queue.stopped

    def _on_commit(self, done: int, total: int, events: int) -> None:
        # Called by the reconciler after every committed transaction.
        if self._progress_update is not None:
            self._progress_update(done, total, events)
        if self.stopping:
            raise Stopping

    # -- passes ----------------------------------------------------------------------------

    def _pass(self, work: Work, *, retry: bool = True) -> ReconcileReport | None:
        """Run one reconcile; log it; schedule re-checks of held tails.  ``None`` if it failed.

        A failure is retried with a full pass after a back-off (doubling up to
        a minute) and logged once per episode (:class:`FailureEpisode`); without
        ``retry`` it raises :class:`PassFailed` instead, with a one-line message.
        Either way the failed transaction was rolled back and the reconciler
        keeps no state of it, so the retry converges on what a cold build writes.
        """
        kind = "full" if work.full else "paths"
        try:
            report = self.reconciler.reconcile() if work.full else self.reconciler.reconcile_paths(work.paths)
        except Stopping:
            log.info("pass interrupted at a transaction boundary", extra={"fields": {"kind": kind}})
            return None
        except Exception as exc:  # noqa: BLE001 - keep serving (disk full, locked, bad file); retry with a full pass
            if not retry:
                raise PassFailed(self.failures.describe(exc), disk_full=self.failures.disk_full) from exc
            self.failures.failed(exc, self._retry, kind=kind)
            self.queue.request_full(self._retry, reason="retry")
            self._retry = min(self._retry * 2, _RETRY_MAX_SECONDS)
            return None
        self._retry = _RETRY_MIN_SECONDS
        self.failures.succeeded()
        try:
            held = self._schedule_held(None if work.full else work.paths)
        except Exception as exc:  # noqa: BLE001 - the periodic rescan still settles them
            log.warning("cannot schedule held-tail re-checks", extra={"fields": {"error": f"{type(exc).__name__}: {exc}"}})
            held = 0
        extra: dict[str, Any] = {"reason": work.reason}
        if not work.full:
            extra["paths"] = len(work.paths)
        if held:
            extra["held"] = held
        # A targeted pass that found nothing new (e.g. a close after a write
        # already indexed) is routine noise: log it at debug level only.
        level = logging.INFO if work.full or report.changed or held else logging.DEBUG
        log.log(level, "reconcile", extra={"fields": _fields(kind, report, **extra)})
        return report

    def _schedule_held(self, paths: list[str] | None) -> int:
        """Schedule a re-check for every held tail among ``paths`` (all when ``None``)."""
        settle = self.reconciler.settle_seconds
        source = self.reconciler.source  # another source's held tails are its daemon's to settle
        with self.reconciler.writer.cursor() as cur:
            if paths is None:
                held = [row[0] for row in cur.execute("SELECT \"path\" FROM \"sessions\" WHERE \"tail_state\" = 'held' AND \"source\" = ?", (source,))]
            else:
                held = []
                for start in range(0, len(paths), 500):
                    chunk = paths[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    sql = f"SELECT \"path\" FROM \"sessions\" WHERE \"tail_state\" = 'held' AND \"source\" = ? AND \"path\" IN ({marks})"
                    held += [row[0] for row in cur.execute(sql, (source, *chunk))]
        now = time.time()
        for path in held:
            try:
                mtime = os.stat(path).st_mtime
            except OSError:
                self.queue.touch(path)  # gone: the re-check deletes it
                continue
            # Due when the reconciler will consider it settled; never sooner than
            # a margin, never later than one settle period (clock skew, future mtimes).
            delay = min(max(mtime + settle - now, 0.0), settle) + _SETTLE_MARGIN_SECONDS
            self.queue.schedule(path, delay)
        return len(held)

    # -- entry points --------------------------------------------------------------------------

    def run_once(self) -> ReconcileReport | None:
        """One full pass (with the progress bar when enabled); ``None`` if interrupted.

        Raises :class:`PassFailed` if the pass fails (nothing is retried).

        Checkpoints run off the writer's commits, as in :meth:`run`: the pass is
        the daemon's initial pass, at the same speed.
        """
        checkpointer = self._start_checkpointer()
        passed = False
        try:
            report = self._initial_pass(retry=False)
            passed = True
            return report
        finally:
            if checkpointer is not None:
                # After a failed pass the failure is the one message: a last checkpoint
                # would only fail again the same way (a full disk) and say so twice.
                checkpointer.stop(final=passed)

    def _initial_pass(self, *, retry: bool = True) -> ReconcileReport | None:
        with progress_bar(self.options.progress) as update:
            self._progress_update = update
            try:
                report = self._pass(Work(full=True, reason="start"), retry=retry)
            finally:
                self._progress_update = None
        return report

    def run(self) -> None:
        """Watch and reconcile until stopped by a signal (or :meth:`WorkQueue.stop`)."""
        # One connection stays open for the daemon's life.  The engine opens a
        # connection per pass (NullPool), and SQLite checkpoints and deletes the
        # WAL whenever the *last* connection closes — with fsyncs, ~7 ms per close,
        # several times per pass.  Keeping one open makes a tail append ~5x cheaper.
        checkpointer = self._start_checkpointer()
        keepalive = self.engine.raw_connection() if _database_file(self.engine) is not None else None
        self._check_watch()  # before the initial pass, so nothing written meanwhile is missed
        try:
            if self._observer is not None or os.path.isdir(self.root):
                self._initial_pass()
            # else: a missing root (not mounted yet?) is not taken for an empty
            # one, which would drop every session; the pass runs when it appears.
            rescan = self.options.rescan
            if rescan > 0:
                self.queue.request_full(rescan, reason="rescan")
            while not self.stopping:
                work = self.queue.take(timeout=_WATCH_CHECK_SECONDS)
                if (work is None or not work.full) and self.failures.space_returned():
                    self.queue.request_full(0, reason="space")  # no need to sit out the back-off
                if work is None:
                    self._check_watch()
                    continue
                if self.failures.failures and not work.full:
                    # The pending retry is a full pass and covers these paths; trying
                    # each change now would fail the same way, every 100 ms.
                    continue
                self._pass(work)
                if work.full and rescan > 0:
                    # The safety-net rescan counts from the last full pass (an earlier
                    # pending request, e.g. a retry, keeps its earlier time).
                    self.queue.request_full(rescan, reason="rescan")
        finally:
            self._stop_watching()
            if keepalive is not None:
                keepalive.close()
            if checkpointer is not None:
                checkpointer.stop()

    def _start_checkpointer(self) -> Checkpointer | None:
        """Move checkpoints off the writer's commits (file databases only)."""
        path = _database_file(self.engine)
        if path is None:
            return None
        event.listen(self.engine, "connect", disable_autocheckpoint)
        checkpointer = Checkpointer(path)
        checkpointer.start()
        return checkpointer

    def _check_watch(self) -> None:
        """(Re)start the observer when there is none, or the root was removed or replaced.

        An inotify watch is bound to the directory's inode: once the root is
        deleted, watchdog stops its emitter; once it is renamed away, the watch
        follows the old directory.  Either way nothing more would be seen, so
        the writer checks the emitters and the root's identity when idle.
        """
        identity = _dir_identity(self.root)
        if self._observer is not None and identity == self._watched and _observing(self._observer):
            return
        had_observer = self._observer is not None
        self._stop_watching()
        if identity is None:
            if not self._warned_missing:
                log.warning("root does not exist; waiting for it", extra={"fields": {"root": self.root}})
                self._warned_missing = True
            return
        from .watching import TranscriptEventHandler, make_observer

        handler = TranscriptEventHandler(self.root, self.compression, self.queue)
        try:
            self._observer = make_observer(self.root, handler, self.options.poll)
        except OSError as exc:
            if not self._warned_unwatchable:
                log.warning("cannot watch the root; relying on rescans", extra={"fields": {"root": self.root, "error": str(exc)}})
                self._warned_unwatchable = True
            return
        self._watched = identity
        self._warned_unwatchable = False
        if had_observer or self._warned_missing:
            # Whatever happened while nothing was watched is found by a full pass.
            self.queue.request_full(0, reason="rewatch")
        self._warned_missing = False
        log.info(
            "watching",
            extra={"fields": {"root": self.root, "mode": "poll" if self.options.poll is not None else type(self._observer).__name__, "compression": self.compression.value}},
        )

    def _stop_watching(self) -> None:
        observer, self._observer = self._observer, None
        self._watched = None
        if observer is None:
            return
        observer.stop()
        observer.join(timeout=5)


def _database_file(engine: Engine) -> str | None:
    """The SQLite file behind ``engine`` (``None`` for an in-memory or other database)."""
    path = engine.url.database
    if not path or path == ":memory:" or engine.url.get_backend_name() != "sqlite":
        return None
    return path


def _observing(observer: Any) -> bool:
    """The observer thread and every emitter (one per watched root) are alive."""
    return bool(observer.is_alive() and observer.emitters and all(emitter.is_alive() for emitter in observer.emitters))


def _dir_identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
