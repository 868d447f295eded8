"""A prepared session's last activity, read from its recording instead of the index.

:func:`readmodel.store.activity.store_last_activity` sets ``sessions.last_activity``
after a session's events are written: one query for the last ``events`` row
and the last ``event_runs`` row, then an ``UPDATE`` that rewrites the session
row and its ``sessions_activity`` entry — about a twentieth of the writer's
CPU in a cold build of many small sessions.  For a session a worker prepared
(:mod:`indexer.preparation`) the writer already holds every row it is about to
write, so it can compute the same value before it inserts the session row and
store it with the row: no query and no second write.

:func:`recorded_last_activity` reads the recording's ``INSERT`` statements
into ``events`` and ``event_runs`` (which columns each statement binds, parsed
once per statement text) and answers exactly what the query would answer
once they are replayed: the time of the row with the highest seq, an event
row's ``time`` or the last of a run's packed times.  It answers
:data:`UNKNOWN` for any recording that touches those tables otherwise (a
deletion, a run rewritten, a statement it does not recognise): the writer then
runs the query as before.  ``tests/index/test_recorded_activity.py`` pins it
against the query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, Final

from readmodel.store.blocks import unpack_run_times

UNKNOWN: Final = object()
"""The recording does not tell: ask the index (:func:`~readmodel.store.activity.store_last_activity`)."""

_TOUCHES: Final = re.compile(r'"(events|event_runs)"')
_INSERT: Final = re.compile(r'INSERT INTO "(events|event_runs)" \(([^)]*)\) VALUES \(([^)]*)\)\Z')
_SURFACE_UPDATE: Final = 'UPDATE "events" SET "surface" = ?, "replaced_by" = ? WHERE '
"""Shadowing marks (seq and time unchanged): the only other write a new session's recording makes there."""

_IGNORED: Final = ("ignore", None, None, None)
_OPAQUE: Final = ("opaque", None, None, None)


def _reading(sql: str | None) -> tuple[str, Any, Any, Any]:
    """How a recorded statement bears on the last activity.

    ``("ignore", …)``: it writes neither table's seq nor time; ``("events",
    seq, time, None)`` / ``("runs", first_seq, count, times)``: getters of
    those bound values from a row (``time`` is ``None`` for a ``NULL``
    literal); ``("opaque", …)``: anything else touching the tables.
    """
    if sql is None or _TOUCHES.search(sql) is None:
        return _IGNORED
    if sql.startswith(_SURFACE_UPDATE):
        return _IGNORED
    match = _INSERT.match(sql)
    if match is None:
        return _OPAQUE
    table = match.group(1)
    columns = [name.strip().strip('"') for name in match.group(2).split(",")]
    values = [value.strip() for value in match.group(3).split(",")]
    if len(columns) != len(values):
        return _OPAQUE
    bound: dict[str, int] = {}
    literal: dict[str, str] = {}
    for name, value in zip(columns, values):
        if value == "?":
            bound[name] = len(bound)
        else:
            literal[name] = value
    if table == "events":
        if "seq" not in bound or ("time" not in bound and literal.get("time", "NULL") != "NULL"):
            return _OPAQUE
        return ("events", itemgetter(bound["seq"]), itemgetter(bound["time"]) if "time" in bound else None, None)
    if not {"first_seq", "count", "times"} <= bound.keys():
        return _OPAQUE
    return ("runs", itemgetter(bound["first_seq"]), itemgetter(bound["count"]), itemgetter(bound["times"]))


def recorded_last_activity(calls: Sequence[tuple[str | None, Any, bool]]) -> Any:
    """What ``store_last_activity`` would store for a new session once ``calls`` are replayed, or :data:`UNKNOWN`."""
    event_seq: Any = None
    event_time: Any = None
    run_first: Any = None
    run: tuple[Any, Any] | None = None  # (count, packed times) of the run with the highest first seq
    readings = _readings
    for sql, args, many in calls:
        reading = readings.get(sql)
        if reading is None:
            reading = readings[sql] = _reading(sql)
        kind = reading[0]
        if kind == "ignore":
            continue
        if kind == "opaque":
            return UNKNOWN
        first = reading[1]
        if not many:
            top = args
        elif len(args) > 1:
            top = max(args, key=first)
        elif args:
            top = args[0]
        else:
            continue
        seq = first(top)
        if kind == "events":
            if event_seq is None or seq > event_seq:
                event_seq, event_time = seq, (reading[2](top) if reading[2] is not None else None)
        elif run_first is None or seq > run_first:
            run_first, run = seq, (reading[2](top), reading[3](top))
    if run is not None and (event_seq is None or run_first + run[0] - 1 > event_seq):
        return unpack_run_times(run[1])[-1]
    return event_time


_readings: Final[dict[str | None, tuple[str, Any, Any, Any]]] = {}
""":func:`_reading` of each statement text met (a recording has a few dozen distinct ones)."""
