"""Reconciling a log root into the index, exactly once, in transactions.

One pass: discover transcripts, compare each one's revision with the stored
one, and bring changed sessions up to date — decoding only the new frames of a
grown file, reloading a replaced or truncated one, removing a deleted one.
Sessions are committed in batches, each batch one transaction of the index's
backend (:mod:`indexer.writers`: ``BEGIN IMMEDIATE`` on SQLite, ``READ
COMMITTED`` on PostgreSQL) that also stores the new offsets and bumps the generations, so a
crash leaves either the old or the new state and a restart resumes from the
stored offsets.  A torn or open tail is held back while the file is still
changing and indexed as the harness's inspect view (flagged synthetic) once it
has settled; the synthetic rows are replaced when the writer continues.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Final

import msgspec
from sqlalchemy import Engine

from readmodel.projection.grams import warm_up as warm_up_grams
from readmodel.projection.secrets import Policy, index_fingerprint, policy_from_env, redacts_index
from readmodel.store import gramindex
from readmodel.store.activity import store_last_activity
from readmodel.store.sources import check_source, default_source

from . import dictionary as block_dictionary
from .coldstart import ColdStart, DictionaryTraining, Training
from .ingest import LogOutcome, ingest_log
from .layout import Compression, LayoutProblem, discover, revision_token
from .ownership import clashes, has_problem, other_owners, owned_elsewhere, refuse_owned_elsewhere, register_source, store_problems
from .preparation import (
    BAD_LOG_ERRORS,
    MIN_PARALLEL_BYTES,
    PREPARE_MAX_BYTES,
    Prepared,
    Preparer,
    PrepTask,
    collector_paused,
    default_workers,
    failure_of,
    forked_pool,
    replay,
    start_pool,
)
from .projection import DeferredFts, delete_session_rows
from .reader import ResumeMismatch, ResumePoint
from .recordedactivity import UNKNOWN, recorded_last_activity
from .writers import writer_for
from .observation import LISTING_CHUNK, Listing, Observed, beside_opposite, observe
from .splitstream import split_wanted
from .sessionstream import SessionStream, StreamBroken
from .sessionrows import SELECT_SESSIONS, UPDATE_INDEXED, insert_indexed_session, insert_session, update_failed

log = logging.getLogger("sessionq.indexer")

DEFAULT_SETTLE_SECONDS: Final = 1.0
BATCH_EVENTS: Final = 50_000
BATCH_SESSIONS: Final = 500
GROUP_SESSIONS: Final = BATCH_SESSIONS
"""Prepared sessions written under one savepoint (each alone again if one of them fails)."""
STREAM_FTS_CHARS: Final = 1_000_000
"""A streamed log's texts are indexed each time this much of them is buffered (:meth:`DeferredFts.spill`)."""
PARALLEL_LISTING: Final = 4096
"""A full pass lists this many transcripts or more in the worker processes."""

_resume_decoder = msgspec.msgpack.Decoder(ResumePoint)
_encode_json = msgspec.json.Encoder().encode


class ReconcileReport(msgspec.Struct):
    """What one pass did."""

    scanned: int = 0
    unchanged: int = 0
    appended: int = 0
    reloaded: int = 0
    deleted: int = 0
    failed: int = 0
    held: int = 0
    prepared: int = 0  # sessions a worker process prepared (counted in reloaded or failed too)
    worker_cpu_seconds: float = 0.0  # CPU the preparation workers spent
    worker_peak_rss_mb: float = 0.0
    writer_wait_seconds: float = 0.0  # time the writer waited for prepared sessions and streamed logs
    stream_stages: list[tuple[str, float, float]] = msgspec.field(default_factory=list)  # streamed logs' workers: (name, CPU-s, peak RSS MB)
    events: int = 0
    transactions: int = 0
    problems: int = 0
    seconds: float = 0.0

    @property
    def changed(self) -> int:
        return self.appended + self.reloaded + self.deleted + self.failed


class Reconciler:
    """Brings an index up to date with a root.  Not thread-safe: one writer."""

    def __init__(
        self,
        engine: Engine,
        root: str | os.PathLike[str],
        compression: Compression,
        *,
        settle_seconds: float = DEFAULT_SETTLE_SECONDS,
        batch_events: int = BATCH_EVENTS,
        clock: Callable[[], float] = time.time,
        progress: Callable[[int, int, int], None] | None = None,
        workers: int | None = None,
        parallel_min_bytes: int | None = None,
        redact: Policy | None = None,
        source: str | None = None,
        cold_start: ColdStart | None = None,
    ) -> None:
        self.engine = engine
        self.writer = writer_for(engine)  # the backend: transactions, sids, generations, search rows
        # The source this reconciler writes for: it reads, writes and deletes only
        # that source's sessions (readmodel.store.sources).
        self.source = check_source(source) if source is not None else default_source()
        # The secret-redaction policy (``$SESSIONQ_REDACT`` unless given) and the
        # fingerprint of the documents it derives; an index holding documents of
        # another fingerprint is re-derived by the next full pass.
        self.policy = policy_from_env(redact)
        self.redact_documents = redacts_index(self.policy)
        self.fingerprint = index_fingerprint(self.policy)
        self._rederive = False
        self.root = os.path.abspath(os.fspath(root))
        self.compression = compression
        self.settle_seconds = settle_seconds
        self.batch_events = batch_events
        self.clock = clock
        self.progress = progress
        self._held = 0  # tails held back by the session being indexed (reported per pass)
        self._fts = DeferredFts()  # the open transaction's FTS5 rows, written before COMMIT
        # Sessions new to the index are prepared in this many worker processes
        # when a pass has at least ``parallel_min_bytes`` of them (0 workers: never).
        self.workers = default_workers() if workers is None else workers
        if parallel_min_bytes is None:
            parallel_min_bytes = int(os.environ.get("SESSIONQ_PARALLEL_MIN_BYTES", MIN_PARALLEL_BYTES))
        self.parallel_min_bytes = parallel_min_bytes
        self._preparer: Preparer | None = None
        self._pool: ProcessPoolExecutor | None = None  # started on demand, for one pass
        self._pool_owner: ColdStart | None = None  # the ColdStart that forked the pool, which shuts it down
        # What a cold build began before its index was opened (workers, listing, training): used by the first pass.
        self._cold_start = cold_start
        # The open savepoint of consecutive prepared sessions (:meth:`_index_grouped`): its
        # members in order, and the report's counters and FTS buffer mark before it.
        self._group: list[tuple[tuple[Any, ...] | None, Observed, Prepared]] | None = None
        self._group_start: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
        self._next_sid = 1  # sids are assigned here, so a prepared session knows its own
        self._sid_limit = 1  # ... from the range [_next_sid, _sid_limit) reserved in index_meta.next_sid

    # -- passes ----------------------------------------------------------------

    def reconcile(self) -> ReconcileReport:
        """A full pass over the root (layout problems are recomputed)."""
        started = time.perf_counter()
        try:
            return self._full_pass(started)
        finally:
            self._end_pass()

    def _full_pass(self, started: float) -> ReconcileReport:
        report = ReconcileReport()
        cold = self._index_is_empty()
        begun, self._cold_start = self._cold_start, None
        if begun is not None and not begun.fits(self.root, self.compression, self.workers, cold):
            begun.close()
            begun = None
        if begun is not None and self._pool is None:
            self._pool = begun.take_pool()
            self._pool_owner = begun if self._pool is not None else None
        elif self.workers > 0 and cold and self._pool is None:
            # A cold build: workers forked now if this is the process's only thread (a few
            # ms), else started from the fork server while the root is walked (~0.4 s).
            self._pool = forked_pool(self.workers)
            if self._pool is None:
                threading.Thread(target=_warm_up, args=(self._worker_pool(),), name="pool-warm-up", daemon=True).start()
        listed: list[Observed] | None = None
        if begun is not None:
            found = begun.found
            training = begun.training if self._dictionary_missing() else None
            listed = begun.listing()  # the workers listed the root while the index was created
        else:
            found = discover(self.root, self.compression)
            training = self._start_training([ref.path for ref in found.transcripts]) if cold else None
        if listed is None:
            listed = self._observe_all([ref.path for ref in found.transcripts])
        observed = [self.writer.storable(item) for item in listed]
        problems = list(found.problems)
        by_id: dict[str, list[Observed]] = {}
        for item in observed:
            if item.problem is not None:
                problems.append(item.problem)
            elif item.header is not None:
                by_id.setdefault(item.header["id"], []).append(item)
        usable: list[Observed] = []
        owners = self._other_owners()
        for session_id, items in by_id.items():
            if len(items) > 1:
                paths = ", ".join(item.path for item in items)
                for item in items:
                    problems.append(LayoutProblem("duplicate-id", item.path, f'session "{session_id}" appears in multiple transcripts: {paths}'))
            elif session_id in owners:
                problems.append(owned_elsewhere(items[0].path, session_id, *owners[session_id]))
            else:
                usable.append(items[0])
        if training is not None:
            self._store_dictionary(training)
        self._run(usable, problems, full=True, report=report)
        report.problems = len(problems)
        report.seconds = time.perf_counter() - started
        return report

    def _other_owners(self) -> dict[str, tuple[str, str]]:
        with self.writer.cursor() as cur:
            return other_owners(cur, self.source)

    def reconcile_paths(self, paths: Iterable[str]) -> ReconcileReport:
        """A targeted pass over transcripts that changed (watch events).

        Falls back to a full pass when a path is involved in an id clash or a
        layout problem, so targeted and full passes always agree.
        """
        started = time.perf_counter()
        report = ReconcileReport()
        items: list[Observed] = []
        with self.writer.cursor() as cur:
            if _stored_fingerprint(cur) != self.fingerprint or not self.writer.grams_current(cur):
                return self.reconcile()  # documents of other rules, or grams of another scheme: a full pass first
            for path in sorted({os.path.abspath(p) for p in paths}):
                item = self.writer.storable(self._observe(path))
                if item.problem is not None or (item.header is not None and clashes(cur, item.header["id"], path, self.source)) or has_problem(cur, path, self.source) or beside_opposite(path, self.compression):
                    return self.reconcile()
                items.append(item)
        try:
            self._run(items, None, full=False, report=report)
        finally:
            self._end_pass()
        report.seconds = time.perf_counter() - started
        return report

    # -- observation -------------------------------------------------------------

    def _observe(self, path: str) -> Observed:
        return observe(path, self.root, self.compression)

    def _observe_all(self, paths: list[str]) -> list[Observed]:
        """Every transcript's header and stat; by the workers when there are many."""
        if self.workers > 0 and len(paths) >= PARALLEL_LISTING:
            try:
                return Listing(self._worker_pool(), paths, self.root, self.compression, LISTING_CHUNK).result()
            except Exception as exc:  # noqa: BLE001 - a dead worker: list in this process
                log.warning("listing in worker processes failed (%s: %s); listing here", type(exc).__name__, exc)
        return [self._observe(path) for path in paths]

    def _start_training(self, paths: list[str]) -> Training | None:
        """A cold build trains the index's block dictionary while the root is listed (see :mod:`indexer.dictionary`)."""
        if not self._dictionary_missing():
            return None
        training = Training(sorted(paths), self.compression)
        training.start()
        return training

    def _dictionary_missing(self) -> bool:
        with self.writer.cursor() as cur:
            return cur.execute('SELECT 1 FROM "block_dictionaries" LIMIT 1').fetchone() is None

    def _store_dictionary(self, training: DictionaryTraining) -> None:
        trained = training.result()
        if trained is None:
            return
        with self.writer.cursor() as cur:
            self.writer.begin(cur)
            try:
                block_dictionary.store(cur, trained)
                self.writer.commit(cur)
            except BaseException as exc:
                self._abandon_transaction(cur, exc)
                raise

    def _index_is_empty(self) -> bool:
        with self.writer.cursor() as cur:
            return cur.execute('SELECT 1 FROM "sessions" LIMIT 1').fetchone() is None

    def _worker_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = start_pool(self.workers)
        return self._pool

    def _end_pass(self) -> None:
        """Workers live for one pass: an idle daemon keeps no processes but the fork server."""
        if self._pool_owner is not None and self._pool is not None:
            self._pool_owner.give_back(self._pool)  # its processes exit while the index is published
        elif self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool, self._pool_owner = None, None

    # -- transactions ----------------------------------------------------------------

    def _run(self, items: list[Observed], problems: list[LayoutProblem] | None, *, full: bool, report: ReconcileReport) -> None:
        now = self.clock()
        with self.writer.cursor() as cur:
            block_dictionary.load(cur)  # blocks are written, and tail blocks reopened, with the index's dictionary
            if full:
                self._rebuild_grams(cur)
                stored = {row[1]: row for row in cur.execute(SELECT_SESSIONS + ' WHERE "source" = ?', (self.source,))}
                self._rederive = bool(stored) and _stored_fingerprint(cur) != self.fingerprint
                if self._rederive:
                    log.info("re-deriving every session's documents (redaction fingerprint %s)", self.fingerprint)
            else:
                # A targeted pass reads only its own rows: loading every row (and its
                # resume blob) costs ~60 ms per pass at 10k sessions.
                stored = {}
                for item in items:
                    row = cur.execute(SELECT_SESSIONS + ' WHERE "path" = ? AND "source" = ?', (item.path, self.source)).fetchone()
                    if row is not None:
                        stored[row[1]] = row
            present = {item.path for item in items if item.header is not None}
            gone = [path for path in stored if path not in present] if full else [item.path for item in items if item.header is None and item.path in stored]
            todo = [item for item in items if item.header is not None and self._needs_work(stored.get(item.path), item, now)]
            report.scanned += len(items)
            report.unchanged += len(items) - len(todo) - sum(1 for item in items if item.header is None)
            register_source(cur, self.source, self.root, self.compression.value, now)
            # New sessions get sids reserved now: a prepared session knows its sid before
            # its transaction, and another source's daemon may commit sessions meanwhile.
            self._reserve_sids(cur, sum(1 for item in todo if item.path not in stored or stored[item.path][6] != item.header["id"]))  # type: ignore[index]
            self._preparer = self._start_preparer(cur, todo, stored, now)
            try:
                self._transactions(cur, stored, todo, gone, problems, now, report)
                if full:
                    self._store_fingerprint(cur)
            finally:
                self._rederive = False
                if self._preparer is not None:
                    self._preparer.close()
                    report.worker_cpu_seconds += self._preparer.cpu_seconds
                    report.writer_wait_seconds += self._preparer.wait_seconds
                    report.worker_peak_rss_mb = max(report.worker_peak_rss_mb, round(self._preparer.peak_rss_kib / 1024, 1))
                    self._preparer = None

    def _transactions(
        self,
        cur: sqlite3.Cursor,
        stored: dict[str, tuple[Any, ...]],
        todo: list[Observed],
        gone: list[str],
        pending_problems: list[LayoutProblem] | None,
        now: float,
        report: ReconcileReport,
    ) -> None:
        """The pass's transactions: deletions and layout problems first, then ``todo`` in batches."""
        total = len(todo)
        index = 0
        while index < total or gone or pending_problems is not None:
            self.writer.begin(cur)
            try:
                changed = False
                generation = self.writer.open_batch(cur, self.source)
                for path in gone:
                    sid = stored[path][0]
                    delete_session_rows(cur, sid, fts=self._fts)
                    cur.execute('DELETE FROM "sessions" WHERE "sid" = ?', (sid,))
                    report.deleted += 1
                    changed = True
                gone = []
                if pending_problems is not None:
                    changed |= store_problems(cur, pending_problems, now, self.source)
                    pending_problems = None
                budget = self.batch_events
                sessions_in_batch = 0
                while index < total and budget > 0 and sessions_in_batch < BATCH_SESSIONS:
                    item = todo[index]
                    index += 1
                    written = self._index_one(cur, stored.get(item.path), item, generation, now, report)
                    budget -= max(written, 1)
                    sessions_in_batch += 1
                    changed = True
                    if self.progress is not None:
                        self.progress(index, total, report.events)
                self._close_group(cur)
                self._fts.write(cur)
                self.writer.close_batch(cur, self.source, generation, changed, now)
                self.writer.commit(cur)
                report.transactions += 1
            except BaseException as exc:
                self._abandon_transaction(cur, exc)
                raise

    def _rebuild_grams(self, cur: sqlite3.Cursor) -> None:
        """Rebuild ``document_grams`` from the stored documents when another gram scheme built it.

        The scheme folds case with this Python's Unicode database; grams of
        another one would be removed with the wrong words.  One transaction:
        readers keep verifying every document until it commits.
        """
        if self.writer.grams_current(cur):
            return
        log.info("rebuilding the substring index (gram scheme %s)", gramindex.scheme_fingerprint())
        self.writer.begin(cur)
        try:
            self.writer.rebuild_grams(cur)
            self.writer.commit(cur)
        except BaseException as exc:
            self._abandon_transaction(cur, exc)
            raise

    def _store_fingerprint(self, cur: sqlite3.Cursor) -> None:
        """After a complete full pass every document is derived with this reconciler's fingerprint."""
        if _stored_fingerprint(cur) != self.fingerprint:
            self.writer.begin(cur)
            cur.execute('UPDATE "index_meta" SET "redaction" = ?', (self.fingerprint,))
            self.writer.commit(cur)

    def _abandon_transaction(self, cur: sqlite3.Cursor, failure: BaseException) -> None:
        """Undo the open transaction after ``failure`` without masking it.

        SQLite rolls the whole transaction back by itself on some errors
        (``SQLITE_FULL`` at ``COMMIT``, some ``SQLITE_IOERR`` and ``SQLITE_NOMEM``):
        then there is nothing left to roll back, and a ``ROLLBACK`` would fail
        with "no transaction is active" instead of the real error.  The pass's
        in-memory state for the transaction (buffered FTS rows, the held-tail
        count) goes with it; everything else is re-read from the index by the
        next pass (stored offsets, the next sid) or lives for one pass only
        (the preparer and its workers' results).
        """
        self._fts = DeferredFts()
        self._held = 0
        self._group = None
        try:
            if not self.writer.in_transaction(cur):
                return
            cur.execute("ROLLBACK")
        except self.writer.errors as exc:
            # Closing the connection (the engine's pool does, after the pass) rolls back anyway.
            failure.add_note(f"and the ROLLBACK after it failed too: {type(exc).__name__}: {exc}")

    def _start_preparer(self, cur: sqlite3.Cursor, todo: list[Observed], stored: dict[str, tuple[Any, ...]], now: float) -> Preparer | None:
        """Workers for the sessions of ``todo`` new to the index, when there are enough of them.

        Their sids are assigned now, in ``todo`` order; logs over
        :data:`~indexer.preparation.PREPARE_MAX_BYTES` stay with the writer.
        A re-derivation (the redaction fingerprint changed) prepares every
        session this way, each under the sid it already has: the writer then
        swaps its old rows for the prepared ones (:meth:`_index_one`).
        """
        if self.workers <= 0:
            return None
        reserved = (self._next_sid, self._sid_limit)
        tasks: list[PrepTask] = []
        for item in todo:
            assert item.header is not None and item.stat is not None
            row = stored.get(item.path)
            if (row is not None and not self._rederive) or item.stat.st_size > PREPARE_MAX_BYTES:
                continue
            settled = now - item.stat.st_mtime >= self.settle_seconds
            sid = self._kept_sid(row, item.header)
            if sid is None:
                sid = self._allocate_sid(cur)
            tasks.append(PrepTask(item.path, sid, item.header, settled, item.stat.st_size, self.redact_documents))
        if not tasks or sum(task.size for task in tasks) < self.parallel_min_bytes:
            self._next_sid, self._sid_limit = reserved  # nothing handed out: the sids are free again
            return None
        preparer = Preparer(tasks, self.compression, self.root, self._worker_pool())
        warm_up_grams()  # while the workers prepare the first chunks
        return preparer

    @staticmethod
    def _kept_sid(row: tuple[Any, ...] | None, header: dict[str, Any]) -> int | None:
        """The sid a stored session keeps when it is indexed again (``None``: it gets a new one)."""
        return row[0] if row is not None and row[6] == header["id"] else None

    def _allocate_sid(self, cur: sqlite3.Cursor) -> int:
        if self._next_sid >= self._sid_limit:
            # The pass reserved one per new session; a session whose worker failed takes a second.
            self._reserve_sids(cur, 16)
        sid = self._next_sid
        self._next_sid += 1
        return sid

    def _reserve_sids(self, cur: sqlite3.Cursor, count: int) -> None:
        """This pass's sids: ``count`` reserved across writers (:func:`~indexer.ownership.reserve_sids`)."""
        self._next_sid, self._sid_limit = self.writer.reserve_sids(cur, count) if count > 0 else (1, 1)

    def _needs_work(self, row: tuple[Any, ...] | None, item: Observed, now: float) -> bool:
        if row is None or item.stat is None or self._rederive:
            return True
        if row[2] != revision_token(item.stat):
            return True
        # An unchanged file with a held-back tail is indexed once it has settled.
        return row[4] == "held" and now - item.stat.st_mtime >= self.settle_seconds

    # -- one session ------------------------------------------------------------------

    def _index_one(
        self,
        cur: sqlite3.Cursor,
        row: tuple[Any, ...] | None,
        item: Observed,
        generation: int,
        now: float,
        report: ReconcileReport,
        *,
        given: Prepared | None = None,
    ) -> int:
        """Index one session (in its own savepoint, or in the open group's: :meth:`_index_grouped`).

        ``given`` is the session's prepared writes when they were taken
        already (a group written again session by session); such a session
        always takes its own savepoint.
        """
        assert item.header is not None and item.stat is not None
        header = item.header
        settled = now - item.stat.st_mtime >= self.settle_seconds
        sid = kept = self._kept_sid(row, header)
        if given is not None:
            prepared: Prepared | None = given
        else:
            prepared = self._preparer.take(item.path) if self._preparer is not None and (row is None or self._rederive) else None
        if given is None and row is None and prepared is not None and prepared.outcome is not None and not self._rederive:
            return self._index_grouped(cur, row, item, prepared, generation, now, report)
        self._close_group(cur)
        if self._rederive:
            # A re-derivation (a worker's when there are workers): the session is indexed as if
            # new, under the sid it had, once its old rows are gone (just below).
            sid = None
        resume: ResumePoint | None = None
        # Re-derivation reloads the log from the start (rows of the old documents are deleted below).
        if sid is not None and row is not None and row[3] is not None and row[5] == "ok" and not self._rederive:
            try:
                resume = _resume_decoder.decode(row[3])
            except msgspec.DecodeError:
                resume = None  # a resume point of an older format: read the log again
            if resume is not None and resume.header != header:
                resume = None
        if row is not None and sid is None:
            delete_session_rows(cur, row[0], fts=self._fts)
            cur.execute('DELETE FROM "sessions" WHERE "sid" = ?', (row[0],))
        if sid is None and (problem := refuse_owned_elsewhere(cur, item.path, header["id"], self.source, now)) is not None:
            log.warning("%s", problem.message)
            return 0
        fresh = sid is None
        if fresh:
            sid = prepared.sid if prepared is not None else kept if kept is not None and self._rederive else self._allocate_sid(cur)
            if prepared is not None and prepared.outcome is not None:
                insert_indexed_session(cur, sid, item, header, prepared, generation, now, self.source)
            else:
                insert_session(cur, sid, item, header, generation, now, self.source)
        stream = self._open_stream(item, sid, settled, split=row is None) if (row is None or self._rederive) and prepared is None else None
        # One name for every session's savepoint (they never nest): its statements stay
        # in the statement cache instead of being compiled per session.
        savepoint = "session"
        self._fts.relieve(cur)  # outside the savepoint: earlier sessions' rows must not be undone with this one
        cur.execute(f'SAVEPOINT "{savepoint}"')
        fts_mark = self._fts.mark()
        try:
            if prepared is not None:
                report.prepared += 1
                written = self._replay(cur, prepared)
                report.reloaded += 1
            elif stream is not None:
                try:
                    written = self._replay_stream(cur, sid, header, stream, generation, now, report)
                except StreamBroken as exc:
                    log.warning("session %s: its worker failed (%s); ingesting it in the writer", header["id"], exc)
                    cur.execute(f'ROLLBACK TO "{savepoint}"')
                    self._fts.rollback(fts_mark)
                    written = self._decode(cur, sid, item, None, settled, None, generation, now, header_stored=True)
                report.reloaded += 1
            else:
                if resume is not None:
                    try:
                        written = self._decode(cur, sid, item, resume, settled, row, generation, now)
                        report.appended += 1
                    except ResumeMismatch:
                        cur.execute(f'ROLLBACK TO "{savepoint}"')
                        self._fts.rollback(fts_mark)
                        resume = None
                if resume is None:
                    if not fresh:
                        delete_session_rows(cur, sid, fts=self._fts)
                    written = self._decode(cur, sid, item, None, settled, None, generation, now, header_stored=fresh)
                    report.reloaded += 1
        except (*BAD_LOG_ERRORS, *self.writer.data_errors, _PreparedFailure) as exc:
            # Whatever goes wrong with one log stays with that log.
            cur.execute(f'ROLLBACK TO "{savepoint}"')
            self._fts.rollback(fts_mark)
            delete_session_rows(cur, sid, fts=self._fts)
            status, code, message = exc.failure if isinstance(exc, _PreparedFailure) else failure_of(exc, header["id"])
            update_failed(cur, sid, item, generation, now, status, code, message)
            report.failed += 1
            log.warning("session %s: %s", header["id"], message)
            cur.execute(f'RELEASE "{savepoint}"')
            return 0
        finally:
            if stream is not None:
                stream.close()
        # With the events, in their savepoint: incremental passes keep what a cold build computes.
        store_last_activity(cur, sid)
        cur.execute(f'RELEASE "{savepoint}"')
        report.events += written
        report.held += self._held
        self._held = 0
        return written

    def _index_grouped(
        self, cur: sqlite3.Cursor, row: tuple[Any, ...] | None, item: Observed, prepared: Prepared, generation: int, now: float, report: ReconcileReport
    ) -> int:
        """A new session a worker prepared without failure, in the savepoint of a group of them.

        A savepoint per session costs about a tenth of the writer's CPU on a
        cold build, and a prepared session almost never fails: up to
        :data:`GROUP_SESSIONS` consecutive ones share one.  If one does fail
        (a value its backend refuses), the group is rolled back and written
        again session by session (:meth:`_regroup`), so each keeps exactly
        the outcome it has alone.  Rows, FTS buffer and report move together.
        """
        assert item.header is not None
        if self._group is None:
            self._fts.relieve(cur)  # outside the savepoint: earlier sessions' rows must not be undone with these
            cur.execute('SAVEPOINT "group"')
            self._group = []
            self._group_start = (self._fts.mark(), report.prepared, report.reloaded, report.events, report.held)
        self._group.append((row, item, prepared))
        try:
            if (problem := refuse_owned_elsewhere(cur, item.path, item.header["id"], self.source, now)) is not None:
                log.warning("%s", problem.message)
                return 0
            # The last activity is read off the recording when it can be: stored with the row,
            # not set by a query and an update after the events (indexer.recordedactivity).
            last = recorded_last_activity(prepared.calls)
            insert_indexed_session(cur, prepared.sid, item, item.header, prepared, generation, now, self.source, None if last is UNKNOWN else last)
            written = self._replay(cur, prepared)
            if last is UNKNOWN:
                store_last_activity(cur, prepared.sid)
        except (*BAD_LOG_ERRORS, *self.writer.data_errors, _PreparedFailure):
            return self._regroup(cur, generation, now, report)
        report.prepared += 1
        report.reloaded += 1
        report.events += written
        report.held += self._held
        self._held = 0
        if len(self._group) >= GROUP_SESSIONS:
            self._close_group(cur)
        return written

    def _regroup(self, cur: sqlite3.Cursor, generation: int, now: float, report: ReconcileReport) -> int:
        """Roll the open group back and write its sessions again, each in its own savepoint; the last one's rows."""
        assert self._group is not None
        members, self._group = self._group, None
        cur.execute('ROLLBACK TO "group"')
        cur.execute('RELEASE "group"')
        fts_mark, report.prepared, report.reloaded, report.events, report.held = self._group_start
        self._fts.rollback(fts_mark)
        self._held = 0
        written = 0
        for row, item, prepared in members:
            written = self._index_one(cur, row, item, generation, now, report, given=prepared)
        return written

    def _close_group(self, cur: sqlite3.Cursor) -> None:
        """Release the open group's savepoint, if any (before another session's, and before the commit)."""
        if self._group is not None:
            self._group = None
            cur.execute('RELEASE "group"')

    def _decode(
        self,
        cur: sqlite3.Cursor,
        sid: int,
        item: Observed,
        resume: ResumePoint | None,
        settled: bool,
        row: tuple[Any, ...] | None,
        generation: int,
        now: float,
        *,
        header_stored: bool = False,
    ) -> int:
        """Decode (from ``resume`` when given) and project; returns rows written.

        ``header_stored`` says the session row already holds this header's JSON
        (it was just inserted), so the update leaves ``header_json`` — and the
        listing index that covers it — alone.
        """
        header = item.header
        assert header is not None
        outcome = ingest_log(
            cur, sid, item.path, self.compression, self.root, header, resume, settled,
            stored_synthetic_from=row[7] if resume is not None and row is not None else None,
            stored_title_seq=row[8] if row is not None else None,
            fts=self._fts, redact_documents=self.redact_documents,
        )  # fmt: skip
        return self._store_outcome(cur, sid, header, outcome, generation, now, header_stored=header_stored)

    def _replay(self, cur: sqlite3.Cursor, prepared: Prepared) -> int:
        """Write a session a worker prepared (inside its savepoint, like :meth:`_decode`).

        Its session row is already complete (:func:`insert_indexed_session`).
        """
        if prepared.failure is not None:
            raise _PreparedFailure(prepared.failure)
        assert prepared.outcome is not None
        for message in prepared.warnings:
            log.warning("%s", message)
        replay(cur, prepared.calls, self._fts)
        if prepared.outcome.held:
            self._held += 1
        return prepared.outcome.written

    def _open_stream(self, item: Observed, sid: int, settled: bool, *, split: bool) -> SessionStream | None:
        """A worker that streams a long new log's writes, or ``None`` (the writer reads it).

        With ``split`` (a log new to the index) and two workers or more, one worker
        reads the log and another projects it (:mod:`indexer.splitstream`).
        """
        assert item.header is not None and item.stat is not None
        if self.workers <= 0 or item.stat.st_size <= PREPARE_MAX_BYTES:
            return None
        task = PrepTask(item.path, sid, item.header, settled, item.stat.st_size, self.redact_documents)
        try:
            return SessionStream(task, self.compression, self.root, self._worker_pool(), split=split and split_wanted(self.workers))
        except Exception as exc:  # noqa: BLE001 - a broken pool: the writer reads the log itself
            log.warning("session %s: no worker to stream it (%s: %s)", item.header["id"], type(exc).__name__, exc)
            return None

    def _replay_stream(self, cur: sqlite3.Cursor, sid: int, header: dict[str, Any], stream: SessionStream, generation: int, now: float, report: ReconcileReport) -> int:
        """Replay a streamed log chunk by chunk while its worker reads on (inside the savepoint), the
        collector off (a bounded stretch, :func:`~indexer.preparation.collector_paused`: no cycles)."""
        try:
            with collector_paused():
                return self._replay_messages(cur, sid, header, stream, generation, now, report)
        finally:
            report.writer_wait_seconds += stream.wait_seconds

    def _replay_messages(self, cur: sqlite3.Cursor, sid: int, header: dict[str, Any], stream: SessionStream, generation: int, now: float, report: ReconcileReport) -> int:
        for message in stream.messages():
            kind = message[0]
            if kind in ("done", "failed"):
                report.prepared += 1
            if kind == "calls":
                replay(cur, message[1], self._fts)
                # Index the log's texts as they come: held to the end, a 100 MB log's
                # 5.2M characters took the writer 0.2 s alone after its workers were done.
                self._fts.spill(cur, STREAM_FTS_CHARS)
            elif kind == "done":
                _, outcome, warnings, (cpu_seconds, peak_rss_kib, stages) = message
                report.worker_cpu_seconds += cpu_seconds
                report.worker_peak_rss_mb = max(report.worker_peak_rss_mb, round(peak_rss_kib / 1024, 1))
                for name, stage_cpu, stage_rss in stages:
                    log.info("session %s: %s worker %.2f CPU-s, peak RSS %.1f MB", header["id"], name, stage_cpu, stage_rss / 1024)
                    report.stream_stages.append((name, round(stage_cpu, 2), round(stage_rss / 1024, 1)))
                for warning in warnings:
                    log.warning("%s", warning)
                return self._store_outcome(cur, sid, header, outcome, generation, now, header_stored=True)
            elif kind == "failed":
                raise _PreparedFailure(message[1])
            else:
                raise StreamBroken(message[1])
        raise StreamBroken("the worker ended without an answer")

    def _store_outcome(self, cur: sqlite3.Cursor, sid: int, header: dict[str, Any], outcome: LogOutcome, generation: int, now: float, *, header_stored: bool) -> int:
        if outcome.held:
            self._held += 1
        values = (*outcome.values, generation, now)
        if header_stored:
            cur.execute(UPDATE_INDEXED + ' WHERE "sid" = ?', (*values, sid))
        else:
            cur.execute(UPDATE_INDEXED + ', "header_json" = ? WHERE "sid" = ?', (*values, bytearray(_encode_json(header)), sid))
        return outcome.written


def _stored_fingerprint(cur: sqlite3.Cursor) -> str | None:
    """The redaction fingerprint the index's documents were derived with (``None``: unknown)."""
    row = cur.execute('SELECT "redaction" FROM "index_meta"').fetchone()
    return row[0] if row is not None else None


class _PreparedFailure(Exception):
    """A worker found the log bad: its ``(status, code, message)``."""

    def __init__(self, failure: tuple[str, str, str]) -> None:
        super().__init__(failure[2])
        self.failure = failure


def _warm_up(pool: ProcessPoolExecutor) -> None:
    """Start a pool's processes (its real tasks report any failure; this one stays quiet)."""
    try:
        pool.submit(int).result()
    except Exception:  # noqa: BLE001
        pass
