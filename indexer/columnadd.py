"""A split stream's batch projected from its columns (the projecting stage's ``add``).

The reading stage of a split stream (:mod:`indexer.splitstream`) sends a batch
as columns: every event's type and time, the first seq, and in full only the
events the projector reads more of than those three values.  :func:`add_columns`
makes a :class:`~indexer.projection.SessionProjector` record exactly what its
``add(events, lines)`` records for the events those columns stand for, but
builds no dict for an event it reads nothing more of: a stretch of them whose
times are all exact safe integers, and none of which is a session title, joins
the open run in two list extensions — what ``add`` does one event at a time.
Any other stretch, and every full event, goes through
:meth:`~indexer.projection.SessionProjector.take_events` as ``add`` would take
it.  Building those dicts and taking them one by one was a fifth of the
projecting stage's CPU.
"""

from __future__ import annotations

from typing import Any, Final

from readmodel.core.jsvalues import MAX_SAFE_INTEGER

from .projection import SessionProjector

_TITLE: Final = "session/title"
"""The one type outside a split stream's full types whose event ``add`` does more with (the title pointer)."""
_INT_ONLY: Final = {int}


def add_columns(projector: SessionProjector, first: int, types: list[Any], times: list[Any], full_at: list[int], full: list[dict[str, Any]], lines: bytes) -> None:
    """``projector.add(events, lines)`` for the batch of ``len(types)`` events from seq ``first``.

    Contract (a split stream's ``_ADD`` op with columns): the events at
    ``full_at`` (ascending) are ``full``; every other event is
    ``{"type": types[i], "seq": first + i, "time": times[i]}`` with a str type
    that is not a surface or text type; ``lines`` are the events' raw lines;
    the projector keeps runs (it is not a synthetic tail's).
    """
    count = len(types)
    if not count:
        return
    position = 0
    take = projector.take_events
    for at, event in zip([*full_at, count], [*full, None]):
        if at > position:
            _take_plain(projector, first + position, types[position:at], times[position:at])
        if event is not None:
            take([event])
        position = at + 1
    projector.extend_block(first, lines, count)
    projector.added(count)


def _take_plain(projector: SessionProjector, seq: int, types: list[Any], times: list[Any]) -> None:
    """Take a stretch of events the projector reads only the type, seq and time of."""
    if _TITLE not in types and set(map(type, times)) == _INT_ONLY and -MAX_SAFE_INTEGER <= min(times) and max(times) <= MAX_SAFE_INTEGER:
        run = projector.open_run
        if run is None:
            projector.open_run = run = [seq, types, times]
            projector.runs.append(run)
        else:
            run[1] += types
            run[2] += times
        return
    projector.take_events([{"type": etype, "seq": at, "time": time} for etype, at, time in zip(types, range(seq, seq + len(types)), times)])
