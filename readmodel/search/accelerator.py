"""The optional C accelerator for search: FTS5 auxiliary functions on a connection.

``readmodel/search/_ftsaux.c`` adds two functions to a connection's FTS5:

* ``sessionq_spans(tbl)``: the number of highlighted spans ``highlight(tbl, 0, …)``
  would mark in the current row (the ranking's first key);
* ``sessionq_snippet_source(tbl, open, close, before_chars, after_bytes)``: the
  part of ``highlight()``'s output around the first span that a snippet can
  depend on (see ``readmodel.search.snippet_source_decides``).

They read FTS5's instance list instead of tokenising and copying whole
documents, so ranking a common word over a million events no longer costs a
``highlight()`` or a posting-list GROUP BY per match.  Their results are
property-tested equal to what ``highlight()`` marks.

The extension is built by ``pip install`` when a C compiler and SQLite's
headers are present; without it, or with ``SESSIONQ_FTSAUX=0`` in the
environment, :func:`install` returns ``False`` and search uses its pure-SQL
paths, which give the same answers more slowly.
"""

from __future__ import annotations

import sqlite3
import sys
from types import ModuleType
from typing import Final

from readmodel.core.accelerators import FTSAUX, accelerator_module

# CPython releases whose sqlite3.Connection keeps its sqlite3* handle right
# after the object header (the extension reads it from there).
_KNOWN_PYTHONS: Final = ((3, 11), (3, 12), (3, 13), (3, 14))


def _load() -> ModuleType | None:
    if sys.version_info[:2] not in _KNOWN_PYTHONS or sys.implementation.name != "cpython":
        return None
    _ftsaux = accelerator_module(FTSAUX)
    if _ftsaux is None:
        return None
    major, minor, patch = sqlite3.sqlite_version_info
    if _ftsaux.library_version() != major * 1_000_000 + minor * 1_000 + patch:
        return None  # linked with another SQLite than the sqlite3 module's: never mix them
    return _ftsaux


_MODULE: Final = _load()


def available() -> bool:
    """Whether the accelerator is built, enabled and matches this interpreter's SQLite."""
    return _MODULE is not None


def install(conn: sqlite3.Connection) -> bool:
    """Register the functions on ``conn`` (an open ``sqlite3.Connection``).

    Returns ``True`` when they are now callable on this connection; ``False``
    when the accelerator is unavailable, in which case nothing was touched.
    """
    if _MODULE is None or not isinstance(conn, sqlite3.Connection):
        return False
    _MODULE.register(conn)
    return True
