"""Dumping an index's comparable content, to check incremental == cold rebuild.

:func:`index_state` reads a database read-only and returns plain Python data
that two indexes of the same root must agree on, whatever order and batching
built them.  Left out, because they legitimately depend on history:

* ``sessions.sid`` — a surrogate key assigned in creation order; every row is
  keyed by the session id instead, and document rowids are translated back to
  ``(session id, seq)`` (``docid = sid << 32 | seq``);
* ``sessions.generation`` and ``indexed_at``, ``layout_problems.observed_at``
  and the whole ``index_meta`` row (identity, counters, clock times);
* raw-block boundaries — an incremental build continues or splits blocks
  differently, so blocks are compared as the decoded per-event lines they hold
  (with their synthetic flag);
* run and span boundaries — likewise, ``event_runs`` rows are compared as the
  per-event ``events`` rows they stand for, and ``event_links`` spans as the
  single links they cover.

FTS5 is compared through queries: for each probe term, the matching documents
as ``(session id, seq)`` with their bm25 rank (rounded), which also proves the
FTS statistics agree.

Distinct texts (``texts``, schema 0018) have ids in creation order: each
document's text hash and grams are compared by document instead, and the
texts are checked (one row per distinct text, each named by a document, hash
and length its text's).  The substring gram index (``document_grams``,
contentless, one row per text) is compared whole: each text's words as FTS5
lists them (``fts5vocab`` instances, deletions applied), checked against the
words its stored text gives (:func:`readmodel.projection.grams.document_tokens`)
— a stale or missing word is a ``consistency`` problem.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from readmodel.projection.grams import document_tokens
from readmodel.projection.texthash import text_hash
from readmodel.store.schema import TEXT_EXPRESSION
from readmodel.store.blocks import decompress_block, register_dictionary, unpack_run_times, unpack_run_types
from tests import indexdb

SESSION_SKIP = frozenset({"sid", "generation", "indexed_at"})
DEFAULT_PROBES = ("reconcile", "deploy", "parser", "tokenizer", "alpha", "omega", "session", "error")


def connect_ro(db_path: str) -> sqlite3.Connection:
    conn = indexdb.connect(f"file:{db_path}?mode=ro", uri=True)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]


def index_state(db_path: str, probes: Iterable[str] = DEFAULT_PROBES) -> dict[str, Any]:
    """The comparable content of the index at ``db_path`` (see the module doc)."""
    conn = connect_ro(db_path)
    try:
        conn.execute("BEGIN")  # one snapshot for everything
        sid_to_id = {sid: sid_id for sid, sid_id in conn.execute('SELECT "sid", "id" FROM "sessions"')}

        def key(sid: int) -> str:
            return sid_to_id.get(sid, f"<orphan sid {sid}>")

        columns = _columns(conn, "sessions")
        sessions: dict[str, dict[str, Any]] = {}
        for row in conn.execute(f'SELECT {", ".join(chr(34) + c + chr(34) for c in columns)} FROM "sessions"'):
            record = dict(zip(columns, row))
            sessions[record["id"]] = {name: value for name, value in record.items() if name not in SESSION_SKIP}

        block_problems: list[str] = []
        event_columns = [c for c in _columns(conn, "events") if c != "sid"]
        events = {
            (key(row[0]), row[1]): tuple(row[1:])
            for row in conn.execute(f'SELECT "sid", {", ".join(chr(34) + c + chr(34) for c in event_columns)} FROM "events" ORDER BY "sid", "seq"')
        }
        # A run member is the row a plain event would have: log-only, everything else NULL.
        for sid, first, count, types, times, synthetic in conn.execute(
            'SELECT "sid", "first_seq", "count", "types", "times", "synthetic" FROM "event_runs"'
        ):
            decoded_types, decoded_times = unpack_run_types(types), unpack_run_times(times)
            if not len(decoded_types) == len(decoded_times) == count:
                block_problems.append(f"{key(sid)} run at {first}: count {count} but {len(decoded_types)} types, {len(decoded_times)} times")
            for offset, (etype, time) in enumerate(zip(decoded_types, decoded_times)):
                member = {"seq": first + offset, "type": etype, "time": time, "surface": 0, "synthetic": synthetic}
                if (key(sid), first + offset) in events:
                    block_problems.append(f"{key(sid)} seq {first + offset} has an event row and a run")
                events[(key(sid), first + offset)] = tuple(member.get(c) for c in event_columns)
        events = dict(sorted(events.items()))

        # Blocks are compared decoded: with the index's zstd dictionary (schema 0011) or without one.
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'block_dictionaries'").fetchone():
            for dict_id, dict_data in conn.execute('SELECT "id", "data" FROM "block_dictionaries"'):
                register_dictionary(dict_id, dict_data)
        raw: dict[str, list[tuple[int, int, bytes]]] = {}  # session -> [(seq, synthetic, line)]
        for sid, first, count, synthetic, data in conn.execute(
            'SELECT "sid", "first_seq", "count", "synthetic", "data" FROM "event_blocks" ORDER BY "sid", "first_seq"'
        ):
            decoded = decompress_block(data)
            if len(decoded) != count:
                block_problems.append(f"{key(sid)} block at {first}: count {count} but {len(decoded)} lines")
            out = raw.setdefault(key(sid), [])
            if out and out[-1][0] >= first:
                block_problems.append(f"{key(sid)} block at {first} overlaps the previous block")
            out.extend((first + i, synthetic, line) for i, line in enumerate(decoded))

        for sid_key in {k for k, _ in events} | set(raw):
            have = [seq for seq, _, _ in raw.get(sid_key, [])]
            want = sorted(seq for k, seq in events if k == sid_key)
            if have != want:
                block_problems.append(f"{sid_key}: raw lines for seqs {have[:5]}… do not match event rows {want[:5]}…")

        links = sorted(
            (key(sid), source + offset, seq)
            for sid, source, seq, span in conn.execute('SELECT "sid", "source_seq", "seq", "span" FROM "event_links"')
            for offset in range(span)
        )

        doc_columns = [c for c in _columns(conn, "documents") if c not in ("docid", "sid")]
        documents: dict[tuple[str, int], tuple[Any, ...]] = {}
        for row in conn.execute(f'SELECT "docid", "sid", {", ".join(chr(34) + c + chr(34) for c in doc_columns)} FROM "documents"'):
            docid, sid = row[0], row[1]
            record = dict(zip(doc_columns, row[2:]))
            if docid != (sid << 32 | record["seq"]):
                block_problems.append(f"document {docid} of {key(sid)} seq {record['seq']} has a foreign rowid")
            documents[(key(sid), record["seq"])] = tuple(row[2:])

        problems = sorted(
            (row[0], row[1], row[2]) for row in conn.execute('SELECT "path", "kind", "message" FROM "layout_problems"')
        )

        fts: dict[str, list[tuple[float, str, int]]] = {}
        for term in probes:
            # texts_fts is per text (schema 0021): a document's hits are its text's.
            hits = conn.execute(
                'SELECT d."docid", bm25("texts_fts") FROM "texts_fts" JOIN "document_rows" d ON d."text_id" = "texts_fts"."rowid" '
                'WHERE "texts_fts" MATCH ?',
                (term,),
            ).fetchall()
            fts[term] = sorted((round(rank, 9), key(rowid >> 32), rowid & 0xFFFFFFFF) for rowid, rank in hits)
        fts_rows = conn.execute('SELECT count(*) FROM "texts_fts_docsize"').fetchone()[0]
        grams = _gram_words(conn, key, block_problems)
        hashes = _text_hashes(conn, key, block_problems)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return {
        "sessions": sessions,
        "events": events,
        "raw_events": raw,
        "event_links": links,
        "documents": documents,
        "layout_problems": problems,
        "fts": fts,
        "fts_rows": fts_rows,
        "grams": grams,
        "document_hashes": hashes,
        "consistency": block_problems,
    }


def _gram_words(conn: sqlite3.Connection, key: Any, problems: list[str]) -> dict[tuple[str, int], tuple[str, ...]]:
    """Each document's words in ``document_grams`` (its text's row, schema 0018); a word its
    stored text does not give, or grams of a text no longer stored, is a problem."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.\"gram_instances\" USING fts5vocab(main, \"document_grams\", 'instance')")
    words: dict[int, set[str]] = {}
    for term, rowid in conn.execute('SELECT "term", "doc" FROM temp."gram_instances"'):
        words.setdefault(rowid, set()).add(term)
    stored = dict(conn.execute(f'SELECT t."id", {TEXT_EXPRESSION} FROM "texts" t'))
    for text_id, text in stored.items():
        expected = set(document_tokens(text).split())
        found = words.get(text_id, set())
        if found != expected:
            problems.append(f"text {text_id}: grams {len(found - expected)} stale, {len(expected - found)} missing")
    problems += [f"grams of a deleted text {rowid}" for rowid in sorted(set(words) - set(stored))]
    by_document = conn.execute('SELECT "docid", "text_id" FROM "document_rows" ORDER BY "docid"').fetchall()
    return {(key(docid >> 32), docid & 0xFFFFFFFF): tuple(sorted(words.get(text_id, ()))) for docid, text_id in by_document if words.get(text_id)}


def _text_hashes(conn: sqlite3.Connection, key: Any, problems: list[str]) -> dict[tuple[str, int], int]:
    """Each document's text hash (its ``texts`` row's, schema 0018), id-independent.

    A text row whose hash or length is not its text's, two rows of one text, a text no
    document names or a document naming no text is a problem.
    """
    rows = conn.execute(f'SELECT t."id", t."hash", t."length", {TEXT_EXPRESSION} FROM "texts" t').fetchall()
    seen: dict[str, int] = {}
    for text_id, value, length, text in rows:
        if value != text_hash(text) or length != len(text):
            problems.append(f"text {text_id}: hash {value} or length {length} is not its text's")
        if text in seen:
            problems.append(f"texts {seen[text]} and {text_id} hold the same text")
        seen[text] = text_id
    hashes = {row[0]: row[1] for row in rows}
    named = dict(conn.execute('SELECT "docid", "text_id" FROM "document_rows"'))
    problems += [f"document {docid} names no stored text" for docid, text_id in sorted(named.items()) if text_id not in hashes]
    problems += [f"text {text_id} held by no document" for text_id in sorted(set(hashes) - set(named.values()))]
    return {(key(docid >> 32), docid & 0xFFFFFFFF): hashes.get(text_id) for docid, text_id in sorted(named.items())}


def diff_states(left: dict[str, Any], right: dict[str, Any], limit: int = 20) -> list[str]:
    """Readable differences between two :func:`index_state` results (empty when equal)."""
    out: list[str] = []
    for section in sorted(set(left) | set(right)):
        a, b = left.get(section), right.get(section)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b), key=repr):
                if a.get(k) != b.get(k):
                    out.append(f"{section}[{k!r}]: {_short(a.get(k))} != {_short(b.get(k))}")
                    if len(out) >= limit:
                        return out
        else:
            out.append(f"{section}: {_short(a)} != {_short(b)}")
        if len(out) >= limit:
            return out
    return out


def _short(value: Any, width: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width] + "…"


def fts_consistent(db_path: str) -> bool:
    """Whether the external-content FTS5 index agrees exactly with ``texts`` (one row per text).

    Runs FTS5's own ``integrity-check`` with ``rank = 1`` (which also compares
    against the content table) and checks the row counts match.  Needs a
    writable connection (the check is issued as an INSERT; it changes nothing).
    """
    conn = indexdb.connect(db_path)
    try:
        conn.execute("PRAGMA busy_timeout = 30000")
        try:
            conn.execute("INSERT INTO \"texts_fts\" (\"texts_fts\", \"rank\") VALUES ('integrity-check', 1)")
        except sqlite3.DatabaseError:
            return False
        stored = conn.execute('SELECT count(*) FROM "texts"').fetchone()[0]
        indexed = conn.execute('SELECT count(*) FROM "texts_fts_docsize"').fetchone()[0]
        return bool(stored == indexed)
    finally:
        conn.close()
