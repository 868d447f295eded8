"""Projecting decoded events into index rows, in bounded batches.

:class:`SessionProjector` receives one session's events as the reader streams
them and writes, inside the caller's open transaction: event rows (runs of
plain events as one ``event_runs`` row each), raw event JSON in compressed
blocks, provenance links (as spans of consecutive sources), and semantic
documents with their FTS5 entries.  It buffers at most ``flush_events``
events, so memory stays bounded whatever the size of the log.

Cost model (why the code is shaped as it is): a cold build spends most of its
time per event, so the common event — a plain one (chunk, step, request
header) — costs a few dict lookups and two list appends here, and its raw
line is encoded with the rest of its batch in one call.  Rows are written with
``executemany`` per flush; the columns a row leaves empty are NULL literals
of its statement rather than bound ``None`` values, and blobs are bound as
``bytearray``: the ``sqlite3`` module binds ``None`` and ``bytes`` through its
adapter lookup, several times slower than integers, text or ``bytearray``.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import compress, count as numbers, repeat
from operator import is_, itemgetter
from typing import Any, Final

import msgspec

from readmodel.store.blocks import (
    BLOCK_BYTES,
    BLOCK_EVENTS,
    compress_payload,
    decompress_payload,
    encode_events,
    pack_run_times,
    pack_run_types,
    unpack_run_times,
    unpack_run_types,
)
from readmodel.projection.extraction import TEXT_EVENT_TYPES, extract_event_text
from readmodel.core.intruns import int_run
from readmodel.core.jsvalues import MAX_SAFE_INTEGER
from readmodel.store import gramindex, texts, textsearch
from readmodel.store.texts import KnownTexts, TextStore
from readmodel.store.rowkeys import MAX_LINK_SPAN, SURFACE_CODES, docid
from readmodel.projection.surface import SURFACE_EVENT_TYPES, tool_result_fingerprint

from .blockcuts import cut_blocks
from .packedrows import CHUNK_TYPE, PackedRow
from .storedtexts import stored_text

log = logging.getLogger("sessionq.indexer")

FLUSH_EVENTS: Final = 4096
_CURRENT: Final = SURFACE_CODES["current"]
_SHADOWED: Final = SURFACE_CODES["shadowed"]
_LOG_ONLY: Final = SURFACE_CODES["log-only"]
# SQLite's storage of documents (a server's cursor writes its documents table: indexer.pgwriter.translate).
_SET_SURFACE: Final = 'UPDATE "document_rows" SET "surface" = ? WHERE "docid" = ?'

# msgspec encoders keep no per-call state (thread-safe since msgspec 0.16): one is shared.
_pack_into: Final = msgspec.msgpack.Encoder().encode_into


def _blob(value: Any) -> bytearray:
    """``value`` in msgpack, as a ``bytearray``.

    The ``sqlite3`` module binds ``bytes`` (and ``None``) through its adapter
    lookup, which costs microseconds per value; a ``bytearray`` is bound
    directly, as the same BLOB.
    """
    out = bytearray()
    _pack_into(value, out)
    return out


def encode_items(items: Sequence[Any]) -> bytes:
    """:func:`~readmodel.store.blocks.encode_events` of the events ``items`` stand for, a
    :class:`~indexer.packedrows.PackedRow` for its members (their lines written from the row)."""
    pieces: list[bytes] = []
    start = 0
    # The packed rows' positions, found by C-level iterators (no Python step per event).
    for at in compress(numbers(), map(is_, map(type, items), repeat(PackedRow))):
        if at > start:
            pieces.append(encode_events(items[start:at]))
        pieces.append(items[at].lines())
        start = at + 1
    if start < len(items):
        pieces.append(encode_events(items[start:]))
    return b"".join(pieces)


def expanded_items(items: Sequence[Any]) -> list[dict[str, Any]]:
    """The events ``items`` stand for, each :class:`~indexer.packedrows.PackedRow` expanded."""
    events: list[dict[str, Any]] = []
    for item in items:
        if type(item) is PackedRow:
            events += item.members()
        else:
            events.append(item)
    return events


FTS_BUFFER_CHARS: Final = 8_000_000
"""Text the FTS5 buffer holds before it writes early (memory stays bounded by it)."""


FtsRow = tuple[int, str]
"""``(docid, text)``: a document's search row (a server backend's; SQLite indexes texts, not documents)."""
TextRow = tuple[int, str]
"""``(text id, text)``: a text row created in the open transaction, which ``texts_fts`` and
``document_grams`` index (:func:`index_texts`)."""

INSERT_BLOCK: Final = 'INSERT INTO "event_blocks" ("sid", "first_seq", "count", "synthetic", "data") VALUES (?, ?, ?, ?, ?)'
"""One raw block: its four key columns, then its compressed payload (:func:`readmodel.store.blocks.compress_payload`)."""

_texts: Final = TextStore()
_INSERT_ROWS: Final = 'INSERT INTO "document_rows" ("docid", "sid", "seq", "type", "time", "surface", "text_id") VALUES (?, ?, ?, ?, ?, ?, ?)'


def insert_documents(cur: Any, docs: Sequence[Sequence[Any]], fts: Any) -> None:
    """Store documents — ``documents`` rows with the text's hash appended (9 values) — and hand
    their search rows to ``fts`` (a :class:`DeferredFts`; ``None``: index them now).

    SQLite stores each distinct text once (:mod:`readmodel.store.texts`) and a new text's
    grams with it.  A cursor with an ``insert_documents`` method stores them itself: a
    recording (:mod:`indexer.preparation`, replayed here by the writer) or another backend
    (:mod:`indexer.pgwriter`).
    """
    own = getattr(cur, "insert_documents", None)
    if own is not None:
        own(docs, fts)
        return
    ids, created = _texts.store(cur, [(doc[7], doc[8]) for doc in docs], fts.known if fts is not None else None)
    cur.executemany(_INSERT_ROWS, [(*doc[:6], text_id) for doc, text_id in zip(docs, ids)])
    # Only the new texts are indexed (SQLite's word index is per text, texts_fts).
    if fts is not None:
        fts.add(cur, [], created)
    else:
        write_search_rows(cur, [], created)


def write_search_rows(cur: Any, rows: list[FtsRow], texts: list[TextRow]) -> None:
    """Index new texts (SQLite: their ``texts_fts`` rows and grams; the documents need no row
    of their own, a document's matches being its text's).

    A cursor of another backend that keeps search rows of its own (its
    ``write_search_rows``, :mod:`indexer.pgwriter`) takes the documents' rows instead.
    """
    server = getattr(cur, "write_search_rows", None)
    if server is not None:
        server(rows)
        return
    index_texts(cur, texts)


def index_texts(cur: Any, rows: list[TextRow]) -> None:
    """Add texts just created to both SQLite search indexes (words, grams), in id order."""
    textsearch.insert(cur, rows)
    gramindex.insert(cur, rows)


def unindex_texts(cur: Any, rows: list[TextRow]) -> None:
    """Remove indexed texts, as stored, from both SQLite search indexes (before their rows go)."""
    textsearch.delete(cur, rows)
    gramindex.delete(cur, rows)


def _release(cur: Any, held: list[int], fts: Any) -> None:
    """Texts whose documents were just deleted: noted in ``fts`` (dropped before COMMIT if
    no document names them then), or without a buffer dropped now."""
    if fts is not None:
        fts.orphans.update(held)
        return
    gone = texts.orphans(cur, held)
    unindex_texts(cur, gone)
    texts.delete(cur, [text_id for text_id, _ in gone])


def _size(rows: Iterable[tuple[int, str]]) -> int:
    # Text only: a text's gram words are bounded by a constant times its text, and
    # counting them too would write (and merge) FTS5 segments several times as often.
    return sum(len(row[1]) for row in rows)


class DeferredFts:
    """FTS5 rows (texts_fts and document_grams; a server's document rows) held back until the end of the caller's transaction.

    FTS5 flushes its pending terms to a new segment at every ``SAVEPOINT`` and
    ``RELEASE`` once it has been written in a transaction, and the reconciler
    wraps each session in a savepoint: inserting as we go would write one
    small segment per session (and merge them again).  Buffering the rows and
    inserting them with :meth:`write` just before ``COMMIT`` builds one segment
    per transaction.

    It also holds the texts that lost documents in the transaction
    (``orphans``, SQLite): :meth:`write` drops those no document names any
    more, with their grams (taken out of the buffer when they were never
    written).  Checked then, not when the documents went: a ``ROLLBACK TO``
    in between may have restored them.

    Memory stays bounded by :data:`FTS_BUFFER_CHARS` of text (the grams' words are computed
    when written): :meth:`relieve` (between sessions, outside any savepoint) writes an oversized
    buffer, and :meth:`add` the current session's own rows when it alone outgrows it (:meth:`spill`:
    at a bound the caller chooses) — inside its savepoint, so a ``ROLLBACK TO`` undoes them with the rest.

    It keeps the transaction's :class:`~readmodel.store.texts.KnownTexts`
    (``known``: the text ids :func:`insert_documents` found or created), which
    the same calls keep true: :meth:`rollback` and :meth:`write` (which deletes
    orphaned texts, and ends every transaction) forget them.

    Contract: rows are :data:`FtsRow` of documents and :data:`TextRow` of texts
    already inserted in the same transaction; :meth:`mark` is taken right after a
    session's ``SAVEPOINT`` and :meth:`rollback` must accompany every
    ``ROLLBACK TO`` of it, so the buffer never indexes a document the rollback
    removed; :meth:`write` is called before every ``COMMIT``, and a buffer is
    dropped with its transaction when that ends otherwise.
    """

    __slots__ = ("rows", "texts", "chars", "base", "text_base", "orphans", "known")

    def __init__(self) -> None:
        self.rows: list[FtsRow] = []
        self.texts: list[TextRow] = []
        self.chars = 0
        self.base = 0  # rows before this index belong to sessions whose savepoints are released
        self.text_base = 0
        self.orphans: set[int] = set()
        self.known = KnownTexts()

    def mark(self) -> tuple[int, int]:
        """A position to :meth:`rollback` to (taken with a session's savepoint)."""
        self.base, self.text_base = len(self.rows), len(self.texts)
        return self.base, self.text_base

    def rollback(self, mark: tuple[int, int]) -> None:
        """Forget the rows added since ``mark`` (rows written early were undone by the rollback)."""
        del self.rows[mark[0] :], self.texts[mark[1] :]
        self.chars = _size(self.rows) + _size(self.texts)
        self.base = min(self.base, mark[0])
        self.text_base = min(self.text_base, mark[1])
        self.known.forget()  # text rows created since the mark are gone

    def add(self, cur: Any, rows: list[FtsRow], texts: Sequence[TextRow] = ()) -> None:
        """Buffer rows of the current session, writing that session's rows early when too large."""
        self.rows.extend(rows)
        self.texts.extend(texts)
        self.chars += _size(rows) + _size(texts)
        if self.chars > FTS_BUFFER_CHARS:
            self._write_own(cur)

    def spill(self, cur: Any, limit: int) -> None:
        """Write the current session's rows now if they hold over ``limit`` characters (a streamed
        log's, indexed while its worker reads: no savepoint between the pieces, the same segments)."""
        if _size(self.rows[self.base :]) + _size(self.texts[self.text_base :]) > limit:
            self._write_own(cur)

    def _write_own(self, cur: Any) -> None:
        """Index the current session's buffered rows now (inside its savepoint) and drop them from the buffer."""
        own, own_texts = self.rows[self.base :], self.texts[self.text_base :]
        if not own and not own_texts:
            return
        del self.rows[self.base :], self.texts[self.text_base :]
        self.chars -= _size(own) + _size(own_texts)
        own.sort()
        write_search_rows(cur, own, own_texts)

    def relieve(self, cur: Any) -> None:
        """Between sessions (no savepoint open): write the buffer now if it outgrew its bound."""
        if self.chars > FTS_BUFFER_CHARS:
            self.write(cur)

    def write(self, cur: Any) -> None:
        """Drop the orphaned texts, then index the buffered rows (in rowid order, which FTS5
        appends fastest) and empty the buffer."""
        if self.orphans:
            gone = texts.orphans(cur, self.orphans)
            if gone:
                ids = {text_id for text_id, _ in gone}
                pending = {text_id for text_id, _ in self.texts}
                self.texts = [row for row in self.texts if row[0] not in ids]
                unindex_texts(cur, [row for row in gone if row[0] not in pending])
                texts.delete(cur, sorted(ids))
            self.orphans = set()
        if self.rows or self.texts:
            self.rows.sort()
            self.texts.sort()
            write_search_rows(cur, self.rows, self.texts)
            self.rows, self.texts = [], []
        self.chars = 0
        self.base = 0
        self.text_base = 0
        self.known.forget()  # texts may have been deleted, and the transaction ends


class SessionProjector:
    """Writes one session's events; ``add`` is the reader's sink.

    With ``redact_documents`` (the default) every secret
    :func:`readmodel.projection.secrets.redact` detects in a document is
    replaced by its marker before the document is stored or indexed.

    With ``fts`` the session's FTS5 rows go to that buffer (the caller writes
    it before committing); without it they are inserted at each flush.  A
    synthetic projector (a settled tail's inspect view, replaced whenever the
    writer continues) keeps one ``events`` row per event: its rows are few and
    short-lived, and per-event rows keep their deletion trivial.

    With ``surface_keys`` the projector keeps the surface keys of the rows it
    flushes in that map (shared with the session's tail projector) and looks
    earlier nodes up there before asking the database.
    """

    def __init__(
        self,
        cursor: sqlite3.Cursor,
        sid: int,
        first_seq: int,
        *,
        synthetic: bool = False,
        flush_events: int = FLUSH_EVENTS,
        fts: Any = None,
        surface_keys: dict[int, int] | None = None,
        redact_documents: bool = True,
    ) -> None:
        self.cur = cursor
        # Detected secrets become markers in the documents (and so in FTS5 and snippets).
        self.redact_documents = redact_documents
        # Surface keys of rows already flushed, kept when the cursor cannot be
        # read back (a preparation process); None: look them up in the database.
        self.surface_keys = surface_keys
        self.fts = fts
        self.sid = sid
        self.next_seq = first_seq
        self.synthetic = 1 if synthetic else 0
        self.use_runs = not synthetic
        self.flush_events = flush_events
        self.rows: list[list[Any]] = []  # pending event rows (mutable for same-batch shadowing)
        self.plain_rows: list[tuple[Any, ...]] = []  # pending per-event rows of plain events outside runs
        self.runs: list[list[Any]] = []  # pending runs: [first_seq, types, times]; the last may be open
        self.open_run: list[Any] | None = None  # the run the next plain event of its type extends
        self.pending = 0  # events buffered since the last flush
        self.row_index: dict[int, int] = {}  # seq -> position in rows
        self.docs: list[list[Any]] = []
        self.doc_index: dict[int, int] = {}
        self.links: list[tuple[int, int, int, int]] = []  # (sid, first source, citing seq, span)
        # The open raw block: LF-terminated pieces of lines, how many lines, and
        # their bytes without the LFs (what BLOCK_BYTES limits).
        self.block_first: int | None = None
        self.block_pieces: list[bytes] = []
        self.block_count = 0
        self.block_bytes = 0
        self.pending_shadow: list[tuple[int, int]] = []  # (seq, replaced_by) already in the database
        self.title_seq: int | None = None
        self.written = 0
        self.replaced_lists: dict[int, bytes] = {}
        self.key_sources: dict[int, int] = {}  # replacement seq -> first node it removed

    # -- block continuation -------------------------------------------------
    def continue_last_block(self) -> None:
        """Reopen the session's last (non-synthetic) raw block if it has room, so
        small tail appends do not leave many tiny, poorly compressed blocks."""
        row = self.cur.execute(
            'SELECT "first_seq", "count", "data" FROM "event_blocks" WHERE "sid" = ? AND "synthetic" = 0 '
            'ORDER BY "first_seq" DESC LIMIT 1',
            (self.sid,),
        ).fetchone()
        if row is None or row[1] >= BLOCK_EVENTS or row[0] + row[1] != self.next_seq:
            return
        payload = decompress_payload(row[2])
        self.cur.execute('DELETE FROM "event_blocks" WHERE "sid" = ? AND "first_seq" = ?', (self.sid, row[0]))
        self.block_first = row[0]
        self.block_pieces = [payload + b"\n"]
        self.block_count = row[1]
        self.block_bytes = len(payload) - (row[1] - 1)

    # -- sinks ----------------------------------------------------------------
    def add(self, events: Iterable[Any], lines: bytes | None = None) -> None:
        """Project a run of consecutive events (the reader's sink).

        Contract: ``events`` continue the session's seqs without a gap, and a
        replacement's :meth:`replacement` call comes after the ``add`` of every
        node it shadows and before the ``add`` of the replacement itself.  An
        item may be a :class:`~indexer.packedrows.PackedRow` standing for its
        members (a pipeline with ``packed_rows``): they join the open run by
        their times, and their raw lines are written from the row.
        ``lines``, when given, is ``encode_items(events)`` computed elsewhere: by
        the reader, from the log's own bytes (:mod:`indexer.rawlines`), or by a
        split stream's reading process (:mod:`indexer.splitstream`, which relies
        on this loop reading nothing of an event that is not a surface or text
        type and has no ``sourceEventSeqs`` but its type, seq and time).
        """
        if type(events) is not list:
            events = list(events)
        if not events:
            return
        if not self.use_runs and PackedRow in map(type, events):
            events = expanded_items(events)  # a row per event: the members are needed one by one
        count, packed = self.take_events(events)
        first = events[0]
        if packed:
            first_seq = first.first_seq if type(first) is PackedRow else first["seq"]
            self.extend_block(first_seq, encode_items(events) if lines is None else lines, count)
        else:
            self.extend_block(first["seq"], encode_events(events) if lines is None else lines, count)
        self.added(count)

    def added(self, count: int) -> None:
        """``count`` more events were taken (and their lines given to the open block): flush when due."""
        self.pending += count
        if self.pending >= self.flush_events:
            self.flush()

    def take_events(self, events: list[Any]) -> tuple[int, bool]:
        """:meth:`add`'s rows of ``events`` (a non-empty list), without their raw lines
        or the flush: how many events they stand for, and whether a packed row was among them."""
        # Locals: this loop runs once per event of the log.
        runs = self.runs
        run = self.open_run
        run_types, run_times = (run[1], run[2]) if run is not None else ([], [])
        use_runs = self.use_runs
        rich_types, extras, min_time, max_time = SURFACE_EVENT_TYPES, _LOG_ONLY_EXTRAS, _MIN_TIME, _MAX_TIME
        count = len(events)
        packed = False
        for event in events:
            if type(event) is PackedRow:
                # Its members: log-only chunks with safe integer times, all in the run.
                times = event.times
                if run is None:
                    run_types, run_times = [CHUNK_TYPE] * len(times), list(times)
                    run = [event.first_seq, run_types, run_times]
                    runs.append(run)
                else:
                    run_types += [CHUNK_TYPE] * len(times)
                    run_times += times
                count += len(times) - 1
                packed = True
                continue
            etype = event["type"]
            if etype in rich_types or "sourceEventSeqs" in event:
                run = None
                self._add(event)
                continue
            # The bulk of a log (chunks, steps, requests, tool calls, ...):
            # log-only and never shadowed, so consecutive ones share a row.
            time = event.get("time")
            if type(time) is int and min_time <= time <= max_time and use_runs:
                if run is None:
                    run_types, run_times = [etype], [time]
                    run = [event["seq"], run_types, run_times]
                    runs.append(run)
                else:
                    run_types.append(etype)
                    run_times.append(time)
            else:
                # A time a run cannot hold (or a synthetic tail): a row of its own.
                run = None
                self.plain_rows.append((self.sid, event["seq"], etype, time, _LOG_ONLY, self.synthetic))
            if etype in extras:
                self._log_only_extras(event, etype)
        self.open_run = run
        return count, packed

    def extend_block(self, first_seq: int, piece: bytes, count: int) -> None:
        """Append ``count`` consecutive events' LF-terminated lines to the open
        block, closing every block that reaches :data:`BLOCK_EVENTS` lines or
        :data:`BLOCK_BYTES` (exactly where appending line by line would)."""
        if self.block_first is None:
            self.block_first = first_seq
        size = len(piece) - count
        if self.block_count + count < BLOCK_EVENTS and self.block_bytes + size < BLOCK_BYTES:
            # No prefix of the piece reaches a limit either: keep it whole.
            self.block_pieces.append(piece)
            self.block_count += count
            self.block_bytes += size
            return
        self.block_pieces.append(piece)
        self._split_blocks()

    def _split_blocks(self) -> None:
        """Close full blocks off the front of the open one (the long-session case).

        A block is one slice of the joined pieces (:func:`~indexer.blockcuts.cut_blocks`
        finds where each ends) instead of its lines split and joined again.
        """
        data = b"".join(self.block_pieces)
        first = self.block_first
        assert first is not None
        cuts, start, count, size = cut_blocks(data)
        for cut_start, cut_end, cut_count in cuts:
            self._insert_block(first, data[cut_start:cut_end], cut_count)
            first += cut_count
        self.block_pieces = [data[start:]] if count else []
        self.block_count = count
        self.block_bytes = size
        self.block_first = first if count else None

    def _log_only_extras(self, event: dict[str, Any], etype: str) -> None:
        """The title pointer or the document of a plain event (no row of its own)."""
        if etype == "session/title":
            self.title_seq = event["seq"]
        else:
            self._document(event, event["seq"], etype, _LOG_ONLY)

    def _add(self, event: dict[str, Any]) -> None:
        seq = event["seq"]
        etype = event["type"]
        surface = _CURRENT if etype in SURFACE_EVENT_TYPES else _LOG_ONLY
        sources = event.get("sourceEventSeqs")
        packed_sources = _blob(sources) if type(sources) is list else None
        self.row_index[seq] = len(self.rows)
        replaced = self.replaced_lists.pop(seq, None) if self.replaced_lists else None
        key = None
        digest = None
        if surface == _CURRENT:
            # An appended node orders by its own seq; a replacement takes the
            # place of the range it removed, i.e. the first removed node's key.
            source = self.key_sources.pop(seq, None)
            key = seq if source is None else self._surface_key(source)
            if etype == "tool/result":
                digest = bytearray(tool_result_fingerprint(event.get("data")))
        self.rows.append([self.sid, seq, etype, event.get("time"), surface, None, packed_sources, replaced, self.synthetic, key, digest])
        if type(sources) is list and sources:
            sid = self.sid
            self.links.extend((sid, first, seq, span) for first, span in link_spans(sources))
        if etype == "session/title":
            self.title_seq = seq
        if etype in TEXT_EVENT_TYPES:
            self._document(event, seq, etype, surface)

    def _document(self, event: dict[str, Any], seq: int, etype: str, surface: int) -> None:
        """Buffer the semantic document of an event of a type that may have text."""
        try:
            text = extract_event_text(event)
        except TypeError as exc:
            # The reference cannot extract this malformed payload either; index no text.
            log.warning("no document for session %s seq %s: %s", self.sid, seq, exc)
            return
        if text:
            text, digest = stored_text(text, self.redact_documents)
            self.doc_index[seq] = len(self.docs)
            self.docs.append([docid(self.sid, seq), self.sid, seq, etype, event.get("time"), surface, len(text), text, digest])

    def replacement(self, seq: int, shadowed: Sequence[int]) -> None:
        """A replacement at ``seq`` removed ``shadowed`` from the surface."""
        # The reader folds an event before handing it to ``add``; keep the list
        # until the replacement's own row is built.
        self.replaced_lists[seq] = _blob(list(shadowed))
        self.key_sources[seq] = shadowed[0]
        if self.surface_keys is not None:
            # A shadowed node is never looked up again (only the first, once, for the
            # replacement's own key): the map stays the size of the current surface.
            for node in shadowed[1:]:
                self.surface_keys.pop(node, None)
        for node in shadowed:
            position = self.row_index.get(node)
            if position is None:
                self.pending_shadow.append((node, seq))
                continue
            row = self.rows[position]
            row[4], row[5] = _SHADOWED, seq
            doc = self.doc_index.get(node)
            if doc is not None:
                self.docs[doc][5] = _SHADOWED

    def _surface_key(self, seq: int) -> int:
        """The surface key of an earlier node (buffered here, or already written)."""
        position = self.row_index.get(seq)
        if position is not None:
            return self.rows[position][9]
        if self.surface_keys is not None and seq in self.surface_keys:
            return self.surface_keys.pop(seq)  # the first node a replacement removed: needed this once
        row = self.cur.execute('SELECT "surface_key" FROM "events" WHERE "sid" = ? AND "seq" = ?', (self.sid, seq)).fetchone()
        if row is None or row[0] is None:
            raise ValueError(f"session {self.sid} has no surface key for seq {seq}")
        return int(row[0])

    # -- writing --------------------------------------------------------------
    def _insert_block(self, first_seq: int, payload: bytes, count: int) -> None:
        """Store ``count`` events' LF-joined lines as one compressed block.

        A cursor with an ``insert_block`` method takes the uncompressed payload
        and compresses it itself before the row is written (a streamed log's
        recording compresses on a thread of its own: :mod:`indexer.preparation`).
        """
        own = getattr(self.cur, "insert_block", None)
        if own is not None:
            own((self.sid, first_seq, count, self.synthetic), payload)
            return
        self.cur.execute(INSERT_BLOCK, (self.sid, first_seq, count, self.synthetic, bytearray(compress_payload(payload))))

    def _close_block(self) -> None:
        if not self.block_count:
            return
        assert self.block_first is not None
        pieces = self.block_pieces
        payload = pieces[0][:-1] if len(pieces) == 1 else b"".join(pieces)[:-1]
        self._insert_block(self.block_first, payload, self.block_count)
        self.block_first = None
        self.block_pieces = []
        self.block_count = 0
        self.block_bytes = 0

    def flush(self) -> None:
        """Write every buffered row (the open raw block stays open)."""
        cur = self.cur
        if self.rows:
            insert_event_rows(cur, self.rows)
            self.written += len(self.rows)
            if self.surface_keys is not None:
                self.surface_keys.update((row[1], row[9]) for row in self.rows if row[4] == _CURRENT)
        if self.plain_rows:
            cur.executemany(
                'INSERT INTO "events" ("sid", "seq", "type", "time", "surface", "synthetic") VALUES (?, ?, ?, ?, ?, ?)',
                self.plain_rows,
            )
            self.written += len(self.plain_rows)
        if self.runs:
            sid = self.sid
            cur.executemany(
                'INSERT INTO "event_runs" ("sid", "first_seq", "count", "types", "times", "synthetic") VALUES (?, ?, ?, ?, ?, 0)',
                [(sid, first, len(times), pack_run_types(types), pack_run_times(times)) for first, types, times in self.runs],
            )
            self.written += sum(len(run[2]) for run in self.runs)
        if self.links:
            cur.executemany('INSERT OR IGNORE INTO "event_links" ("sid", "source_seq", "seq", "span") VALUES (?, ?, ?, ?)', self.links)
        if self.docs:
            insert_documents(cur, self.docs, self.fts)
        if self.pending_shadow:
            cur.executemany(
                'UPDATE "events" SET "surface" = ?, "replaced_by" = ? WHERE "sid" = ? AND "seq" = ?',
                [(_SHADOWED, by, self.sid, node) for node, by in self.pending_shadow],
            )
            cur.executemany(
                _SET_SURFACE,
                [(_SHADOWED, docid(self.sid, node)) for node, _ in self.pending_shadow],
            )
        self.rows, self.row_index, self.links, self.docs, self.doc_index, self.pending_shadow = [], {}, [], [], {}, []
        self.plain_rows, self.runs, self.open_run, self.pending = [], [], None, 0

    def finish(self) -> None:
        """Write everything still buffered, including the open raw block."""
        self.flush()
        self._close_block()


# Plain (log-only, provenance-free) events that still need more than a row:
# a document (tool calls, turn ends, todos) or the session's title pointer.
_LOG_ONLY_EXTRAS: Final = (TEXT_EVENT_TYPES - SURFACE_EVENT_TYPES) | {"session/title"}

# Times a run stores (see pack_run_times); any other time gets an ``events`` row.
_MIN_TIME: Final = -MAX_SAFE_INTEGER
_MAX_TIME: Final = MAX_SAFE_INTEGER

# ``events`` columns in row order; a full row (``_add``) has all of them.
_EVENT_COLUMNS: Final = ("sid", "seq", "type", "time", "surface", "replaced_by", "sources", "replaced", "synthetic", "surface_key", "digest")
# Columns that are often NULL: a row is written by the statement for its pattern of NULLs.
_NULLABLE: Final = (3, 5, 6, 7, 9, 10)
_null_pattern: Final = itemgetter(*_NULLABLE)


@lru_cache(maxsize=64)
def _event_statement(nulls: tuple[bool, ...]) -> tuple[str, Any]:
    """The INSERT for rows with NULL exactly in the nullable columns flagged in
    ``nulls``, and a getter of the values it binds from a full row."""
    null_columns = {column for column, null in zip(_NULLABLE, nulls) if null}
    bound = [index for index in range(len(_EVENT_COLUMNS)) if index not in null_columns]
    names = ", ".join(f'"{column}"' for column in _EVENT_COLUMNS)
    values = ", ".join("NULL" if index in null_columns else "?" for index in range(len(_EVENT_COLUMNS)))
    return f'INSERT INTO "events" ({names}) VALUES ({values})', itemgetter(*bound)


def insert_event_rows(cur: sqlite3.Cursor, rows: Sequence[Sequence[Any]]) -> None:
    """Insert full ``events`` rows (values in :data:`_EVENT_COLUMNS` order).

    Equivalent to one ``executemany`` binding every column; rows are grouped
    by which nullable columns are ``None`` so those become NULL literals.
    """
    groups: dict[tuple[Any, ...], list[Sequence[Any]]] = {}
    for row in rows:
        nulls = tuple(value is None for value in _null_pattern(row))
        group = groups.get(nulls)
        if group is None:
            groups[nulls] = [row]
        else:
            group.append(row)
    for nulls, group in groups.items():
        sql, bound = _event_statement(nulls)
        cur.executemany(sql, map(bound, group))


_INT_ONLY: Final = {int}


def link_spans(sources: Sequence[Any]) -> list[tuple[Any, int]]:
    """The ``(first source, span)`` rows of one event's ``sourceEventSeqs``.

    Integer sources become maximal runs of consecutive distinct seqs, each at
    most :data:`MAX_LINK_SPAN` long, ascending; they cover exactly the set of
    cited seqs.  Anything else (never seen after validation) keeps one row
    per distinct value, as the one-row-per-link layout stored it.
    """
    run = int_run(sources) if int_run is not None else None
    if run is not None and run[1] <= MAX_LINK_SPAN:
        return [run]  # the common case, told in one C call: one contiguous run of chunks
    if set(map(type, sources)) != _INT_ONLY:
        return [(source, 1) for source in dict.fromkeys(sources)]
    seqs = sorted(set(sources))
    first, last = seqs[0], seqs[-1]
    if last - first + 1 == len(seqs) and len(seqs) <= MAX_LINK_SPAN:
        return [(first, len(seqs))]  # the common case: one contiguous run of chunks
    spans: list[tuple[Any, int]] = []
    start = previous = first
    for seq in seqs[1:]:
        if seq != previous + 1 or seq - start >= MAX_LINK_SPAN:
            spans.append((start, previous - start + 1))
            start = seq
        previous = seq
    spans.append((start, previous - start + 1))
    return spans


def delete_session_rows(cur: sqlite3.Cursor, sid: int, from_seq: int = 0, synthetic_only: bool = False, fts: Any = None) -> None:
    """Remove a session's events from ``from_seq`` on (all of them by default).

    ``fts`` is the transaction's :class:`DeferredFts` when it has one: texts the deleted
    documents held are dropped when it is written (see :func:`_release`).
    """
    low, high = docid(sid, from_seq), docid(sid, 0xFFFFFFFF)
    server = getattr(cur, "delete_search_rows", None)  # another backend's search rows (see write_search_rows)
    if server is not None:
        server(low, high)
        cur.execute('DELETE FROM "document_hashes" WHERE "docid" BETWEEN ? AND ?', (low, high))
        cur.execute('DELETE FROM "documents" WHERE "docid" BETWEEN ? AND ?', (low, high))
    else:
        # The documents' texts keep their search rows until no document holds them (_release).
        held = texts.held_by(cur, (low, high))
        cur.execute('DELETE FROM "document_rows" WHERE "docid" BETWEEN ? AND ?', (low, high))
        if held:
            _release(cur, held, fts)
    cur.execute('DELETE FROM "events" WHERE "sid" = ? AND "seq" >= ?', (sid, from_seq))
    if from_seq > 0:
        _truncate_run(cur, sid, from_seq)
    cur.execute('DELETE FROM "event_runs" WHERE "sid" = ? AND "first_seq" >= ?', (sid, from_seq))
    cur.execute('DELETE FROM "event_links" WHERE "sid" = ? AND "seq" >= ?', (sid, from_seq))
    if synthetic_only:
        cur.execute('DELETE FROM "event_blocks" WHERE "sid" = ? AND "synthetic" = 1', (sid,))
    else:
        cur.execute('DELETE FROM "event_blocks" WHERE "sid" = ? AND "first_seq" >= ?', (sid, from_seq))


def _truncate_run(cur: sqlite3.Cursor, sid: int, from_seq: int) -> None:
    """Cut the run that straddles ``from_seq``, if any, back to its members before it.

    Runs never cross a projector's first seq, and deletions start at one, so
    this is a safety net for callers that delete from elsewhere.
    """
    row = cur.execute(
        'SELECT "first_seq", "count", "types", "times" FROM "event_runs" WHERE "sid" = ? AND "first_seq" < ? '
        'ORDER BY "first_seq" DESC LIMIT 1',
        (sid, from_seq),
    ).fetchone()
    if row is None or row[0] + row[1] <= from_seq:
        return
    keep = from_seq - row[0]
    types = unpack_run_types(row[2])[:keep]
    times = unpack_run_times(row[3])[:keep]
    cur.execute(
        'UPDATE "event_runs" SET "count" = ?, "types" = ?, "times" = ? WHERE "sid" = ? AND "first_seq" = ?',
        (keep, pack_run_types(types), pack_run_times(times), sid, row[0]),
    )


def load_surface(cur: sqlite3.Cursor, sid: int, before_seq: int) -> tuple[list[int], dict[int, bytes]]:
    """The stored surface of events before ``before_seq``: current nodes in order, tool digests."""
    nodes: list[int] = []
    digests: dict[int, bytes] = {}
    rows = cur.execute(
        'SELECT "seq", "digest" FROM "events" WHERE "sid" = ? AND "surface" = 1 AND "seq" < ? ORDER BY "surface_key"',
        (sid, before_seq),
    )
    for seq, digest in rows:
        nodes.append(seq)
        if digest is not None:
            digests[seq] = digest
    return nodes, digests


def unshadow_from(cur: sqlite3.Cursor, sid: int, from_seq: int) -> None:
    """Undo shadowing done by replacements at or after ``from_seq`` (being deleted)."""
    seqs = [row[0] for row in cur.execute('SELECT "seq" FROM "events" WHERE "sid" = ? AND "replaced_by" >= ?', (sid, from_seq))]
    if not seqs:
        return
    cur.executemany('UPDATE "events" SET "surface" = ?, "replaced_by" = NULL WHERE "sid" = ? AND "seq" = ?', [(_CURRENT, sid, s) for s in seqs])
    cur.executemany(_SET_SURFACE, [(_CURRENT, docid(sid, s)) for s in seqs])
