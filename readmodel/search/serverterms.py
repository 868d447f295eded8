"""The search rows a PostgreSQL index stores for a document, and writing them.

PostgreSQL never tokenises (docs/postgres.md): the writing host computes
each document's terms with :class:`readmodel.search.tokens.Tokenizer` and
stores, in the transaction that writes the document,

* ``terms (term bigint PRIMARY KEY, text bytea)``: the dictionary, one row
  per distinct term, keyed by :func:`readmodel.search.tokens.term_hash`;
* ``postings (term, docid, tf, positions int[])``: one row per (term,
  document) with every position of the term (0-based token positions, no
  limit) and their number;
* ``document_gram_keys (docid, grams bigint[])``: the substring candidate
  keys (:func:`readmodel.projection.grams.document_gram_keys`), GIN-indexed.

:func:`write_documents` writes them for ``(docid, text)`` rows through a
psycopg cursor; :func:`delete_documents` removes a docid range's rows (call
it wherever the documents are deleted).  The dictionary is written with
``ON CONFLICT DO NOTHING`` in key order (two concurrent writers never
deadlock on it) and read back: a different text under one hash is a
:class:`TermCollision`, which fails the batch; it is never answered wrongly.
The dictionary keeps a term after its last posting goes (it is tiny and a
later document likely brings the term back).

The migration that creates these tables (0014) backfills them with
:func:`backfill`; the read side is :mod:`readmodel.search.postgres`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from readmodel.projection.grams import document_gram_keys
from readmodel.search.tokens import Tokenizer, postings, term_hash

TABLES: Final = ("terms", "postings", "document_gram_keys")
"""The PostgreSQL-only tables (explicit DDL in migration 0014, no SQLAlchemy model)."""

PREFIX_KEY_BYTES: Final = 16
"""Bytes of a term in the ``terms_prefix`` index."""

DDL: Final = (
    'CREATE TABLE "terms" ("term" bigint PRIMARY KEY, "text" bytea NOT NULL)',
    # The words mode's prefix terms: a term's first bytes (a whole term may exceed a btree entry).
    f'CREATE INDEX "terms_prefix" ON "terms" (substr("text", 1, {PREFIX_KEY_BYTES}))',
    'CREATE TABLE "postings" ("term" bigint NOT NULL, "docid" bigint NOT NULL, "tf" integer NOT NULL, '
    '"positions" integer[] NOT NULL, PRIMARY KEY ("term", "docid"))',
    'CREATE INDEX "postings_top" ON "postings" ("term", "tf" DESC, "docid")',
    'CREATE INDEX "postings_docid" ON "postings" ("docid")',
    'CREATE TABLE "document_gram_keys" ("docid" bigint PRIMARY KEY, "grams" bigint[] NOT NULL)',
    'CREATE INDEX "document_gram_keys_grams" ON "document_gram_keys" USING gin ("grams")',
)
"""Migration 0014's DDL, in order."""

BACKFILL_CHUNK: Final = 500
"""Documents read, tokenised and written per step of :func:`backfill`."""


class TermCollision(RuntimeError):
    """Two different terms have one :func:`~readmodel.search.tokens.term_hash`."""


def document_rows(tokenizer: Tokenizer, docid: int, text: str) -> tuple[dict[int, bytes], list[tuple[int, int, int, list[int]]]]:
    """One document's dictionary entries ``{hash: term}`` and postings ``(hash, docid, tf, positions)``."""
    entries: dict[int, bytes] = {}
    rows = []
    for term, positions in postings(tokenizer.tokens(text)).items():
        key = term_hash(term)
        if entries.setdefault(key, term) != term:
            raise TermCollision(f"terms {term!r} and {entries[key]!r} have the same hash {key}")
        rows.append((key, docid, len(positions), positions))
    return entries, rows


def write_documents(cur: Any, tokenizer: Tokenizer, documents: Iterable[tuple[int, str]]) -> int:
    """Store the terms, postings and gram keys of ``(docid, text)`` documents new to the index.

    ``cur`` is a psycopg 3 cursor inside the writing transaction.  Returns the
    number of postings written.  :class:`TermCollision` when a term's hash is
    already the key of another term.
    """
    dictionary: dict[int, bytes] = {}
    posting_rows: list[tuple[int, int, int, list[int]]] = []
    gram_rows: list[tuple[int, list[int]]] = []
    for docid, text in documents:
        entries, rows = document_rows(tokenizer, docid, text)
        for key, term in entries.items():
            if dictionary.setdefault(key, term) != term:
                raise TermCollision(f"terms {term!r} and {dictionary[key]!r} have the same hash {key}")
        posting_rows += rows
        gram_rows.append((docid, document_gram_keys(text)))
    _write_dictionary(cur, dictionary)
    # COPY's text format written directly: several times faster than adapting each array.
    with cur.copy('COPY "postings" ("term", "docid", "tf", "positions") FROM STDIN') as copy:
        for start in range(0, len(posting_rows), _COPY_ROWS):
            copy.write("".join(f"{key}\t{docid}\t{tf}\t{{{_joined(positions)}}}\n" for key, docid, tf, positions in posting_rows[start : start + _COPY_ROWS]))
    with cur.copy('COPY "document_gram_keys" ("docid", "grams") FROM STDIN') as copy:
        for docid, keys in gram_rows:
            copy.write(f"{docid}\t{{{_joined(keys)}}}\n")
    return len(posting_rows)


_COPY_ROWS: Final = 10_000


def _joined(numbers: list[int]) -> str:
    return ",".join(map(str, numbers))


def _write_dictionary(cur: Any, dictionary: dict[int, bytes]) -> None:
    if not dictionary:
        return
    keys = sorted(dictionary)  # one lock order for every writer: no deadlock between batches
    cur.execute(
        'INSERT INTO "terms" ("term", "text") SELECT * FROM unnest(%s::bigint[], %s::bytea[]) ON CONFLICT DO NOTHING',
        (keys, [dictionary[key] for key in keys]),
    )
    cur.execute('SELECT "term", "text" FROM "terms" WHERE "term" = ANY(%s::bigint[])', (keys,))
    for key, stored in cur.fetchall():
        if bytes(stored) != dictionary[key]:
            raise TermCollision(f"terms {dictionary[key]!r} and {bytes(stored)!r} have the same hash {key}")


def delete_documents(cur: Any, low: int, high: int) -> None:
    """Remove the postings and gram keys of the documents with ``low <= docid <= high``."""
    cur.execute('DELETE FROM "postings" WHERE "docid" BETWEEN %s AND %s', (low, high))
    cur.execute('DELETE FROM "document_gram_keys" WHERE "docid" BETWEEN %s AND %s', (low, high))


def backfill(cur: Any, progress: Callable[[int], None] | None = None) -> int:
    """Write the rows of every stored document (tables empty); the number of documents.

    Runs in the caller's transaction, :data:`BACKFILL_CHUNK` documents at a
    time (bounded memory); ``progress(done)`` after each chunk.
    """
    tokenizer = Tokenizer()
    try:
        done, last = 0, -1
        while True:
            cur.execute('SELECT "docid", "text" FROM "documents" WHERE "docid" > %s ORDER BY "docid" LIMIT %s', (last, BACKFILL_CHUNK))
            rows: Sequence[tuple[int, str]] = cur.fetchall()
            if not rows:
                return done
            write_documents(cur, tokenizer, rows)
            last = rows[-1][0]
            done += len(rows)
            if progress is not None:
                progress(done)
    finally:
        tokenizer.close()
