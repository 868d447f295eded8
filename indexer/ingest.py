"""Ingesting one log: read it (from a resume point or from the start) and project its rows.

:func:`ingest_log` is the unit of work of the reconciler.  It writes through
whatever cursor it is given — the writer's own, inside the session's savepoint,
or a :class:`~indexer.preparation.RecordingCursor` in a preparation process,
whose recorded writes the writer replays — and returns what the session row
must say afterwards.  Generations and clock times are the writer's business:
the outcome leaves them out, so a prepared session can land in whichever
transaction the writer is in when it arrives.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, Final, Protocol

import msgspec

from readmodel.core.jsvalues import is_number
from readmodel.store.rowkeys import id_sort_key

from .layout import Compression
from .projection import SessionProjector, delete_session_rows, load_surface, unshadow_from
from .reader import DecodedLog, LogReader, ResumePoint

_pack: Final = msgspec.msgpack.Encoder().encode
_encode_json: Final = msgspec.json.Encoder().encode


def session_columns(header: dict[str, Any]) -> tuple[bytearray, Any, bytearray, str | None, str | None]:
    """The session row's header columns: header JSON, createdAt, id sort key, cwd and parent.

    Blobs are ``bytearray``: the ``sqlite3`` module binds them without its adapter lookup.
    """
    created = header.get("createdAt")
    cwd = header.get("cwd")
    parent = header.get("parentSession")
    return (
        bytearray(_encode_json(header)),
        created if is_number(created) else None,
        bytearray(id_sort_key(header["id"])),
        cwd if type(cwd) is str else None,
        parent if type(parent) is str else None,
    )


class FtsSink(Protocol):
    """Where a projector's search rows go (:class:`~indexer.projection.DeferredFts`)."""

    orphans: set[int]

    def add(self, cur: Any, rows: list[tuple[int, str]], texts: Any = ()) -> None: ...


class LogOutcome(msgspec.Struct, array_like=True):
    """The session row's new state after an ingest (everything but generation and time).

    ``values`` are, in order: revision, size, resume point (msgpack, or
    ``None``), event count, stored count, first synthetic seq, tail state and
    title seq — the leading parameters of the reconciler's session update.
    """

    values: tuple[Any, ...]
    written: int  # event rows written (what the batch budget counts)
    held: bool  # a torn or open tail was held back because the file is still changing


def ingest_log(
    cur: sqlite3.Cursor | Any,
    sid: int,
    path: str,
    compression: Compression,
    root: str,
    header: dict[str, Any],
    resume: ResumePoint | None,
    settled: bool,
    *,
    stored_synthetic_from: int | None = None,
    stored_title_seq: int | None = None,
    fts: FtsSink | None = None,
    surface_keys: dict[int, int] | None = None,
    redact_documents: bool = True,
) -> LogOutcome:
    """Decode ``path`` (from ``resume`` when given) and write its rows for session ``sid``.

    ``stored_synthetic_from`` and ``stored_title_seq`` are the session row's
    current values (``None`` for a session read from the start).  With
    ``surface_keys`` the projectors answer surface-key lookups of rows they
    already flushed from that map instead of the database: required when
    ``cur`` cannot read, i.e. for a session read from the start elsewhere.
    ``redact_documents`` replaces detected secrets in documents by markers.

    Raises what the reader raises for a bad log (the caller rolls back the
    session's savepoint) and :class:`~indexer.reader.ResumeMismatch` when the
    file no longer continues the resume point.
    """
    first_seq = resume.next_seq if resume is not None else 0
    if resume is not None and stored_synthetic_from is not None:
        # Synthetic tail rows of an earlier settled view: the writer moved on.
        unshadow_from(cur, sid, stored_synthetic_from)
        delete_session_rows(cur, sid, stored_synthetic_from, synthetic_only=True, fts=fts)
    projector = SessionProjector(cur, sid, first_seq, fts=fts, surface_keys=surface_keys, redact_documents=redact_documents)
    if resume is not None:
        projector.continue_last_block()
    reader = log_reader(path, compression, root, header, projector.add, projector.replacement, lambda: load_surface(cur, sid, first_seq))
    decoded = reader.read(resume)
    return conclude_ingest(
        cur, sid, projector, decoded, first_seq, settled, stored_title_seq, fts=fts, surface_keys=surface_keys, redact_documents=redact_documents
    )  # fmt: skip


def log_reader(
    path: str,
    compression: Compression,
    root: str,
    header: dict[str, Any],
    sink: Callable[[list[Any]], None],
    on_replacement: Callable[[int, tuple[int, ...]], None],
    surface_base: Callable[[], Any] | None,
    packed_rows: bool = True,
    remember_digests: bool = True,
) -> LogReader:
    """The reader :func:`ingest_log` reads a log with, its events going to ``sink``
    and its replacements to ``on_replacement`` (a projector's, or a split stream's
    reading stage that forwards both to one: :mod:`indexer.splitstream`).

    ``packed_rows``: a packed chunk row may reach ``sink`` whole, as a
    :class:`~indexer.packedrows.PackedRow` (the projector takes it), and a batch
    with its raw lines (``sink(items, lines)``: :mod:`indexer.rawlines`); off for
    a sink that needs every event as a dict.  ``remember_digests``: the fold keeps
    its deferred tool-result digests for a projector in this process (off where
    the projector is in another: a split stream's reading stage)."""
    return LogReader(
        path,
        compression,
        session_id=header["id"],
        root=root,
        sink=sink,
        on_replacement=on_replacement,
        surface_base=surface_base,
        # Nothing here looks inside a request header's system prompt or tool schemas:
        # they stay raw JSON, validated and stored byte for byte as they were.
        lazy_payloads=True,
        # The projector takes a packed row whole (its members' lines written from the row),
        # and a batch's raw lines taken from the log where they are its events' encoding.
        packed_rows=packed_rows,
        raw_lines=packed_rows,
        # The projector stores each tool result's digest, which the fold has just deferred.
        remember_digests=remember_digests,
    )


def conclude_ingest(
    cur: sqlite3.Cursor | Any,
    sid: int,
    projector: SessionProjector,
    decoded: DecodedLog,
    first_seq: int,
    settled: bool,
    stored_title_seq: int | None,
    *,
    fts: FtsSink | None = None,
    surface_keys: dict[int, int] | None = None,
    redact_documents: bool = True,
) -> LogOutcome:
    """What :func:`ingest_log` does once the reader has returned ``decoded``: the
    projector's last rows, a settled tail's synthetic rows, and the outcome.

    ``projector`` has received every stored event of the read (its ``add`` and
    ``replacement`` calls in the reader's order); ``decoded.events`` is not used.
    """
    projector.finish()
    has_tail = bool(decoded.recovered or decoded.closers)
    # No resume point after a tolerated mid-log defect (raw mode): the next
    # change of the file reloads it from the start.
    stored_count = first_seq + projector.written
    synthetic_from = None
    title_seq = projector.title_seq if projector.title_seq is not None else stored_title_seq
    held = False
    if has_tail and settled:
        tail = SessionProjector(cur, sid, stored_count, synthetic=True, fts=fts, surface_keys=surface_keys, redact_documents=redact_documents)
        for seq, shadowed in decoded.tail_replacements:
            tail.replacement(seq, shadowed)
        tail.add([*decoded.recovered, *decoded.closers])
        tail.finish()
        synthetic_from = stored_count
        tail_state = "settled"
        event_count = stored_count + len(decoded.recovered) + len(decoded.closers)
        if tail.title_seq is not None:
            title_seq = tail.title_seq
        written = projector.written + tail.written
    else:
        tail_state = "held" if has_tail else "clean"
        held = has_tail
        event_count = stored_count
        written = projector.written
    values = (
        decoded.revision,
        decoded.size,
        bytearray(_pack(decoded.resume)) if decoded.resume is not None else None,
        event_count,
        stored_count,
        synthetic_from,
        tail_state,
        title_seq,
    )
    return LogOutcome(values, written, held)

