"""Typed vocabulary of the read model: the results every read returns.

Each struct encodes (``msgspec.json.encode`` / :func:`to_builtins`) to exactly
the reference's JSON shape: camelCase keys in the reference's order, optional
keys omitted (``UNSET``), never ``null`` unless the reference type allows it.

Headers and events stay plain JSON values (``dict``): the log format lets them
carry arbitrary, even wrongly typed, values that a read must return verbatim.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

Header = dict[str, Any]
"""A session header projection: ``version, id, createdAt, cwd?, parentSession?,
seedLength?, origin?, delegationDepth?, agentPreset?`` in that key order."""

Event = dict[str, Any]
"""One stored session event: ``type, seq, time, data`` plus optional
``sourceEventSeqs``, ``surfaceOp``, ``ignorable`` (any key order)."""

Surface = Literal["current", "shadowed", "log-only"]
SURFACES: frozenset[str] = frozenset(("current", "shadowed", "log-only"))
Availability = Literal["live", "persisted"]


class Struct(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """Base for result structs: camelCase keys, unset optionals omitted."""


class SessionRecord(Struct, gc=False):  # JSON scalars and dicts only: no cycles, so no GC tracking
    header: Header
    live: bool
    persisted: bool


class SessionEventRecord(Struct, gc=False):  # JSON scalars and dicts only: no cycles, so no GC tracking
    session_id: str
    seq: int
    type: str
    time: Any
    surface: Surface


class SessionEventSearchDocument(Struct, gc=False):  # JSON scalars and dicts only: no cycles, so no GC tracking
    session_id: str
    seq: int
    type: str
    time: Any
    surface: Surface
    text: str


class SessionLogSnapshot(Struct):
    session: Header
    events: list[Event]


class SessionSurfaceSnapshot(Struct):
    session: Header
    captured_through_seq: int | None
    events: list[Event]


class SessionEventWindow(Struct):
    session: Header
    target: Event
    events: list[Event]
    start_seq: int
    end_seq: int


class SessionEventRangeRecord(Struct, gc=False):
    """Surface facts of one event in a :class:`SessionEventRange` (a sessionq extension)."""

    seq: int
    surface: Surface
    replaced_by: int | None = None  # the replacement that shadowed this event
    replaces: list[int] | None = None  # the nodes this replacement removed


class SessionEventRange(Struct):
    """``readEventRange``: a run of a session's events for paged views of long logs."""

    session: Header
    event_count: int
    start_seq: int
    events: list[Event]
    records: list[SessionEventRangeRecord]


class SessionLineageNode(Struct):
    session: SessionRecord
    descendants: list["SessionLineageNode"]


class SessionLineageTrace(Struct):
    target: SessionRecord
    ancestors: list[SessionRecord]
    descendants: list[SessionLineageNode]
    complete: bool
    root: SessionRecord | UnsetType = UNSET
    unresolved_parent_id: str | UnsetType = UNSET


class SessionEventTraceObservation(Struct, kw_only=True):
    session: Header
    target: SessionEventRecord
    replaced_by: int | UnsetType = UNSET
    replacement_chain: list[int]
    replaced_event_seqs: list[int]
    source_event_seqs: list[int]
    derived_event_seqs: list[int]


class SessionTitleSnapshot(Struct):
    title: Any
    message_seqs: list[Any]
    source: Any
    event_seq: int
    updated_at: Any


class SessionTitleObservation(Struct):
    session: Header
    title: SessionTitleSnapshot | UnsetType = UNSET


def to_builtins(value: Any) -> Any:
    """Convert a struct (or a container of them) to plain JSON-ready values."""
    return msgspec.to_builtins(value)
