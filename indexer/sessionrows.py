"""The ``sessions`` rows a reconcile pass writes: new, complete at once (prepared), updated, failed."""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from .ingest import session_columns
from .layout import revision_token
from .observation import Observed
from .preparation import Prepared

UPDATE_INDEXED: Final = (
    'UPDATE "sessions" SET "revision" = ?, "size" = ?, "resume" = ?, "event_count" = ?, "stored_count" = ?, '
    '"synthetic_from" = ?, "tail_state" = ?, "surface_nodes" = NULL, "title_seq" = ?, "status" = \'ok\', '
    '"error_code" = NULL, "error_message" = NULL, "generation" = ?, "indexed_at" = ?'
)
"""The session row after a successful read (its values, then optionally ``header_json``, then the sid)."""


SELECT_SESSIONS: Final = (
    'SELECT "sid", "path", "revision", "resume", "tail_state", "status", "id", "synthetic_from", "title_seq" FROM "sessions"'
)


def insert_session(cur: sqlite3.Cursor, sid: int, item: Observed, header: dict[str, Any], generation: int, now: float, source: str) -> None:
    """A new session's row, before its events (they reference it); :func:`UPDATE_INDEXED` completes it."""
    cur.execute(
        'INSERT INTO "sessions" ("sid", "id", "path", "header_json", "created_at", "id_key", "cwd", "parent_session", "revision", "size", '
        '"event_count", "stored_count", "tail_state", "status", "generation", "indexed_at", "source") '
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', 0, 0, 0, 'clean', 'ok', ?, ?, ?)",
        (sid, header["id"], item.path, *session_columns(header), generation, now, source),
    )


def insert_indexed_session(
    cur: sqlite3.Cursor,
    sid: int,
    item: Observed,
    header: dict[str, Any],
    prepared: Prepared,
    generation: int,
    now: float,
    source: str,
    last_activity: Any = None,
) -> None:
    """A prepared session's row, complete at once (the same row :func:`insert_session` and the update leave).

    ``last_activity`` is stored as given: the caller either knows it already
    (:mod:`indexer.recordedactivity`) or sets it once the events are written.
    """
    assert prepared.outcome is not None and prepared.columns is not None
    cur.execute(
        'INSERT INTO "sessions" ("sid", "id", "path", "header_json", "created_at", "id_key", "cwd", "parent_session", '
        '"revision", "size", "resume", "event_count", "stored_count", "synthetic_from", "tail_state", "title_seq", "status", "generation", "indexed_at", "source", '
        '"last_activity") '
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'ok', ?, ?, ?, ?)",
        (sid, header["id"], item.path, *prepared.columns, *prepared.outcome.values, generation, now, source, last_activity),
    )


def update_failed(cur: sqlite3.Cursor, sid: int, item: Observed, generation: int, now: float, status: str, code: str, message: str) -> None:
    assert item.stat is not None
    cur.execute(
        'UPDATE "sessions" SET "revision" = ?, "size" = ?, "resume" = NULL, "event_count" = 0, "stored_count" = 0, '
        '"synthetic_from" = NULL, "tail_state" = \'clean\', "surface_nodes" = NULL, "title_seq" = NULL, "status" = ?, '
        '"error_code" = ?, "error_message" = ?, "generation" = ?, "indexed_at" = ?, "last_activity" = NULL WHERE "sid" = ?',
        (revision_token(item.stat), item.stat.st_size, status, code, message, generation, now, sid),
    )
