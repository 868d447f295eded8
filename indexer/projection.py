"""Projecting decoded events into index rows, in bounded batches.

:class:`SessionProjector` receives one session's events as the reader streams
them and writes, inside the caller's open transaction: event rows, raw event
JSON in compressed blocks, provenance links, and semantic documents with their
FTS5 entries.  It buffers at most ``flush_events`` events, so memory stays
bounded whatever the size of the log.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from readmodel.blocks import BLOCK_BYTES, BLOCK_EVENTS, compress_block, decompress_block, encode_event
from readmodel.extraction import extract_event_text
from readmodel.schema import SURFACE_CODES, docid
from readmodel.surface import SURFACE_EVENT_TYPES, tool_result_fingerprint

log = logging.getLogger("sessionq.indexer")

FLUSH_EVENTS: Final = 4096
_CURRENT: Final = SURFACE_CODES["current"]
_SHADOWED: Final = SURFACE_CODES["shadowed"]
_LOG_ONLY: Final = SURFACE_CODES["log-only"]
_SANITIZE: Final = str.maketrans({"\x00": "\ufffd", "\ufdd0": "\ufffd", "\ufdd1": "\ufffd"})

_encode: Final = msgspec.json.Encoder().encode
_pack: Final = msgspec.msgpack.Encoder().encode


_SURROGATES: Final = re.compile("[\ud800-\udfff]")


def sanitize_document(text: str) -> str:
    """Reserve the highlight markers: NUL, U+FDD0 and U+FDD1 become U+FFFD.

    Lone surrogates cannot be stored as UTF-8 text; they become U+FFFD too.
    """
    text = text.translate(_SANITIZE)
    if not text.isascii():
        text = _SURROGATES.sub("\ufffd", text)
    return text


class SessionProjector:
    """Writes one session's events; ``add`` is the reader's sink."""

    def __init__(self, cursor: sqlite3.Cursor, sid: int, first_seq: int, *, synthetic: bool = False, flush_events: int = FLUSH_EVENTS) -> None:
        self.cur = cursor
        self.sid = sid
        self.next_seq = first_seq
        self.synthetic = 1 if synthetic else 0
        self.flush_events = flush_events
        self.rows: list[list[Any]] = []  # pending event rows (mutable for same-batch shadowing)
        self.plain_rows: list[tuple[Any, ...]] = []  # pending rows of plain log-only events
        self.row_index: dict[int, int] = {}  # seq -> position in rows
        self.raw: list[bytes] = []
        self.docs: list[list[Any]] = []
        self.doc_index: dict[int, int] = {}
        self.links: list[tuple[int, int, int]] = []
        self.block_first: int | None = None
        self.block_lines: list[bytes] = []
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
        lines = decompress_block(row[2])
        self.cur.execute('DELETE FROM "event_blocks" WHERE "sid" = ? AND "first_seq" = ?', (self.sid, row[0]))
        self.block_first = row[0]
        self.block_lines = lines
        self.block_bytes = sum(len(line) for line in lines)

    # -- sinks ----------------------------------------------------------------
    def add(self, events: Iterable[dict[str, Any]]) -> None:
        plain = self.plain_rows
        sid, synthetic = self.sid, self.synthetic
        for event in events:
            etype = event["type"]
            if etype not in _PLAIN_TYPES or "sourceEventSeqs" in event:
                self._add(event)
                continue
            # The bulk of a log (chunks, steps, requests): log-only, no text, no
            # links, never shadowed, so no position to remember, and a short row
            # (binding six values instead of eleven halves the insert's cost).
            seq = event["seq"]
            plain.append((sid, seq, etype, event.get("time"), _LOG_ONLY, synthetic))
            self._block_append(seq, event)
        if len(self.rows) + len(plain) >= self.flush_events:
            self.flush()

    def _block_append(self, seq: int, event: dict[str, Any]) -> None:
        line = encode_event(event)
        if self.block_first is None:
            self.block_first = seq
        self.block_lines.append(line)
        self.block_bytes += len(line)
        if len(self.block_lines) >= BLOCK_EVENTS or self.block_bytes >= BLOCK_BYTES:
            self._close_block()

    def _add(self, event: dict[str, Any]) -> None:
        seq = event["seq"]
        etype = event["type"]
        surface = _CURRENT if etype in SURFACE_EVENT_TYPES else _LOG_ONLY
        sources = event.get("sourceEventSeqs")
        packed_sources = _pack(sources) if type(sources) is list else None
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
                digest = tool_result_fingerprint(event.get("data"))
        self.rows.append([self.sid, seq, etype, event.get("time"), surface, None, packed_sources, replaced, self.synthetic, key, digest])
        if type(sources) is list:
            sid = self.sid
            self.links.extend((sid, source, seq) for source in sources)
        if etype == "session/title":
            self.title_seq = seq
        self._block_append(seq, event)
        if etype in _NO_TEXT_TYPES:
            return
        try:
            text = extract_event_text(event)
        except TypeError as exc:
            # The reference cannot extract this malformed payload either; index no text.
            log.warning("no document for session %s seq %s: %s", self.sid, seq, exc)
            return
        if text:
            text = sanitize_document(text)
            self.doc_index[seq] = len(self.docs)
            self.docs.append([docid(self.sid, seq), self.sid, seq, etype, event.get("time"), surface, len(text), text])

    def replacement(self, seq: int, shadowed: Sequence[int]) -> None:
        """A replacement at ``seq`` removed ``shadowed`` from the surface."""
        # The reader folds an event before handing it to ``add``; keep the list
        # until the replacement's own row is built.
        self.replaced_lists[seq] = _pack(list(shadowed))
        self.key_sources[seq] = shadowed[0]
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
        row = self.cur.execute('SELECT "surface_key" FROM "events" WHERE "sid" = ? AND "seq" = ?', (self.sid, seq)).fetchone()
        if row is None or row[0] is None:
            raise ValueError(f"session {self.sid} has no surface key for seq {seq}")
        return int(row[0])

    # -- writing --------------------------------------------------------------
    def _close_block(self) -> None:
        if not self.block_lines:
            return
        self.cur.execute(
            'INSERT INTO "event_blocks" ("sid", "first_seq", "count", "synthetic", "data") VALUES (?, ?, ?, ?, ?)',
            (self.sid, self.block_first, len(self.block_lines), self.synthetic, compress_block(self.block_lines)),
        )
        self.block_first = None
        self.block_lines = []
        self.block_bytes = 0

    def flush(self) -> None:
        cur = self.cur
        if self.rows:
            cur.executemany(
                'INSERT INTO "events" ("sid", "seq", "type", "time", "surface", "replaced_by", "sources", "replaced", "synthetic", '
                '"surface_key", "digest") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                self.rows,
            )
            self.written += len(self.rows)
        if self.plain_rows:
            cur.executemany(
                'INSERT INTO "events" ("sid", "seq", "type", "time", "surface", "synthetic") VALUES (?, ?, ?, ?, ?, ?)',
                self.plain_rows,
            )
            self.written += len(self.plain_rows)
        if self.links:
            cur.executemany('INSERT OR IGNORE INTO "event_links" ("sid", "source_seq", "seq") VALUES (?, ?, ?)', self.links)
        if self.docs:
            cur.executemany(
                'INSERT INTO "documents" ("docid", "sid", "seq", "type", "time", "surface", "length", "text") VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
                self.docs,
            )
            cur.executemany('INSERT INTO "documents_fts" ("rowid", "text") VALUES (?, ?)', [(d[0], d[7]) for d in self.docs])
        if self.pending_shadow:
            cur.executemany(
                'UPDATE "events" SET "surface" = ?, "replaced_by" = ? WHERE "sid" = ? AND "seq" = ?',
                [(_SHADOWED, by, self.sid, node) for node, by in self.pending_shadow],
            )
            cur.executemany(
                'UPDATE "documents" SET "surface" = ? WHERE "docid" = ?',
                [(_SHADOWED, docid(self.sid, node)) for node, _ in self.pending_shadow],
            )
        self.rows, self.row_index, self.links, self.docs, self.doc_index, self.pending_shadow = [], {}, [], [], {}, []
        self.plain_rows = []

    def finish(self) -> None:
        """Write everything still buffered, including the open raw block."""
        self.flush()
        self._close_block()


# Types whose semantic text is always empty (query-spec §4.3): skip extraction.
_NO_TEXT_TYPES: Final = frozenset(
    {"assistant/chunk", "turn/start", "step/start", "step/end", "request/header", "request/context", "session/title", "session/end-seed"}
)


# Log-only types without text that need no more than an event row and raw JSON.
_PLAIN_TYPES: Final = _NO_TEXT_TYPES - SURFACE_EVENT_TYPES - {"session/title"}


def delete_session_rows(cur: sqlite3.Cursor, sid: int, from_seq: int = 0, synthetic_only: bool = False) -> None:
    """Remove a session's events from ``from_seq`` on (all of them by default)."""
    low, high = docid(sid, from_seq), docid(sid, 0xFFFFFFFF)
    cur.execute(
        'INSERT INTO "documents_fts" ("documents_fts", "rowid", "text") '
        'SELECT \'delete\', "docid", "text" FROM "documents" WHERE "docid" BETWEEN ? AND ?',
        (low, high),
    )
    cur.execute('DELETE FROM "documents" WHERE "docid" BETWEEN ? AND ?', (low, high))
    cur.execute('DELETE FROM "events" WHERE "sid" = ? AND "seq" >= ?', (sid, from_seq))
    cur.execute('DELETE FROM "event_links" WHERE "sid" = ? AND "seq" >= ?', (sid, from_seq))
    if synthetic_only:
        cur.execute('DELETE FROM "event_blocks" WHERE "sid" = ? AND "synthetic" = 1', (sid,))
    else:
        cur.execute('DELETE FROM "event_blocks" WHERE "sid" = ? AND "first_seq" >= ?', (sid, from_seq))


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
    cur.executemany('UPDATE "documents" SET "surface" = ? WHERE "docid" = ?', [(_CURRENT, docid(sid, s)) for s in seqs])
