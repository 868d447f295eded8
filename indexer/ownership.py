"""Which source owns which session: the SQL the reconciler's ownership rules need.

A daemon reads, writes and deletes only its own source's sessions
(:mod:`readmodel.store.sources`).  These helpers answer, on the writer's
DB-API cursor, who holds a session id, record the identity problem of a
transcript whose id another source holds, keep each source's layout problems
apart, register a source, and reserve session row ids across writers.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from readmodel.core.clipping import clip_path, clip_repr

from .layout import LayoutProblem

_RESERVE_SIDS: Final = (
    'UPDATE "index_meta" SET "next_sid" = max(coalesce("next_sid", 1), (SELECT coalesce(max("sid"), 0) + 1 FROM "sessions")) + ? '
    'RETURNING "next_sid"'
)


def reserve_sids(cur: sqlite3.Cursor, count: int) -> tuple[int, int]:
    """Reserve ``count`` (> 0) sids in ``index_meta.next_sid`` in one atomic statement; ``[start, end)``.

    Daemons of other sources reserve from the same counter, so no two writers
    ever hand out one sid; sids reserved but unused leave gaps.
    """
    end = cur.execute(_RESERVE_SIDS, (count,)).fetchall()[0][0]  # fetched to the end: the statement completes
    return end - count, end


def register_source(cur: sqlite3.Cursor, source: str, root: str, compression: str, now: float) -> None:
    """``source``'s row in ``sources`` (created on its first pass; its root and compression kept current)."""
    row = cur.execute('SELECT "root", "compression" FROM "sources" WHERE "source" = ?', (source,)).fetchone()
    if row is not None and row[0] == root and row[1] == compression:
        return
    cur.execute("BEGIN IMMEDIATE")
    cur.execute(
        'INSERT INTO "sources" ("source", "root", "compression", "first_seen_at", "generation") VALUES (?, ?, ?, ?, 0) '
        'ON CONFLICT ("source") DO UPDATE SET "root" = excluded."root", "compression" = excluded."compression"',
        (source, root, compression, now),
    )
    cur.execute("COMMIT")


def other_owners(cur: sqlite3.Cursor, source: str) -> dict[str, tuple[str, str]]:
    """``id -> (source, path)`` of every session another source holds."""
    rows = cur.execute('SELECT "id", "source", "path" FROM "sessions" WHERE "source" IS NOT ?', (source,))
    return {row[0]: (row[1] or "", row[2]) for row in rows}


def owned_elsewhere(path: str, session_id: str, source: str, owner_path: str) -> LayoutProblem:
    """The identity problem of a transcript whose session id another source already holds."""
    return LayoutProblem(
        "identity",
        path,
        f"{path} holds session {clip_repr(session_id)}, which source {clip_repr(source)} already indexed from {clip_path(owner_path)}; "
        "not indexed from this source (ids are never merged)",
    )


def refuse_owned_elsewhere(cur: sqlite3.Cursor, path: str, session_id: str, source: str, now: float) -> LayoutProblem | None:
    """Inside the writing transaction: when another source holds ``session_id``, record the problem and return it.

    The pass checked owners before its transactions; this catches a daemon of
    another source that committed the id since — never merged, never overwritten.
    """
    owner = cur.execute('SELECT "source", "path" FROM "sessions" WHERE "id" = ?', (session_id,)).fetchone()
    if owner is None or owner[0] == source:
        return None
    problem = owned_elsewhere(path, session_id, owner[0] or "", owner[1])
    cur.execute(
        'INSERT OR REPLACE INTO "layout_problems" ("path", "kind", "message", "observed_at", "source") VALUES (?, ?, ?, ?, ?)',
        (problem.path, problem.kind, problem.message, now, source),
    )
    return problem


def store_problems(cur: sqlite3.Cursor, problems: list[LayoutProblem], now: float, source: str) -> bool:
    """Replace ``source``'s layout problems (other sources' stay); whether anything changed."""
    rows = cur.execute('SELECT "path", "kind", "message" FROM "layout_problems" WHERE "source" = ?', (source,))
    before = {(row[0], row[1], row[2]) for row in rows}
    after = {(p.path, p.kind, p.message) for p in problems}
    if before == after:
        return False
    cur.execute('DELETE FROM "layout_problems" WHERE "source" = ?', (source,))
    cur.executemany(
        'INSERT OR REPLACE INTO "layout_problems" ("path", "kind", "message", "observed_at", "source") VALUES (?, ?, ?, ?, ?)',
        [(path, kind, message, now, source) for path, kind, message in sorted(after)],
    )
    return True


def clashes(cur: sqlite3.Cursor, session_id: str, path: str, source: str) -> bool:
    """``session_id`` is stored under another path or by another source (a full pass decides)."""
    row = cur.execute('SELECT "path", "source" FROM "sessions" WHERE "id" = ?', (session_id,)).fetchone()
    return row is not None and (row[0] != path or row[1] != source)


def has_problem(cur: sqlite3.Cursor, path: str, source: str) -> bool:
    """``source`` has a layout problem at ``path``, or a duplicate id anywhere."""
    sql = 'SELECT 1 FROM "layout_problems" WHERE "source" = ? AND ("path" = ? OR "kind" = \'duplicate-id\') LIMIT 1'
    return cur.execute(sql, (source, path)).fetchone() is not None
