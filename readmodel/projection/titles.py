"""The session title fold (format-spec §8, query-spec §2.10).

The title of a session is derived from its log alone: the **last**
``session/title`` event in log order wins (not the latest ``time``), and no
such event means no title.  Only that last event is read, so a malformed
earlier title event never matters.

Shape policy: the reference builds the snapshot with plain property access
(``event.data.title``), an array spread of ``messageSeqs`` and a switch over
``source.kind``.  Where that throws in JS we raise :class:`TypeError` (a
missing ``messageSeqs`` is the tested case, T-EX-10); the title batch reports
it as that session's rejection reason, unwrapped.  The reference's exhaustive
switch throws a plain ``Error`` for an unknown ``source.kind``; Python has no
plain-``Error`` equivalent that callers could tell apart, so that case is a
``TypeError`` too.  Where JS silently copies odd values (a string
``messageSeqs`` spreads into its characters, ``model: null`` spreads into
``{}``), we copy them the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from msgspec import UNSET

from readmodel.core.jsvalues import js_spread
from readmodel.core.vocabulary import Event, Header, SessionTitleObservation, SessionTitleSnapshot

TITLE_EVENT_TYPE: Final = "session/title"


def latest_title_event(events: Sequence[Event], previous: Event | None = None) -> Event | None:
    """The last ``session/title`` event of ``events``, else ``previous``.

    Scans backwards and stops at the first hit, so the cost is proportional to
    the distance from the end of the log.  ``previous`` lets an indexer carry
    the last title event of earlier batches: the answer for ``old + new`` is
    ``latest_title_event(new, latest_title_event(old))``.
    """
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.get("type") == TITLE_EVENT_TYPE:
            return event
    return previous


def _copy_source(source: Any) -> dict[str, Any]:
    """``copySessionTitleSource``: a detached copy holding only the known fields."""
    if source is None:
        raise TypeError("session/title source is null; cannot read its kind")
    kind = source.get("kind") if type(source) is dict else None
    if kind == "fallback":
        return {"kind": "fallback"}
    if kind == "user":
        return {"kind": "user"}
    if kind == "provider":
        copy: dict[str, Any] = {"kind": "provider"}
        # An absent provider is JS ``undefined`` and vanishes from JSON.
        if "provider" in source:
            copy["provider"] = source["provider"]
        if "model" in source:
            copy["model"] = js_spread(source["model"])
        return copy
    raise TypeError(f"session/title source has an unhandled kind: {kind!r}")


def title_snapshot(event: Event) -> SessionTitleSnapshot:
    """Snapshot one ``session/title`` event: ``{title, messageSeqs, source, eventSeq, updatedAt}``.

    ``messageSeqs`` is a fresh list and ``source`` a fresh copy, so mutating the
    snapshot never touches the log.  An absent ``title`` stays absent (JS
    ``undefined``, omitted on encoding).  Raises :class:`TypeError` when the
    reference would throw: ``data`` not an object, ``messageSeqs`` missing or
    not iterable, ``source`` missing or of an unknown kind.
    """
    data = event.get("data")
    if type(data) is not dict:
        # null throws on ``.title``; primitives and arrays have no messageSeqs
        # to spread, which throws next.
        raise TypeError("session/title event data has no messageSeqs to copy")
    seqs = data.get("messageSeqs")
    if type(seqs) is list:
        message_seqs = list(seqs)
    elif type(seqs) is str:
        message_seqs = list(seqs)  # a JS string spreads into its code points
    else:
        raise TypeError("session/title messageSeqs is not iterable")
    return SessionTitleSnapshot(
        title=data.get("title", UNSET),
        message_seqs=message_seqs,
        source=_copy_source(data.get("source")),
        event_seq=event.get("seq"),
        updated_at=event.get("time", UNSET),
    )


def fold_title(events: Sequence[Event]) -> SessionTitleSnapshot | None:
    """``foldSessionTitle``: the snapshot of the last ``session/title`` event, or ``None``.

    Raises :class:`TypeError` if that last event is malformed (see
    :func:`title_snapshot`).
    """
    event = latest_title_event(events)
    return None if event is None else title_snapshot(event)


def advance_title(
    previous: SessionTitleSnapshot | None,
    new_events: Sequence[Event],
) -> SessionTitleSnapshot | None:
    """Incremental fold: the title after appending ``new_events`` to a log whose
    title was ``previous``.

    A title event among ``new_events`` replaces ``previous`` outright (last
    wins); otherwise ``previous`` stands.  Equal to ``fold_title(old + new)``
    whenever ``previous == fold_title(old)``.  If the new last title event is
    malformed this raises :class:`TypeError`; since a later valid title event
    supersedes it, an indexer should record that failure as the session's title
    state (or keep the raw event via :func:`latest_title_event`) rather than
    keep the stale ``previous``.
    """
    event = latest_title_event(new_events)
    return previous if event is None else title_snapshot(event)


def _clone_json(value: Any) -> Any:
    """Deep copy of a JSON value (headers are small; nesting is shallow)."""
    if type(value) is dict:
        return {key: _clone_json(item) for key, item in value.items()}
    if type(value) is list:
        return [_clone_json(item) for item in value]
    return value


def title_observation(header: Header, events: Sequence[Event]) -> SessionTitleObservation:
    """The title-read projection: ``{session: clone(header), title?}``.

    The ``title`` key is absent (not ``null``) when the log has no title event
    (T-EX-11).  Raises :class:`TypeError` for a malformed last title event.
    """
    snapshot = fold_title(events)
    session = _clone_json(header)
    if snapshot is None:
        return SessionTitleObservation(session=session)
    return SessionTitleObservation(session=session, title=snapshot)
