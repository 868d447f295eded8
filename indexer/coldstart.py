"""What a cold build can begin before its index exists.

Opening a new index creates its schema (from the head's snapshot,
:mod:`readmodel.store.headschema`: ≈ 0.01 s; through Alembic it was ≈ 0.2–0.3
CPU-s, a fifth of a 10 MB root's build), and
a cold pass then forks its workers, lists the root and trains the raw
blocks' zstd dictionary (0.03–0.15 CPU-s, which libzstd runs without the GIL)
before the first session can be prepared.  None of those three needs the
index, so ``sessionq index --once`` building a missing index begins them
first (:class:`ColdStart`) and hands them to the reconciler, whose first pass
uses them instead of starting its own; the schema is created meanwhile.

The training is the forked workers' first task (:class:`WorkerTraining`;
on a thread of the writer's process when no workers were forked) and the
listing (every transcript's stat and header) their next ones, even on a
small root: the writer listing 865 headers itself took ≈ 45 ms in which the
workers idled, and only after the schema was created; a training thread
competed with the schema's creation for the writer's GIL.  One worker
trains and the other lists while the writer creates the schema, and the
writer then lists the tasks they have not begun
(:class:`~indexer.observation.Listing`).  Roots of fewer than
:data:`WORKER_LISTING` transcripts are listed by the writer (the tasks'
round trips would cost more).  Until both are done the workers run at the
writer's priority, not nicer (:func:`~indexer.preparation.lower_priority`):
the first chunk waits for them.

Contract: the result is the pass the reconciler would run on its own — the
same listing (taken a few milliseconds earlier, by the same function), the
same dictionary (trained on the same samples, in whichever process), the same kind of workers; a
pass that finds the index not empty after all, or another root, ignores (and
closes) what was begun; a listing task that fails (a dead worker) leaves the
listing to the writer, as the reconciler's own parallel listing does.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Final

from . import dictionary as block_dictionary
from .layout import Compression, Discovery, discover
from .observation import LISTING_CHUNK, Listing, Observed
from .preparation import default_workers, forked_pool, lower_priority
from .workergc import settle_collector

log = logging.getLogger("sessionq.indexer")

WORKER_LISTING: Final = 64
"""A cold build's workers list roots of at least this many transcripts."""
LISTING_TASKS_PER_WORKER: Final = 4
"""Listing tasks per worker: answers arrive while the others are read, and a slow worker delays little."""
MIN_LISTING_CHUNK: Final = 32


def listing_chunk(transcripts: int, workers: int) -> int:
    """Transcripts per listing task: :data:`LISTING_TASKS_PER_WORKER` tasks per worker, within bounds."""
    tasks = max(workers, 1) * LISTING_TASKS_PER_WORKER
    return min(LISTING_CHUNK, max(MIN_LISTING_CHUNK, -(-transcripts // tasks)))


class Training(threading.Thread):
    """Trains a block dictionary on samples of ``paths`` in the background (a failure: none)."""

    def __init__(self, paths: list[str], compression: Compression) -> None:
        super().__init__(name="block-dictionary", daemon=True)
        self.paths = paths
        self.compression = compression
        self._trained: tuple[int, bytes] | None = None

    def run(self) -> None:
        self._trained = _trained_here(self.paths, self.compression)

    def result(self) -> tuple[int, bytes] | None:
        self.join()
        return self._trained


def _logs_size(paths: list[str]) -> int:
    """The bytes of the logs at ``paths`` that exist (what :func:`~indexer.dictionary.train_for` sizes its samples by)."""
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_size
        except OSError:
            continue
    return total


def _trained_here(paths: list[str], compression: Compression) -> tuple[int, bytes] | None:
    """The dictionary for ``paths``, trained in this thread (a failure: none)."""
    try:
        return block_dictionary.train_for(paths, _logs_size(paths), compression)
    except Exception as exc:  # noqa: BLE001 - only a smaller index is lost: blocks stay plain
        log.warning("cannot train a block dictionary (%s: %s); raw blocks stay without one", type(exc).__name__, exc)
        return None


def train_in_worker(paths: list[str], compression: str) -> tuple[int, bytes] | None:
    """A worker task: the block dictionary trained on samples of ``paths`` (module-level so it pickles by name)."""
    settle_collector()
    return block_dictionary.train_for(paths, _logs_size(paths), Compression(compression))


class WorkerTraining:
    """Trains a block dictionary as :class:`Training` does, in one of a pool's workers.

    The cold start's first task: the training thread shared the writer's GIL
    with the schema's creation, and reading the samples (a few hundred
    reads and decompressions, each giving the GIL up and waiting for it
    back) took 25–45 ms of a 10 MB root's ≈ 0.5 s instead of its 10 ms of
    CPU; in a worker it reads alone while the other lists the root.
    """

    def __init__(self, pool: ProcessPoolExecutor, paths: list[str], compression: Compression, done: Callable[[], None]) -> None:
        """``done`` is called once the task has ended (on the pool's thread, or this one), and
        again by :meth:`result` (it must be idempotent): the pool's thread may call it only
        after the result was taken, when the caller has moved on to its next tasks."""
        self.paths = paths
        self.compression = compression
        self._done = done
        self._future = pool.submit(train_in_worker, paths, compression.value)
        self._future.add_done_callback(lambda _future: done())

    def result(self) -> tuple[int, bytes] | None:
        """The dictionary (``None``: none); a failed task (a dead worker) is trained again here, alike."""
        try:
            return self._future.result()
        except Exception as exc:  # noqa: BLE001 - the same samples give the same dictionary here
            log.warning("training in a worker process failed (%s: %s); training here", type(exc).__name__, exc)
        finally:
            self._done()
        return _trained_here(self.paths, self.compression)


DictionaryTraining = Training | WorkerTraining
"""A block dictionary being trained (its ``result()`` waits for it)."""


class ColdStart:
    """A cold pass's workers, listing and dictionary training, begun now.

    Call it before anything else starts a thread in this process: the
    workers are forked only from a process with one thread
    (:func:`~indexer.preparation.forked_pool`), otherwise the reconciler
    starts them from the fork server as usual.  ``workers`` as the
    reconciler's (``None``: its default).  :meth:`close` what no reconciler
    took (idempotent).
    """

    def __init__(self, root: str | os.PathLike[str], compression: Compression, workers: int | None = None) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.compression = compression
        self.workers = default_workers() if workers is None else workers
        self.pool: ProcessPoolExecutor | None = forked_pool(self.workers, head_first=True) if self.workers > 0 else None
        # The head's work the workers do at the writer's priority (see preparation.lower_priority).
        self._forked, self._head, self._head_lock = self.pool, {"listing", "training"}, threading.Lock()
        self._stopping: threading.Thread | None = None  # shuts down the pool a pass gave back
        self.found: Discovery = discover(self.root, compression)
        # The training first: it is the longest of the three, and the first chunk waits for it.
        self.training = self._start_training(sorted(ref.path for ref in self.found.transcripts))
        self._listing = self._submit_listing()

    def _start_training(self, paths: list[str]) -> DictionaryTraining:
        """The training, as the workers' first task (the writer's process keeps its GIL for the schema); on a thread without workers."""
        if self.pool is not None:
            try:
                return WorkerTraining(self.pool, paths, self.compression, lambda: self._head_done("training"))
            except Exception as exc:  # noqa: BLE001 - a broken pool: the thread trains, the reconciler sees the pool fail
                log.warning("cannot train in a worker process (%s: %s); training here", type(exc).__name__, exc)
        self._head_done("training")
        training = Training(paths, self.compression)
        training.start()
        return training

    def _head_done(self, part: str) -> None:
        """``part`` of the head's work is over; after the last, the workers run nicer than the writer (thread-safe, idempotent)."""
        with self._head_lock:
            self._head.discard(part)
            pool = self._forked if not self._head else None
            if pool is not None:
                self._forked = None
        if pool is not None:
            lower_priority(pool)

    def _submit_listing(self) -> Listing | None:
        paths = [ref.path for ref in self.found.transcripts]
        if self.pool is None or len(paths) < WORKER_LISTING:
            return None
        try:
            return Listing(self.pool, paths, self.root, self.compression, listing_chunk(len(paths), self.workers))
        except Exception as exc:  # noqa: BLE001 - a broken pool: the reconciler lists (and sees the pool fail) itself
            log.warning("cannot list in worker processes (%s: %s); listing here", type(exc).__name__, exc)
            return None

    def listing(self) -> list[Observed] | None:
        """Every discovered transcript's observation, in discovery order; ``None``: the caller lists them.

        The caller lists the tasks no worker has started yet (:class:`~indexer.observation.Listing`).
        Taken once (a second call returns ``None``).
        """
        listing, self._listing = self._listing, None
        try:
            return None if listing is None else listing.result()
        except Exception as exc:  # noqa: BLE001 - a dead worker: the writer lists
            log.warning("listing in worker processes failed (%s: %s); listing here", type(exc).__name__, exc)
            return None
        finally:
            self._head_done("listing")

    def fits(self, root: str, compression: Compression, workers: int, cold: bool) -> bool:
        """Whether a pass over ``root`` may use what was begun (an empty index, the same settings)."""
        return cold and (root, compression, workers) == (self.root, self.compression, self.workers)

    def take_pool(self) -> ProcessPoolExecutor | None:
        """The forked workers, now the caller's (``None``: none were forked); :meth:`give_back` them after the pass."""
        pool, self.pool = self.pool, None
        return pool

    def give_back(self, pool: ProcessPoolExecutor) -> None:
        """Shut down a pass's pool on a thread of its own; :meth:`close` waits for it.

        Its processes exit (≈ 5–10 ms) while the caller publishes the index
        instead of before.
        """
        self._stopping = threading.Thread(target=pool.shutdown, kwargs={"wait": True, "cancel_futures": True}, name="pool-shutdown", daemon=True)
        self._stopping.start()

    def close(self) -> None:
        """Shut down workers no pass took, and wait for those given back (idempotent; the training thread ends by itself)."""
        self._listing = None
        pool = self.take_pool()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        stopping, self._stopping = self._stopping, None
        if stopping is not None:
            stopping.join()
