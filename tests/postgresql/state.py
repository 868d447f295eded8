"""A PostgreSQL index's comparable content, in the shape of :func:`tests.indexstate.index_state`.

:func:`pg_state` reads the same sections as the SQLite dump (sessions keyed
by id, events with runs expanded, raw lines decoded, links, documents,
layout problems, text hashes, the consistency problems) so the two backends
are compared section for section; the search rows are compared through
:func:`sqlite_search_rows` / :func:`pg_search_rows`: every (term, document)
with its positions — FTS5's own ``fts5vocab`` instance rows on SQLite, the
``postings`` rows on PostgreSQL — and every document's gram keys.
"""

from __future__ import annotations

from typing import Any

import psycopg

from readmodel.projection.grams import LONG_MARK, LONG_MARK_KEY
from readmodel.projection.texthash import text_hash
from readmodel.store.blocks import decompress_block, register_dictionary, unpack_run_times, unpack_run_types
from tests.indexstate import SESSION_SKIP
from tests import indexdb

Key = tuple[str, int]


def _columns(cur: Any, table: str) -> list[str]:
    cur.execute("SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position", (table,))
    return [row[0] for row in cur.fetchall()]


def _quoted(columns: list[str]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def _plain(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


def pg_state(url: str, sqlite_columns: dict[str, list[str]]) -> dict[str, Any]:
    """The PostgreSQL index's content; column orders follow the SQLite index's (``sqlite_columns``)."""
    with psycopg.connect(url) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        cur = conn.cursor()
        problems: list[str] = []
        cur.execute('SELECT "sid", "id" FROM "sessions"')
        sid_to_id = dict(cur.fetchall())

        def key(sid: int) -> str:
            return sid_to_id.get(sid, f"<orphan sid {sid}>")

        columns = sqlite_columns["sessions"]
        assert set(columns) == set(_columns(cur, "sessions"))
        cur.execute(f'SELECT {_quoted(columns)} FROM "sessions"')
        sessions = {}
        for row in cur.fetchall():
            record = dict(zip(columns, map(_plain, row)))
            sessions[record["id"]] = {name: value for name, value in record.items() if name not in SESSION_SKIP}

        event_columns = [c for c in sqlite_columns["events"] if c != "sid"]
        cur.execute(f'SELECT "sid", {_quoted(event_columns)} FROM "events" ORDER BY "sid", "seq"')
        events = {(key(row[0]), row[1]): tuple(map(_plain, row[1:])) for row in cur.fetchall()}
        cur.execute('SELECT "sid", "first_seq", "count", "types", "times", "synthetic" FROM "event_runs"')
        for sid, first, count, types, times, synthetic in cur.fetchall():
            decoded_types, decoded_times = unpack_run_types(bytes(types)), unpack_run_times(bytes(times))
            for offset, (etype, time) in enumerate(zip(decoded_types, decoded_times)):
                member = {"seq": first + offset, "type": etype, "time": time, "surface": 0, "synthetic": synthetic}
                events[(key(sid), first + offset)] = tuple(member.get(c) for c in event_columns)
        events = dict(sorted(events.items()))

        cur.execute('SELECT "id", "data" FROM "block_dictionaries"')
        for dict_id, data in cur.fetchall():
            register_dictionary(dict_id, bytes(data))
        raw: dict[str, list[tuple[int, int, bytes]]] = {}
        cur.execute('SELECT "sid", "first_seq", "count", "synthetic", "data" FROM "event_blocks" ORDER BY "sid", "first_seq"')
        for sid, first, count, synthetic, data in cur.fetchall():
            decoded = decompress_block(bytes(data))
            if len(decoded) != count:
                problems.append(f"{key(sid)} block at {first}: count {count} but {len(decoded)} lines")
            raw.setdefault(key(sid), []).extend((first + i, synthetic, line) for i, line in enumerate(decoded))

        cur.execute('SELECT "sid", "source_seq", "seq", "span" FROM "event_links"')
        links = sorted((key(sid), source + offset, seq) for sid, source, seq, span in cur.fetchall() for offset in range(span))

        doc_columns = [c for c in sqlite_columns["documents"] if c not in ("docid", "sid")]
        cur.execute(f'SELECT "docid", "sid", {_quoted(doc_columns)} FROM "documents"')
        documents = {}
        texts = {}
        for row in cur.fetchall():
            record = dict(zip(doc_columns, row[2:]))
            if row[0] != (row[1] << 32 | record["seq"]):
                problems.append(f"document {row[0]} has a foreign docid")
            documents[(key(row[1]), record["seq"])] = tuple(row[2:])
            texts[row[0]] = record["text"]

        cur.execute('SELECT "path", "kind", "message" FROM "layout_problems"')
        layout = sorted(cur.fetchall())
        cur.execute('SELECT "docid", "hash" FROM "document_hashes"')
        stored = dict(cur.fetchall())
        for docid, text in texts.items():
            if stored.get(docid) != text_hash(text):
                problems.append(f"document {docid}: text hash {stored.get(docid)} is not its text's")
        problems += [f"text hash of a deleted document {docid}" for docid in sorted(set(stored) - set(texts))]
        hashes = {(key(docid >> 32), docid & 0xFFFFFFFF): value for docid, value in sorted(stored.items())}
        search = _pg_search(cur, key, set(texts), problems)
        problems += _per_text_problems(cur, texts, stored)
    return {
        "sessions": sessions,
        "events": events,
        "raw_events": raw,
        "event_links": links,
        "documents": documents,
        "layout_problems": layout,
        "document_hashes": hashes,
        "consistency": problems,
        **search,
    }


def _pg_search(cur: Any, key: Any, docids: set[int], problems: list[str]) -> dict[str, Any]:
    cur.execute('SELECT t."text", p."docid", p."tf", p."positions" FROM "postings" p LEFT JOIN "terms" t ON t."term" = p."term"')
    postings: dict[Key, dict[bytes, tuple[int, ...]]] = {}
    for text, docid, tf, positions in cur.fetchall():
        if text is None:
            problems.append(f"a posting of document {docid} has no dictionary entry")
            continue
        if tf != len(positions):
            problems.append(f"posting {bytes(text)!r} of {docid}: tf {tf} for {len(positions)} positions")
        if docid not in docids:
            problems.append(f"a posting of a deleted document {docid}")
        postings.setdefault((key(docid >> 32), docid & 0xFFFFFFFF), {})[bytes(text)] = tuple(positions)
    cur.execute('SELECT "docid", "grams" FROM "document_gram_keys"')
    grams = {}
    for docid, keys in cur.fetchall():
        if docid not in docids:
            problems.append(f"gram keys of a deleted document {docid}")
        if keys:  # FTS5 keeps no row for a document without grams
            grams[(key(docid >> 32), docid & 0xFFFFFFFF)] = tuple(sorted(keys))
    return {"postings": dict(sorted(postings.items())), "gram_keys": dict(sorted(grams.items()))}


def _per_text_problems(cur: Any, texts: dict[int, str], stored: dict[int, int]) -> list[str]:
    """Where migration 0020's per-text rows disagree with the documents: each document's
    ``text_documents`` row (hash and time; none for a deleted one), and each stored text's
    ``search_texts`` row, ``text_postings`` (its terms and positions), ``text_prefixes`` and ``text_grams``
    (:func:`readmodel.search.serverterms.gram_counts`).  A text no document holds any more may
    keep its rows (they are never deleted) and is not a problem."""
    from readmodel.search import serverterms
    from readmodel.search.substring import _ascii_folded
    from readmodel.search.tokens import Tokenizer, postings

    problems = []
    cur.execute('SELECT "docid", "time" FROM "documents"')
    times = dict(cur.fetchall())
    cur.execute('SELECT "docid", "hash", "time" FROM "text_documents"')
    rows = {docid: (value, time) for docid, value, time in cur.fetchall()}
    problems += [f"text_documents of document {d}: {rows.get(d)}" for d in sorted(texts) if rows.get(d) != (stored.get(d), times.get(d))]
    problems += [f"text_documents row of a deleted document {d}" for d in sorted(set(rows) - set(texts))]
    by_hash = {stored[docid]: text for docid, text in texts.items() if docid in stored}
    cur.execute('SELECT "hash", "length", "folded" FROM "search_texts" WHERE "hash" = ANY(%s)', (list(by_hash),))
    lengths = {value: (length, folded) for value, length, folded in cur.fetchall()}
    cur.execute('SELECT p."hash", t."text", p."tf", p."positions" FROM "text_postings" p JOIN "terms" t ON t."term" = p."term" WHERE p."hash" = ANY(%s)', (list(by_hash),))
    held: dict[int, dict[bytes, tuple[int, ...]]] = {}
    for value, term, tf, positions in cur.fetchall():
        held.setdefault(value, {})[bytes(term)] = tuple(positions) if tf == len(positions) else ()
    cur.execute('SELECT "hash", "gram", "n" FROM "text_grams" WHERE "hash" = ANY(%s)', (list(by_hash),))
    grams: dict[int, dict[int, int]] = {}
    for value, gram, n in cur.fetchall():
        grams.setdefault(value, {})[gram] = n
    cur.execute('SELECT "hash", "prefix", "tf", "positions" FROM "text_prefixes" WHERE "hash" = ANY(%s)', (list(by_hash),))
    prefixes: dict[int, dict[bytes, list[int]]] = {}
    for value, prefix, tf, positions in cur.fetchall():
        prefixes.setdefault(value, {})[bytes(prefix)] = list(positions) if tf == len(positions) else []
    tokenizer = Tokenizer()
    try:
        for value, text in sorted(by_hash.items()):
            if lengths.get(value) != (len(text), _ascii_folded(text.encode(), True).decode()):
                problems.append(f"search_texts of {value} is not its text's")
            expected = {term: tuple(found) for term, found in postings(tokenizer.tokens(text)).items()}
            if held.get(value, {}) != expected:
                problems.append(f"text_postings of {value} are not its text's")
            if prefixes.get(value, {}) != serverterms.prefix_positions({term: list(found) for term, found in expected.items()}):
                problems.append(f"text_prefixes of {value} are not its text's")
            if grams.get(value, {}) != serverterms.gram_counts(text):
                problems.append(f"text_grams of {value} are not its text's")
    finally:
        tokenizer.close()
    return problems


def sqlite_columns(db_path: str) -> dict[str, list[str]]:
    conn = indexdb.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return {table: [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')] for table in ("sessions", "events", "documents")}
    finally:
        conn.close()


def sqlite_search_rows(db_path: str) -> dict[str, Any]:
    """FTS5's own postings (``fts5vocab`` instance rows) and gram words (as keys) of a SQLite index."""
    conn = indexdb.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.terms_0 USING fts5vocab(main, texts_fts, 'instance')")
        conn.execute("CREATE VIRTUAL TABLE temp.grams_0 USING fts5vocab(main, document_grams, 'instance')")
        sid_to_id = dict(conn.execute('SELECT "sid", "id" FROM "sessions"'))
        found: dict[Key, dict[bytes, list[int]]] = {}
        # texts_fts is per distinct text (schema 0021): each document gets its text's postings.
        holders: dict[int, list[int]] = {}
        for doc, text_id in conn.execute('SELECT "docid", "text_id" FROM "document_rows"'):
            holders.setdefault(text_id, []).append(doc)
        for term, text_id, offset in conn.execute('SELECT CAST("term" AS BLOB), "doc", "offset" FROM temp.terms_0 ORDER BY "doc", "offset"'):
            for doc in holders.get(text_id, []):
                found.setdefault((sid_to_id[doc >> 32], doc & 0xFFFFFFFF), {}).setdefault(term, []).append(offset)
        postings = {k: {t: tuple(p) for t, p in v.items()} for k, v in sorted(found.items())}
        by_text: dict[int, set[int]] = {}  # SQLite keeps grams per distinct text (schema 0018)
        for term, text_id in conn.execute('SELECT "term", "doc" FROM temp.grams_0'):
            by_text.setdefault(text_id, set()).add(LONG_MARK_KEY if term == LONG_MARK else int(term, 16))
        grams: dict[Key, set[int]] = {}
        for doc, text_id in conn.execute('SELECT "docid", "text_id" FROM "document_rows"'):
            if text_id in by_text:
                grams[(sid_to_id[doc >> 32], doc & 0xFFFFFFFF)] = by_text[text_id]
        return {"postings": postings, "gram_keys": {k: tuple(sorted(v)) for k, v in sorted(grams.items())}}
    finally:
        conn.close()
