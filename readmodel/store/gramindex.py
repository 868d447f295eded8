"""The substring candidate index in SQLite: ``document_grams``, one row per distinct text.

A contentless FTS5 table (``content=''``, ``detail=none``, ``columnsize=0``)
whose row ``id`` holds the grams of the text ``texts.id`` (schema 0018;
before it, of the document ``docid``)
(:func:`readmodel.projection.grams.document_tokens`: each gram's integer key
in hex, one ASCII word per gram).  FTS5 keeps one delta-coded posting list
per gram and intersects them with skips, so "texts holding all of these
grams" is one ``MATCH``; with ``detail=none`` it stores no positions, and
without content it stores no second copy of the text.

It is written in the same transactions as ``texts`` (:mod:`readmodel.store.texts`):
the indexer inserts a text's grams when it creates the text's row (the first
document holding it) and removes them when it drops the row (the last
document holding it is gone).  A contentless table forgets what it was
given, so a removal supplies the grams again, recomputed from the stored
(redacted) text — the scheme is a pure function of the text, so they are
the same words.

``index_meta.grams`` records the :func:`~readmodel.projection.grams.scheme_fingerprint`
the table was built with; ``NULL`` or another fingerprint means the table
cannot be trusted (built by another Unicode version, or never built): search
then verifies every document, and the indexer rebuilds the table
(:func:`rebuild`).  SQLite 3.40 has no ``contentless_delete``, hence the
recomputation; its ``trigram`` tokenizer was not used (nothing for queries
under three characters).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, Final

from readmodel.projection.grams import document_tokens, scheme_fingerprint

__all__ = ["DDL", "TABLE", "delete", "insert", "is_current", "rebuild", "scheme_fingerprint", "statistics", "stored_fingerprint"]

TABLE: Final = "document_grams"
DDL: Final = f"CREATE VIRTUAL TABLE {TABLE} USING fts5(grams, content='', detail=none, columnsize=0, tokenize='ascii')"
SHADOW_TABLES: Final = (f"{TABLE}_data", f"{TABLE}_idx", f"{TABLE}_config")

_INSERT: Final = f'INSERT INTO "{TABLE}" ("rowid", "grams") VALUES (?, ?)'
_DELETE: Final = f'INSERT INTO "{TABLE}" ("{TABLE}", "rowid", "grams") VALUES (\'delete\', ?, ?)'
REBUILD_CHUNK: Final = 2_000
"""Texts read, gram-ed and inserted per step of a rebuild (bounded memory)."""
_TEXTS: Final = 'SELECT t."id", CASE typeof(t."text_z") WHEN \'blob\' THEN CAST(sessionq_text(t."text_z") AS TEXT) ELSE t."text_z" END FROM "texts" t'


def insert(cur: Any, rows: list[tuple[int, str]]) -> None:
    """Index ``(text id, text)`` rows (their words from :func:`document_tokens`), in id order."""
    cur.executemany(_INSERT, [(text_id, document_tokens(text)) for text_id, text in rows])


def delete(cur: Any, rows: list[tuple[int, str]]) -> None:
    """Remove the grams of ``(text id, text)`` rows indexed earlier (the texts as stored)."""
    cur.executemany(_DELETE, [(text_id, document_tokens(text)) for text_id, text in rows])


def stored_fingerprint(cur: Any) -> str | None:
    """The scheme fingerprint ``document_grams`` was built with (``None``: not built)."""
    row = cur.execute('SELECT "grams" FROM "index_meta"').fetchone()
    return None if row is None else row[0]


def is_current(cur: Any) -> bool:
    """Whether the table may be used as a candidate index by this code."""
    return stored_fingerprint(cur) == scheme_fingerprint()


def rebuild(cur: Any, progress: Callable[[int, int], None] | None = None) -> int:
    """Empty ``document_grams`` and index every stored text again; record the fingerprint.

    Runs inside the caller's transaction; ``progress(done, total)`` is told
    the texts done after every chunk.  Returns the number of texts.
    """
    cur.execute(f"INSERT INTO \"{TABLE}\" (\"{TABLE}\") VALUES ('delete-all')")
    # Before schema 0018 (a migration building the table: 0009) a row per document.
    per_text = cur.execute("SELECT 1 FROM sqlite_master WHERE name = 'texts'").fetchone() is not None
    source, key = (_TEXTS, 't."id"') if per_text else ('SELECT "docid", "text" FROM "documents"', '"docid"')
    total = cur.execute('SELECT count(*) FROM "texts"' if per_text else 'SELECT count(*) FROM "documents"').fetchone()[0]
    done = 0
    last = -1
    if progress is not None:
        progress(0, total)
    while True:
        rows = cur.execute(f"{source} WHERE {key} > ? ORDER BY {key} LIMIT ?", (last, REBUILD_CHUNK)).fetchall()
        if not rows:
            break
        insert(cur, rows)
        last = rows[-1][0]
        done += len(rows)
        if progress is not None:
            progress(done, total)
    cur.execute('UPDATE "index_meta" SET "grams" = ?', (scheme_fingerprint(),))
    return done


def statistics(cur: sqlite3.Cursor) -> dict[str, Any]:
    """What ``status`` shows: the scheme the code uses, the one stored, and the table's pages in bytes.

    ``bytes`` is ``None`` when SQLite lacks the ``dbstat`` table (a compile-time option).
    """
    stored = stored_fingerprint(cur)
    size: int | None = 0
    try:
        for name in SHADOW_TABLES:
            row = cur.execute("SELECT pgsize FROM dbstat WHERE name = ? AND aggregate = 1", (name,)).fetchone()
            size += row[0] if row and row[0] else 0  # type: ignore[operator]
    except sqlite3.Error:
        size = None
    return {"scheme": scheme_fingerprint(), "stored": stored, "bytes": size}
