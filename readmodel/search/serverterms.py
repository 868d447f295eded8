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

**Per text** (migration 0020): the ``words`` and ``substring`` rankings
depend on a document's text alone, and texts repeat (boilerplate, copied
history), so the same rows are also kept once per distinct text, keyed by
:func:`readmodel.projection.texthash.text_hash` (``document_hashes.hash``):

* ``search_texts (hash bigint PRIMARY KEY, length, folded)``: the text's
  length in code points and its ASCII-folded copy (:data:`ASCII_FOLDED`,
  stored uncompressed: an ASCII substring query is counted in it without
  decompressing or folding anything at query time);
* ``text_postings (term, hash, tf, positions int[])``: the postings of the
  text, as a document holding it has them;
* ``text_grams (gram, hash, n)``: how often each gram occurs in the text
  (:func:`gram_counts`): the substring mode's candidates (a matching text
  holds every gram of the query) and the bound of its occurrences (each
  non-overlapping occurrence of the query holds its own occurrence of each
  of the query's grams, so it occurs at most ``min(n)`` times);
* ``text_prefixes (prefix, hash, tf, positions int[])``: for each prefix of
  one or two bytes of the text's terms, the positions of all the terms
  starting with it (:func:`prefix_positions`): a ``words`` query's short
  prefix token (search as you type: ``c``, ``re``) is one row per text,
  not a sum over the thousands of terms it expands to;
* ``text_documents (docid PRIMARY KEY, hash, time)``: each document's text
  hash and time (from ``document_hashes`` and ``documents``), indexed by
  ``(hash, time DESC, docid DESC)``: a text's documents newest first, so a
  ranking reads the leading holders of a common text, not all of them.
  Written with the document, deleted with it.

A text's rows are written by the first transaction that stores it: the
``search_texts`` row is inserted with ``ON CONFLICT DO NOTHING … RETURNING``
in hash order (two writers of one new text: the second waits for the first
and inserts nothing; no deadlock), and only the texts it returned get their
``text_postings``.  Like the dictionary, a text's rows are never deleted
(they are a function of the text; a reader reaches documents only through
``document_hashes``, so a text no document holds any more answers nothing),
which keeps concurrent writers of different sources free of any
delete/insert race on a shared text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from collections import Counter

from readmodel.projection.grams import document_gram_keys, fold, gram_key
from readmodel.projection.texthash import text_hash
from readmodel.search.tokens import Tokenizer, postings, term_hash

TABLES: Final = ("terms", "postings", "document_gram_keys")
"""The PostgreSQL-only tables of migration 0014 (explicit DDL, no SQLAlchemy model)."""

TEXT_TABLES: Final = ("search_texts", "text_postings", "text_grams", "text_documents", "text_prefixes")
"""The PostgreSQL-only per-text tables of migration 0020 (explicit DDL, no SQLAlchemy model)."""

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

TEXT_DDL: Final = (
    'CREATE TABLE "search_texts" ("hash" bigint PRIMARY KEY, "length" integer NOT NULL, "folded" text NOT NULL)',
    'ALTER TABLE "search_texts" ALTER COLUMN "folded" SET STORAGE EXTERNAL',
    'CREATE TABLE "text_postings" ("term" bigint NOT NULL, "hash" bigint NOT NULL, "tf" integer NOT NULL, '
    '"positions" integer[] NOT NULL, PRIMARY KEY ("term", "hash"))',
    'CREATE TABLE "text_grams" ("gram" bigint NOT NULL, "hash" bigint NOT NULL, "n" integer NOT NULL, PRIMARY KEY ("gram", "hash"))',
    'CREATE TABLE "text_prefixes" ("prefix" bytea NOT NULL, "hash" bigint NOT NULL, "tf" integer NOT NULL, '
    '"positions" integer[] NOT NULL, PRIMARY KEY ("prefix", "hash"))',
    'CREATE TABLE "text_documents" ("docid" bigint PRIMARY KEY, "hash" bigint NOT NULL, "time" bigint)',
    'CREATE INDEX "text_documents_newest" ON "text_documents" ("hash", "time" DESC NULLS LAST, "docid" DESC)',
    # The boilerplate verdict walks a text's documents in docid (so session) order, skipping
    # to the next session: three index probes instead of reading every holder.
    'CREATE INDEX "document_hashes_walk" ON "document_hashes" ("hash", "docid")',
)
"""Migration 0020's DDL, in order."""

ASCII_FOLDED: Final = """lower(replace(replace({text}, chr(8490), 'k'), chr(383), 's') COLLATE "C")"""
"""A text as an ASCII substring query is counted in (:class:`readmodel.search.substring.Substring`):
KELVIN SIGN and LONG S (the only non-ASCII members of ASCII letters' simple case-fold classes) as
``k`` and ``s``, then ASCII letters lowered (``COLLATE "C"``: nothing else, whatever the database's
locale).  Every other code point stays, so an ASCII literal's non-overlapping occurrences are the
same as in the text folded by the query's pattern."""

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


def write_documents(cur: Any, tokenizer: Tokenizer, documents: Iterable[tuple[int, str]], *, texts: bool = True) -> int:
    """Store the terms, postings and gram keys of ``(docid, text)`` documents new to the index,
    and (``texts``: the schema has migration 0020's tables) the per-text rows of texts new to it.

    ``cur`` is a psycopg 3 cursor inside the writing transaction.  Returns the
    number of postings written.  :class:`TermCollision` when a term's hash is
    already the key of another term.
    """
    dictionary: dict[int, bytes] = {}
    posting_rows: list[tuple[int, int, int, list[int]]] = []
    gram_rows: list[tuple[int, list[int]]] = []
    by_text: dict[int, tuple[str, list[tuple[int, int, int, list[int]]], dict[int, bytes]]] = {}
    for docid, text in documents:
        entries, rows = document_rows(tokenizer, docid, text)
        for key, term in entries.items():
            if dictionary.setdefault(key, term) != term:
                raise TermCollision(f"terms {term!r} and {dictionary[key]!r} have the same hash {key}")
        posting_rows += rows
        gram_rows.append((docid, document_gram_keys(text)))
        if texts:
            by_text.setdefault(text_hash(text), (text, rows, entries))
    _write_dictionary(cur, dictionary)
    # COPY's text format written directly: several times faster than adapting each array.
    _copy_postings(cur, "postings", "docid", posting_rows)
    with cur.copy('COPY "document_gram_keys" ("docid", "grams") FROM STDIN') as copy:
        for docid, keys in gram_rows:
            copy.write(f"{docid}\t{{{_joined(keys)}}}\n")
    if by_text:
        _write_texts(cur, by_text)
    if texts:
        write_text_documents(cur, [row[0] for row in gram_rows])
    return len(posting_rows)


def write_text_documents(cur: Any, docids: list[int] | None) -> None:
    """The ``text_documents`` rows of stored documents (``docids``; ``None``: every one), from
    their ``document_hashes`` and ``documents`` rows (written earlier in the same transaction)."""
    where = "" if docids is None else ' WHERE h."docid" = ANY(%s)'
    cur.execute(
        'INSERT INTO "text_documents" ("docid", "hash", "time") SELECT h."docid", h."hash", d."time" FROM "document_hashes" h '
        f'JOIN "documents" d ON d."docid" = h."docid"{where}',
        [] if docids is None else [docids],
    )


def _copy_postings(cur: Any, table: str, column: str, rows: list[tuple[int, int, int, list[int]]]) -> None:
    with cur.copy(f'COPY "{table}" ("term", "{column}", "tf", "positions") FROM STDIN') as copy:
        for start in range(0, len(rows), _COPY_ROWS):
            copy.write("".join(f"{key}\t{owner}\t{tf}\t{{{_joined(positions)}}}\n" for key, owner, tf, positions in rows[start : start + _COPY_ROWS]))


def _write_texts(cur: Any, by_text: dict[int, tuple[str, list[tuple[int, int, int, list[int]]], dict[int, bytes]]]) -> None:
    """The per-text rows of the texts no committed transaction stored yet (see the module docstring)."""
    hashes = sorted(by_text)  # one lock order for every writer
    cur.execute(
        f'INSERT INTO "search_texts" ("hash", "length", "folded") SELECT h, l, {ASCII_FOLDED.format(text="t")} '
        "FROM unnest(%s::bigint[], %s::int[], %s::text[]) AS u(h, l, t) ORDER BY h "
        'ON CONFLICT DO NOTHING RETURNING "hash"',
        (hashes, [len(by_text[h][0]) for h in hashes], [by_text[h][0] for h in hashes]),
    )
    fresh = sorted(row[0] for row in cur.fetchall())
    _copy_postings(cur, "text_postings", "hash", [(key, value, tf, positions) for value in fresh for key, _d, tf, positions in by_text[value][1]])
    with cur.copy('COPY "text_grams" ("gram", "hash", "n") FROM STDIN') as copy:
        for value in fresh:
            copy.write("".join(f"{gram}\t{value}\t{n}\n" for gram, n in gram_counts(by_text[value][0]).items()))
    with cur.copy('COPY "text_prefixes" ("prefix", "hash", "tf", "positions") FROM STDIN') as copy:
        for value in fresh:
            _, rows, entries = by_text[value]
            for prefix, positions in prefix_positions({entries[key]: found for key, _d, _tf, found in rows}).items():
                copy.write(f"\\\\x{prefix.hex()}\t{value}\t{len(positions)}\t{{{_joined(positions)}}}\n")


PREFIX_BYTES: Final = 2
"""The longest prefix ``text_prefixes`` keeps (bytes of a term)."""


def prefix_positions(terms: dict[bytes, list[int]]) -> dict[bytes, list[int]]:
    """``prefix → positions``: for each prefix of 1 to :data:`PREFIX_BYTES` bytes of a text's
    terms, the positions of every term starting with it, in order (``terms``: term → positions)."""
    found: dict[bytes, list[int]] = {}
    for term, positions in terms.items():
        for size in range(1, min(len(term), PREFIX_BYTES) + 1):
            found.setdefault(term[:size], []).extend(positions)
    return {prefix: sorted(positions) for prefix, positions in found.items()}


def gram_counts(text: str) -> dict[int, int]:
    """``gram key → occurrences`` in the folded text (:func:`readmodel.projection.grams.fold`:
    case folded, each whitespace character a space): every bigram but two spaces, and every
    non-ASCII code point.

    A substring query's grams (:func:`readmodel.projection.grams.query_grams`) are bigrams of
    its folded text, its whitespace runs one space (a single non-ASCII code point: itself), so
    a text holding the query holds each of them at every occurrence.
    """
    folded = fold(text)
    counts: Counter[str] = Counter(map(str.__add__, folded, folded[1:]))
    counts.pop("  ", None)
    if not folded.isascii():
        counts.update(char for char in folded if char > "\x7f")
    return {gram_key(gram): n for gram, n in counts.items()}


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
    cur.execute('DELETE FROM "text_documents" WHERE "docid" BETWEEN %s AND %s', (low, high))


def backfill(cur: Any, progress: Callable[[int], None] | None = None, *, texts: bool = True) -> int:
    """Write the rows of every stored document (tables empty); the number of documents.

    Runs in the caller's transaction, :data:`BACKFILL_CHUNK` documents at a
    time (bounded memory); ``progress(done)`` after each chunk.  ``texts``:
    the per-text rows too (the schema has migration 0020's tables).
    """
    tokenizer = Tokenizer()
    try:
        done, last = 0, -1
        while True:
            cur.execute('SELECT "docid", "text" FROM "documents" WHERE "docid" > %s ORDER BY "docid" LIMIT %s', (last, BACKFILL_CHUNK))
            rows: Sequence[tuple[int, str]] = cur.fetchall()
            if not rows:
                return done
            write_documents(cur, tokenizer, rows, texts=texts)
            last = rows[-1][0]
            done += len(rows)
            if progress is not None:
                progress(done)
    finally:
        tokenizer.close()


def backfill_texts(cur: Any) -> int:
    """Write the per-text rows of every distinct stored text and every document's
    ``text_documents`` row (migration 0020); the number of texts.

    One document per text hash is read (:data:`BACKFILL_CHUNK` texts at a time, bounded memory).
    """
    tokenizer = Tokenizer()
    try:
        done, last = 0, None
        while True:
            after = "" if last is None else 'WHERE h."hash" > %s '
            cur.execute(
                f'SELECT DISTINCT ON (h."hash") h."hash", d."text" FROM "document_hashes" h JOIN "documents" d ON d."docid" = h."docid" '
                f'{after}ORDER BY h."hash" LIMIT %s',
                ([] if last is None else [last]) + [BACKFILL_CHUNK],
            )
            rows: Sequence[tuple[int, str]] = cur.fetchall()
            if not rows:
                write_text_documents(cur, None)
                return done
            _write_texts(cur, {value: (text, *reversed(document_rows(tokenizer, 0, text))) for value, text in rows})
            last = rows[-1][0]
            done += len(rows)
    finally:
        tokenizer.close()
