"""Recognising a full disk under the index, so that it is reported as one.

SQLite says ``database or disk is full`` (``SQLITE_FULL``) when a write to the
database, its WAL or a temporary file finds no room, and some paths (growing
the ``-shm`` file, a short write with another errno) surface the same cause as
``SQLITE_IOERR``.  Both often arrive wrapped — by SQLAlchemy (``.orig``), or as
the context of a secondary error — so :func:`is_disk_full` looks through the
whole chain, and takes an I/O error for a full disk only when the index's
filesystem really is (nearly) out of space.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from typing import Final

SQLITE_IOERR: Final = 10
SQLITE_FULL: Final = 13
LOW_SPACE_BYTES: Final = 1024 * 1024
"""Below this many free bytes an SQLite I/O error on the index counts as a full disk."""
_NO_SPACE_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})


def free_bytes(db_path: str | None) -> int | None:
    """Bytes an unprivileged writer may still use on the filesystem holding ``db_path``.

    ``None`` for a database without a file, or when the filesystem cannot be
    queried (the directory is gone).
    """
    if not db_path or db_path == ":memory:":
        return None
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(db_path)))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, the driver error it wraps, and everything it was raised from or while handling."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        wrapped = getattr(current, "orig", None)  # sqlalchemy.exc.DBAPIError
        pending += [wrapped if isinstance(wrapped, BaseException) else None, current.__cause__, current.__context__]


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF  # extended codes keep the primary in the low byte


def is_disk_full(exc: BaseException, db_path: str | None) -> bool:
    """Whether ``exc`` (or anything in its chain) means there is no room to write the index."""
    for error in _chain(exc):
        if isinstance(error, OSError) and error.errno in _NO_SPACE_ERRNOS:
            return True
        if not isinstance(error, sqlite3.Error):
            continue
        code = _primary_code(error)
        if code == SQLITE_FULL or "database or disk is full" in str(error):
            return True
        if code == SQLITE_IOERR or "disk I/O error" in str(error):
            free = free_bytes(db_path)
            if free is not None and free < LOW_SPACE_BYTES:
                return True
    return False


def disk_full_message(db_path: str | None) -> str:
    """The one-line report of a full disk under the index at ``db_path``."""
    free = free_bytes(db_path)
    if free is None:
        return "the index's filesystem is full"
    if free >= LOW_SPACE_BYTES:
        # SQLITE_FULL with room beside the index: its temporary files (sorts,
        # large FTS merges) ran out of space elsewhere, or the page limit was hit.
        return f"SQLite found the database or disk full, though the index's filesystem has {free} bytes free (is its temporary directory full?)"
    return f"the index's filesystem is full ({free} bytes free)"


def describe_write_failure(exc: BaseException, db_path: str | None) -> str:
    """What a failed write of the index is, in one line for the user."""
    if is_disk_full(exc, db_path):
        return disk_full_message(db_path)
    return f"{type(exc).__name__}: {exc}"
