"""``traceEvent``: how one event relates to the others (query-spec.md §5.2).

For a target event the trace reports

* ``replacedBy`` — the replacement that removed it from the surface, if any;
* ``replacementChain`` — that replacer, its replacer, ... (transitive);
* ``replacedEventSeqs`` — the nodes the target itself removed, in surface order;
* ``sourceEventSeqs`` — the target's own provenance, in recorded order;
* ``derivedEventSeqs`` — later events whose provenance cites the target,
  ascending (direct links only; provenance is never followed transitively).

:func:`trace_event` computes all of it from a log in memory.  The building
blocks are public so that an indexer can store per-event facts once
(``replaced_by`` and the source seqs of each event, the derived links of a log
from :func:`derived_links`) and assemble traces later with
:func:`assemble_trace` without the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from msgspec import UNSET

from readmodel.core.errors import SessionQueryError
from readmodel.core.jsvalues import is_integer, is_number, js_string
from readmodel.projection.lineage import clone_header
from readmodel.projection.surface import SurfaceFoldResult, fold_session_surface
from readmodel.core.vocabulary import Event, Header, SessionEventRecord, SessionEventTraceObservation, Surface


def event_not_found(session_id: str, seq: Any) -> SessionQueryError:
    """``SESSION_QUERY_EVENT_NOT_FOUND`` with the reference's message."""
    return SessionQueryError(
        "SESSION_QUERY_EVENT_NOT_FOUND",
        f'session "{session_id}" has no event at seq {js_string(seq)}',
    )


def target_index(events: Sequence[Event], seq: Any) -> int | None:
    """Array index of the event at ``seq``, or ``None`` when there is none.

    Mirrors ``events[seq]`` then ``e.seq !== seq``: ``seq`` must be an integral
    number (``2.0`` works, ``True`` and ``"2"`` do not) inside the array, and the
    event there must carry that seq.
    """
    if not (is_number(seq) and is_integer(seq) and 0 <= seq < len(events)):
        return None
    index = int(seq)
    event = events[index]
    stored = event.get("seq") if type(event) is dict else None
    return index if is_number(stored) and stored == seq else None


def require_target(session_id: str, events: Sequence[Event], seq: Any) -> int:
    """:func:`target_index` or ``SESSION_QUERY_EVENT_NOT_FOUND`` (checked before any fold)."""
    index = target_index(events, seq)
    if index is None:
        raise event_not_found(session_id, seq)
    return index


def event_record(session_id: str, event: Event, surface: Surface) -> SessionEventRecord:
    """The ``{sessionId, seq, type, time, surface}`` record of one event."""
    return SessionEventRecord(
        session_id=session_id, seq=int(event["seq"]), type=event["type"], time=event["time"], surface=surface
    )


def build_event_records(session_id: str, events: Sequence[Event]) -> list[SessionEventRecord]:
    """One record per event in seq order (``buildSessionEventRecords``).

    Folds the whole log first: an invalid surface raises
    ``SESSION_QUERY_INVALID_SURFACE`` even when the log is otherwise fine.
    """
    result = fold_session_surface(events)
    return [event_record(session_id, event, surface) for event, surface in zip(events, result.surfaces)]


def event_sources(event: Event) -> list[int]:
    """A fresh copy of ``sourceEventSeqs`` in recorded order; ``[]`` when absent.

    Assumes the fold validated the list (non-negative safe integers).
    """
    raw = event.get("sourceEventSeqs")
    return [int(source) for source in raw] if type(raw) is list else []


def derived_links(events: Iterable[Event]) -> dict[int, list[int]]:
    """Cited seq → the later events citing it, ascending; one pass over the log.

    Only seqs that are cited appear as keys.  ``derivedEventSeqs`` of any event
    is ``derived_links(events).get(seq, [])``.
    """
    links: dict[int, list[int]] = {}
    for event in events:
        seq = int(event["seq"])
        for source in event_sources(event):
            if source < seq:  # always true in a folded log; the reference checks it anyway
                links.setdefault(source, []).append(seq)
    return links


def derived_event_seqs(events: Iterable[Event], seq: int) -> list[int]:
    """Seqs of the events after ``seq`` whose sources cite it, ascending."""
    return [
        int(event["seq"])
        for event in events
        if event["seq"] > seq and seq in event_sources(event)
    ]


def replacement_chain(seq: int, replaced_by: Callable[[int], int | None] | Mapping[int, int]) -> list[int]:
    """``replacedBy[seq]``, then its replacer, ... until a node was never replaced.

    ``replaced_by`` is a mapping or a lookup function (e.g. one DB query per hop).
    Terminates because a replacer always has a larger seq than what it replaced.
    """
    lookup = replaced_by.get if isinstance(replaced_by, Mapping) else replaced_by
    chain: list[int] = []
    current = lookup(seq)
    while current is not None:
        chain.append(current)
        current = lookup(current)
    return chain


def assemble_trace(
    header: Header,
    target: SessionEventRecord,
    replaced_by: Callable[[int], int | None] | Mapping[int, int],
    replaced_event_seqs: Sequence[int],
    source_event_seqs: Sequence[int],
    derived_event_seqs: Sequence[int],
) -> SessionEventTraceObservation:
    """Build the observation from precomputed parts; every list is a fresh copy
    and ``session`` a clone of ``header``."""
    chain = replacement_chain(target.seq, replaced_by)
    return SessionEventTraceObservation(
        session=clone_header(header),
        target=SessionEventRecord(
            session_id=target.session_id, seq=target.seq, type=target.type, time=target.time,
            surface=target.surface,
        ),
        replaced_by=chain[0] if chain else UNSET,
        replacement_chain=chain,
        replaced_event_seqs=list(replaced_event_seqs),
        source_event_seqs=list(source_event_seqs),
        derived_event_seqs=list(derived_event_seqs),
    )


def trace_event(session_id: str, header: Header, events: Sequence[Event], seq: Any) -> SessionEventTraceObservation:
    """``traceEvent`` over one observed log (query-spec.md §5.2).

    Errors, in order: ``SESSION_QUERY_EVENT_NOT_FOUND`` (before any validation),
    then ``SESSION_QUERY_INVALID_SURFACE`` for a violation anywhere in the log.
    """
    index = require_target(session_id, events, seq)
    result: SurfaceFoldResult = fold_session_surface(events)
    target = events[index]
    return assemble_trace(
        header,
        event_record(session_id, target, result.surfaces[index]),
        result.replaced_by(),
        result.replaced_event_seqs().get(index, ()),
        event_sources(target),
        derived_event_seqs(events, index),
    )
