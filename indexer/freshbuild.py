"""A fresh index built in a file of its own and renamed into place when complete.

When ``sessionq index --once`` finds no index file yet, its pass writes every
session of the root; nobody reads a half-built index that does not exist yet, so the pass
needs no write-ahead log, no checkpoints and no syncs.  It writes into
``DB.building-SOURCE`` beside the final path through a rollback journal
(a session's savepoint can still be rolled back) with ``synchronous=OFF``
(:func:`readmodel.store.database.create_index_engine`'s ``bulk``): no
fsyncs, no checkpoint copying every page a second time.  Only a complete
pass is published: the file is switched to WAL mode, synced, and linked to
the final path, and the directory synced, so a crash (SIGKILL, power loss)
at any moment leaves either no index at the final path or the complete one.
The next ``sessionq index`` of that source (``--once`` or the daemon)
discards the stale build (:func:`discard_stale`; it holds the source's
exclusive lock, :class:`indexer.daemon.IndexLock`).  Two sources' passes
may both start on a missing index: each builds its own file, the first to
finish publishes it, and the other finds the path taken
(:class:`Superseded`), discards its file and indexes into the published one
the ordinary way — publishing never replaces an index.

Publishing syncs the whole file, and nothing wrote it back before: a build
shorter than the kernel's dirty-page expiry (30 s) left every page dirty, and
the sync took ≈ 0.55 ms per MB of index on this machine (15–20 ms of a
10 MB root's 0.6 s build; ≈ 80 ms for the 160 MB root's) with the workers
already gone.  So :class:`WriteBehind` syncs the building file on a thread
of its own each time it has grown by :data:`WRITE_BEHIND_BYTES` while the
pass runs, and publishing waits for the last pages only.  Durability is
unchanged: it is the sync at publishing that counts.

Contract: :func:`fresh_target` decides; :func:`building` yields the bulk
engine and publishes the file only when the block ends without an exception
and the caller said the pass completed (:meth:`Build.complete`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from typing import Final

from sqlalchemy import Engine

from readmodel.store.database import open_writer, sqlite_path

BUILDING_SUFFIX: Final = ".building"
_SIDE_FILES: Final = ("", "-journal", "-wal", "-shm")
WRITE_BEHIND_BYTES: Final = 4 * 1024 * 1024
"""The building file is synced in the background each time it has grown by this much."""
WRITE_BEHIND_SECONDS: Final = 0.05
"""How often the write-behind thread looks at the file's size (an ``fstat``)."""


def fresh_target(db: str) -> str | None:
    """The SQLite file a fresh build would create for ``db``; ``None`` when one exists (or not SQLite)."""
    path = sqlite_path(db)
    if path is None:
        return None
    path = os.path.abspath(path)
    try:
        if os.path.getsize(path) > 0:
            return None
    except FileNotFoundError:
        pass
    except OSError:
        return None  # a directory or an unreadable path: open_writer says what is wrong
    return path


def building_path(path: str, source: str) -> str:
    """Where ``source``'s fresh build of the index at ``path`` is written until it is complete."""
    return f"{path}{BUILDING_SUFFIX}-{source}"


def discard(temporary: str) -> None:
    """Remove an unfinished fresh build (and any side file of it)."""
    for suffix in _SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary + suffix)


def discard_stale(db: str, source: str) -> None:
    """Remove ``source``'s unfinished fresh build of the SQLite index ``db`` (a crash's leftover), if any."""
    path = sqlite_path(db)
    if path is not None:
        discard(building_path(os.path.abspath(path), source))


class Superseded(Exception):
    """Another source's daemon published an index at the path first; this build was discarded."""


class Build:
    """A fresh build in progress: its engine, and whether its pass completed."""

    def __init__(self, engine: Engine, path: str) -> None:
        self.engine = engine
        self.path = path
        self.completed = False

    def complete(self) -> None:
        """The pass over the whole root finished: publish the file when the block ends."""
        self.completed = True


class WriteBehind(threading.Thread):
    """Syncs a growing file in the background, so that a final sync finds few dirty pages.

    Start it once the file exists; :meth:`stop` waits for a sync in progress.
    A failure (the file gone, a filesystem that refuses) ends the thread
    quietly: only the head start of the final sync is lost.
    """

    def __init__(self, path: str) -> None:
        super().__init__(name="write-behind", daemon=True)
        self.path = path
        self.synced = 0  # the file's size at the last sync
        self.syncs = 0
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return
        try:
            while not self._stopping.wait(WRITE_BEHIND_SECONDS):
                size = os.fstat(fd).st_size
                if size - self.synced >= WRITE_BEHIND_BYTES:
                    os.fdatasync(fd)
                    self.synced, self.syncs = size, self.syncs + 1
        except OSError:
            pass
        finally:
            os.close(fd)

    def stop(self) -> None:
        """End the thread (after the sync in progress, if any)."""
        self._stopping.set()
        if self.is_alive():
            self.join()


@contextlib.contextmanager
def building(path: str, *, root: str, compression: str, source: str) -> Iterator[Build]:
    """A bulk engine on ``source``'s building file, published at ``path`` if the block completes the build.

    An exception, or a block that never called :meth:`Build.complete` (an
    interrupted pass), discards the file instead; :class:`Superseded` is
    raised when another build was published at ``path`` meanwhile.
    """
    temporary = building_path(path, source)
    discard(temporary)
    engine = open_writer(temporary, root=root, compression=compression, bulk=True)
    build = Build(engine, temporary)
    behind = WriteBehind(temporary)
    behind.start()
    try:
        deferred = drop_deferred_indexes(engine)
        yield build
        if build.completed:
            create_indexes(engine, deferred)
    except BaseException:
        behind.stop()
        engine.dispose()
        discard(temporary)
        raise
    behind.stop()
    engine.dispose()
    try:
        if build.completed:
            publish(temporary, path)
    finally:
        discard(temporary)


DEFERRED_INDEXES: Final = ("sessions_activity", "sessions_filters", "sessions_listing", "sessions_parent", "document_rows_text", "texts_length")
"""Indexes a fresh build creates once its rows are in, instead of maintaining them row by row.

Each costs a B-tree insert per row at a random place (a session's row enters
four of them, one with its header JSON; a document's text id is scattered),
about a tenth of the writer's CPU in a cold build of many sessions, while
one ``CREATE INDEX`` over the finished table sorts once.  None of them serves
a query of the pass: the writer finds sessions by sid, id and path (the
primary key, ``UNIQUE (id)`` and ``sessions_source``, kept) and texts by hash
(``texts_hash``, kept), and it reads ``document_rows_text`` only to drop
orphaned texts, which a pass over an empty index never leaves.  An index
changes no query's result, only its plan: the published file holds the same
rows and the same ``CREATE`` statements (re-run verbatim from
``sqlite_master``); only their order there differs (a re-created index comes
after every other object).  Unique indexes stay: they are constraints.
"""


def drop_deferred_indexes(engine: Engine) -> list[tuple[str, str]]:
    """Drop the :data:`DEFERRED_INDEXES` of a new, empty index; their ``(name, sql)`` in schema order."""
    conn = engine.raw_connection()
    try:
        cur = conn.driver_connection.cursor()
        names = ", ".join(f"'{name}'" for name in DEFERRED_INDEXES)
        deferred = cur.execute(f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name IN ({names}) ORDER BY rowid").fetchall()
        for name, _sql in deferred:
            cur.execute(f'DROP INDEX "{name}"')
        return deferred
    finally:
        conn.close()


def create_indexes(engine: Engine, indexes: list[tuple[str, str]]) -> None:
    """Create ``indexes`` (``(name, sql)``, as :func:`drop_deferred_indexes` returned them) in one transaction."""
    if not indexes:
        return
    conn = engine.raw_connection()
    try:
        cur = conn.driver_connection.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for _name, sql in indexes:
                cur.execute(sql)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")
    finally:
        conn.close()


def publish(temporary: str, path: str) -> None:
    """Switch the finished file to WAL mode, sync it and link it at ``path``; sync the directory.

    Raises :class:`Superseded` (leaving ``path`` alone) when ``path`` exists by then.
    """
    conn = sqlite3.connect(temporary, isolation_level=None)
    try:
        # No syncs of SQLite's own while the mode changes (four fdatasyncs, 5–20 ms on this
        # machine): the file is nobody's until the link below, a crash before it leaves a
        # stale build to discard, and the fsync below makes what is linked durable.
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA journal_mode = WAL")  # as every writer connection opens it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()  # the last connection: SQLite checkpoints and removes the -wal and -shm files
    fd = os.open(temporary, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temporary, path)  # unlike a rename, never replaces an index published meanwhile
    except FileExistsError:
        if os.path.getsize(path) > 0:
            raise Superseded(path) from None
        os.replace(temporary, path)  # an empty file (what `fresh_target` accepts): nothing to keep
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
