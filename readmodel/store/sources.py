"""Sources: which indexer (host) a session was indexed by (a sessionq extension).

Every session row carries the *source* of the daemon that indexed it
(``sessionq index --source NAME``, default: this host's name).  Several
daemons, one per source, may write one index; each writes and deletes only
its own source's sessions, and a session id another source already holds is
an identity problem of the newcomer, never merged and never overwritten.

A source name is 1–64 characters of ``[A-Za-z0-9._-]`` starting with a letter
or digit: it names a lock file beside a SQLite index (and, later, a
PostgreSQL advisory lock key), so it must be a safe file-name component.

The ``sources`` table holds one row per source that ever indexed into the
index: its root, when it last reconciled, and its own generation counter
(bumped by each of its batches that changed something; on SQLite with the
global one, on PostgreSQL alone: readers there bind cursors to these rows, and
:data:`SERVER_GENERATION_SQL` sums them, instead of one hot global row).

Sessions of indexes built before schema 0012 were labelled at upgrade time
with the source the upgrading command named (``sessionq index --upgrade
--source NAME`` / ``sessionq db upgrade --source NAME``), else this host's
name (:func:`default_source`).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Sequence
from typing import Any, Final

SERVER_GENERATION_SQL: Final = (
    'SELECT m."global_generation" + coalesce((SELECT sum(g."generation") FROM "sources" g), 0), '
    '(SELECT max(g."last_reconcile_at") FROM "sources" g) FROM "index_meta" m'
)
"""A server index's generation number and latest reconcile (PostgreSQL; :func:`readmodel.store.status._server_generation`).

No global row is written per batch on a server index: each batch bumps its own
source's counter, and ``prune`` moves a removed source's counter (plus one)
into ``index_meta.global_generation``.  The sum counts every changing commit
and prune, as SQLite's global counter does, and never goes back.  Snapshots see
nested sets of commits, so two snapshots that differ differ in this number."""

SOURCE_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def valid_source(name: str) -> bool:
    """Whether ``name`` is a usable source name."""
    return type(name) is str and SOURCE_PATTERN.match(name) is not None


def check_source(name: str) -> str:
    """``name`` when it is a valid source name; else :class:`ValueError` saying what one is."""
    if not valid_source(name):
        raise ValueError(
            f"invalid source name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def default_source() -> str:
    """This host's name as a source name (unsafe characters become ``-``; ``localhost`` if none is left)."""
    name = _UNSAFE.sub("-", socket.gethostname()).strip("-._")[:64]
    return name if valid_source(name) else "localhost"


def session_ids_of_sources(cur: Any, sources: Sequence[str]) -> set[str]:
    """The ids of the stored sessions whose source is among ``sources`` (a DB-API cursor)."""
    found: set[str] = set()
    wanted = list(dict.fromkeys(sources))
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        found.update(row[0] for row in cur.execute(f'SELECT "id" FROM "sessions" WHERE "source" IN ({marks})', chunk))
    return found


SOURCE_SUBQUERY: Final = '(SELECT "id" FROM "sessions" WHERE "source" IN ({marks}))'
"""The ids of the sessions of some sources, as an SQL subquery (``marks``: the placeholders)."""
