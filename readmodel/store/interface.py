"""The read interface the engine uses: what one snapshot of an index answers.

:class:`IndexSource` is an opened index; :meth:`IndexSource.read` gives an
:class:`IndexReader` over one consistent snapshot (one committed generation,
even while the indexer writes).  The reader plays the two roles of the
reference's persistence backend: *listing* (headers, session lookup) and
*inspection* (events, documents, raw event JSON).  The engine depends on
these protocols only; :mod:`readmodel.store.sqlite` implements them for SQLite,
and a server backend implements them in a module of its own.

Row shapes the engine reads back are plain tuples where the hot paths need
them (documented per method) and the two structs below otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final, Protocol

import msgspec
from sqlalchemy import Engine

from readmodel.core.errors import SessionQueryError
from readmodel.core.vocabulary import Event, Header

_decode_json: Final = msgspec.json.Decoder().decode
_decode_seqs: Final = msgspec.msgpack.Decoder(list[int]).decode


@dataclass(frozen=True, slots=True)
class StoredSession:
    """One ``sessions`` row: what listing knows about a persisted session."""

    sid: int
    id: str
    header_json: bytes
    status: str
    error_code: str | None
    error_message: str | None
    event_count: int
    title_seq: int | None
    generation: int

    def header(self) -> Header:
        """A fresh decode of the stored header projection (a private copy)."""
        return _decode_json(self.header_json)

    def require_readable(self) -> None:
        """Raise the session's stored query error unless its log was readable.

        A corrupt, unsupported or unreadable log keeps its row (it is listed)
        with the exact ``SessionQueryError`` every read of it must raise.
        """
        if self.status != "ok":
            code = self.error_code or "SESSION_QUERY_PERSISTENCE_FAILED"
            message = self.error_message or f'failed to inspect session "{self.id}": {self.status}'
            raise SessionQueryError(code, message)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class EventRow:
    """One ``events`` row (everything but the raw JSON)."""

    seq: int
    type: str
    time: Any
    surface: int
    replaced_by: int | None
    sources: bytes | None
    replaced: bytes | None

    def source_seqs(self) -> list[int]:
        """``sourceEventSeqs`` in recorded order; ``[]`` when absent."""
        return _decode_seqs(self.sources) if self.sources else []

    def replaced_seqs(self) -> list[int]:
        """The nodes this replacement removed, in surface order; ``[]`` otherwise."""
        return _decode_seqs(self.replaced) if self.replaced else []


@dataclass(frozen=True, slots=True)
class SummaryWhere:
    """The session-summary filters (a sessionq extension).

    ``cwd_given`` distinguishes "any workspace" from ``cwd=None`` ("sessions
    without a workspace"); the times are inclusive ``createdAt`` bounds in ms.
    """

    cwd_given: bool = False
    cwd: str | None = None
    created_from: float | None = None
    created_to: float | None = None


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """What one page of session summaries reads of a persisted session."""

    sid: int
    id: str
    cwd: str | None
    created_at: float | None
    parent_session: str | None
    event_count: int
    title_seq: int | None
    status: str
    error_code: str | None
    last_activity: Any
    generation: int


class IndexReader(Protocol):
    """Queries inside one read snapshot of the index."""

    def generation(self) -> tuple[Any, ...]:
        """``(identity, global_generation)`` of the snapshot."""

    def list_headers(self) -> list[Header]:
        """Every persisted header in listing order (``createdAt`` desc, id by ``localeCompare``); private copies."""

    def list_keyed_headers(self) -> list[tuple[Header, float, bytes]]:
        """Headers in listing order with their sort keys ``(createdAt, id_key)``."""

    def summary_page(self, where: SummaryWhere, limit: int, offset: int) -> list[SummaryRow]:
        """``limit`` summaries from ``offset`` of the filtered listing (listing order)."""

    def summary_keys(self, where: SummaryWhere) -> list[tuple[float | None, bytes, str]]:
        """``(createdAt, id_key, id)`` of every filtered session, in listing order (no headers decoded)."""

    def summary_rows(self, session_ids: Sequence[str]) -> dict[str, SummaryRow]:
        """The summaries of the listed sessions among ``session_ids``."""

    def workspace_activity(self, excluded: Sequence[str] = ()) -> list[tuple[str | None, int, Any]]:
        """``(cwd, session count, newest numeric last activity)`` per workspace, without ``excluded`` ids."""
        ...

    def session_ids_of_sources(self, sources: Sequence[str]) -> set[str]:
        """The ids of the stored sessions indexed by any of ``sources`` (a sessionq extension)."""

    def ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` listed session ids starting with ``prefix``, in code-point order."""

    def cursor_key(self) -> tuple[str, bytes]:
        """``(identity, cursor secret)`` of the index, for signing listing cursors."""

    def surface(self, sid: int) -> list[int]:
        """The current surface nodes of a session, in model-history order."""

    def lookup(self, session_id: str) -> StoredSession | None:
        """The listed session with this id, or ``None``."""

    def lookup_many(self, session_ids: Sequence[str]) -> dict[str, StoredSession]:
        """The listed sessions among ``session_ids``."""

    def event_records(self, sid: int) -> list[tuple[int, str, Any, int]]:
        """``(seq, type, time, surface code)`` of every event, ascending seq."""

    def event_range_records(self, sid: int, first: int, last: int) -> list[tuple[int, int, int | None, list[int]]]:
        """``(seq, surface code, replaced by, replaced nodes)`` of events ``first..last``."""

    def event_row(self, sid: int, seq: int) -> EventRow | None:
        """The row of event ``seq``, or ``None``."""

    def replaced_by(self, sid: int, seq: int) -> int | None:
        """The seq of the replacement that shadowed ``seq``, or ``None``."""

    def derived_seqs(self, sid: int, seq: int) -> list[int]:
        """Later events whose ``sourceEventSeqs`` cite ``seq``, ascending."""

    def documents(self, sid: int) -> list[tuple[int, str, Any, int, str]]:
        """``(seq, type, time, surface code, text)`` of every document, ascending seq."""

    def raw_range(self, sid: int, first: int, last: int) -> list[Event]:
        """The raw events ``first..last`` (inclusive)."""

    def raw_all(self, sid: int) -> list[Event]:
        """Every raw event of a session, in seq order."""

    def raw_at(self, sid: int, seqs: Iterable[int]) -> dict[int, Event]:
        """The raw events at ``seqs`` (any order)."""


class IndexSource(Protocol):
    """An index opened for reading (thread-safe; any number per process)."""

    db: str
    """How the index was named when opened (a path or a URL), for messages and status."""

    engine: Engine
    """The SQLAlchemy engine (status reports and migrations go through it)."""

    def read(self) -> AbstractContextManager[IndexReader]:
        """One read snapshot; nested calls in one thread join the outer snapshot."""

    def close(self) -> None:
        """Release every connection."""
