"""Opening an index file read-only with SQLite, including from read-only media.

No SQLAlchemy here: the search connection and artifact lookups open the file
with the driver directly, through the same :func:`reader_uri`.

An index in WAL mode needs ``<db>-shm`` even to be read, and a reader creates
it when absent, which is impossible on a read-only mount.  There SQLite's
``immutable=1`` reads the file without it; that is only correct when no one
can write the file meanwhile, which the read-only mount guarantees, and when
no write-ahead log holds changes that immutable mode would skip.
"""

from __future__ import annotations

import os
from urllib.parse import quote


def sqlite_path(db: str) -> str | None:
    """The file path of a SQLite database spec, or ``None`` for another URL / ``:memory:``."""
    if db == ":memory:":
        return None
    if db.startswith("sqlite:///"):
        return db[len("sqlite:///") :]
    if "://" in db:
        return None
    return db


def on_read_only_mount(path: str) -> bool:
    """Whether ``path`` lives on a file system mounted read-only (``False`` when it cannot be told)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def size_or_none(path: str) -> int | None:
    """The size of ``path`` in bytes, ``None`` when it does not exist (or cannot be statted)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _immutable(path: str) -> bool:
    """Whether the reader may open ``path`` with ``immutable=1``.

    Only on a read-only mount (no writer can appear through it) and only when
    no ``-shm`` exists (SQLite then reads the WAL through it, read-only) and
    the ``-wal`` is absent or empty (nothing that immutable mode would skip).
    """
    return on_read_only_mount(path) and size_or_none(path + "-shm") is None and not size_or_none(path + "-wal")


def reader_uri(path: str) -> str:
    """The SQLite URI that opens the index file ``path`` read-only (see :func:`_immutable`)."""
    absolute = os.path.abspath(path)
    return "file:" + quote(absolute) + "?mode=ro" + ("&immutable=1" if _immutable(absolute) else "")
