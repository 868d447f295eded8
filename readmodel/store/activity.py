"""A session's last activity: the time of its last event, kept in ``sessions.last_activity``.

The indexer writes the column in the same transaction (and savepoint) as the
session's events, after every successful read of a log, so an incremental
pass leaves the value a cold build computes; a log that fails keeps no events
and so no last activity (``NULL``).  Migration 0010 fills it for indexes built
before it existed with the same function.

The last event is the one with the highest seq, stored either as an
``events`` row or as the last member of an ``event_runs`` row; its ``time``
is stored as the log gave it (usually epoch ms; ``NULL`` when absent).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from sqlalchemy import text

from readmodel.store.blocks import unpack_run_times

# Each subquery is one seek on a primary key: the last ``events`` row and the last run.
LAST_EVENT_COLUMNS: Final = (
    '(SELECT e.seq FROM "events" e WHERE e.sid = s.sid ORDER BY e.seq DESC LIMIT 1), '
    '(SELECT e.time FROM "events" e WHERE e.sid = s.sid ORDER BY e.seq DESC LIMIT 1), '
    '(SELECT r.first_seq + r.count - 1 FROM "event_runs" r WHERE r.sid = s.sid ORDER BY r.first_seq DESC LIMIT 1), '
    '(SELECT r.times FROM "event_runs" r WHERE r.sid = s.sid ORDER BY r.first_seq DESC LIMIT 1)'
)
_ONE: Final = f'SELECT {LAST_EVENT_COLUMNS} FROM "sessions" s WHERE s.sid = ?'
_ALL: Final = f'SELECT s.sid, {LAST_EVENT_COLUMNS} FROM "sessions" s'
_STORE: Final = 'UPDATE "sessions" SET "last_activity" = ? WHERE "sid" = ?'


def last_event_time(columns: Any) -> Any:
    """The last event's time from the four :data:`LAST_EVENT_COLUMNS` values (``None``: no event or no time)."""
    event_seq, event_time, run_last, run_times = columns
    if run_last is not None and (event_seq is None or run_last > event_seq):
        return unpack_run_times(run_times)[-1]
    return event_time


def store_last_activity(cur: sqlite3.Cursor, sid: int) -> None:
    """Set the session's ``last_activity`` from its stored events (inside the writer's transaction)."""
    row = cur.execute(_ONE, (sid,)).fetchone()
    cur.execute(_STORE, (None if row is None else last_event_time(row), sid))


def backfill_last_activity(conn: Any) -> int:
    """Set every session's ``last_activity`` from its stored events through the SQLAlchemy
    connection ``conn`` (a migration's); returns the sessions updated."""
    values = [{"time": last_event_time(row[1:]), "sid": row[0]} for row in conn.exec_driver_sql(_ALL).fetchall()]
    if values:
        # Named binds: the migration runs on either backend (SQLite's ``?``, psycopg's ``%s``).
        conn.execute(text('UPDATE "sessions" SET "last_activity" = :time WHERE "sid" = :sid'), values)
    return len(values)
