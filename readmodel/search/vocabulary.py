"""Search results: hits and pages, in the reference's JSON shapes."""

from __future__ import annotations

from typing import Any


from readmodel.core.vocabulary import Header, Struct, Surface

from msgspec import UNSET, UnsetType


class SessionEventSearchHit(Struct):
    session_id: str
    seq: int
    type: str
    time: Any
    surface: Surface
    snippet: str


class SessionSearchHit(Struct):
    header: Header
    live: bool
    persisted: bool
    best_match: SessionEventSearchHit


class SessionSearchPage(Struct, kw_only=True):
    items: list[SessionSearchHit]
    next_cursor: str | UnsetType = UNSET


class SessionEventSearchPage(Struct, kw_only=True):
    session: Header
    items: list[SessionEventSearchHit]
    next_cursor: str | UnsetType = UNSET
