"""Each distinct document text stored once in SQLite (schema 0018): ``texts`` and ``document_rows.text_id``.

Agent histories repeat themselves: harness system and runtime-context
messages, tool outputs, the same file read again.  ``texts(id, hash, length,
text_z)`` holds every distinct stored text (after redaction) once, packed as
:mod:`readmodel.store.doctext` packs it; a document row names its text by
``text_id``.  The ``documents`` view joins them back
(:data:`readmodel.store.schema.DOCUMENTS_VIEW_DDL`), so readers and FTS5's
external content read the same columns as before.

**Exactness.**  Two documents share a text row exactly when their texts are
equal: a text is looked up by its 64-bit hash
(:func:`readmodel.projection.texthash.text_hash`, index ``texts_hash``) and the
stored text is compared with it; a different text under the same hash (a
collision) gets a row of its own.  So a text id stands for one text, and the
sessions holding a text are the sessions of the documents under its id
(index ``document_rows_text``) — what the search modes' boilerplate verdict
counts.

**Lifetime.**  A text row lives while a document names it.  The writer
(:mod:`indexer.projection`) creates a row with the first document of its text
and indexes its character grams then (``document_grams`` is keyed by text
id, :mod:`readmodel.store.gramindex`); deleting documents only *notes* their
texts as orphan candidates (:func:`held_by`), and before the transaction
commits the writer removes the candidates no document (:func:`orphans`)
names any more, with their grams.  Candidates are rechecked then, so a
savepoint rolled back in between (which restores the documents) keeps its
texts.  The reference count is the ``document_rows_text`` index itself: no
counter to drift, and incremental and cold builds agree on it by
construction.

Writers other than the indexer (tests) may insert through the view:
``INSTEAD OF INSERT`` finds or creates the text row in SQL (without grams,
as it never wrote FTS5 rows either); updates and deletes through the view
touch only ``document_rows``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from readmodel.core.checkedcache import CheckedCache
from readmodel.store.doctext import pack_text
from readmodel.store.schema import TEXT_EXPRESSION

TEXTS_DDL: Final = (
    'CREATE TABLE "texts" ("id" INTEGER NOT NULL PRIMARY KEY, "hash" INTEGER NOT NULL, "length" INTEGER NOT NULL, "text_z" BLOB NOT NULL)',
    'CREATE INDEX "texts_hash" ON "texts" ("hash")',
    'CREATE INDEX "texts_length" ON "texts" ("length")',
)
DOCUMENT_ROWS_DDL: Final = (
    'CREATE TABLE "document_rows" ("docid" INTEGER NOT NULL PRIMARY KEY, "sid" INTEGER NOT NULL, "seq" INTEGER NOT NULL, '
    '"type" TEXT NOT NULL, "time" INTEGER, "surface" INTEGER NOT NULL, "text_id" INTEGER NOT NULL)'
)
DOCUMENT_ROWS_INDEX: Final = 'CREATE INDEX "document_rows_text" ON "document_rows" ("text_id")'

_SAME_TEXT: Final = f't."hash" = sessionq_hash(NEW."text") AND {TEXT_EXPRESSION} = NEW."text"'
TRIGGERS_DDL: Final = (
    'CREATE TRIGGER "documents_insert" INSTEAD OF INSERT ON "documents" BEGIN '
    'INSERT INTO "texts" ("hash", "length", "text_z") SELECT sessionq_hash(NEW."text"), coalesce(NEW."length", length(NEW."text")), '
    f'sessionq_pack(NEW."text") WHERE NOT EXISTS (SELECT 1 FROM "texts" t WHERE {_SAME_TEXT}); '
    'INSERT INTO "document_rows" ("docid", "sid", "seq", "type", "time", "surface", "text_id") '
    'VALUES (NEW."docid", NEW."sid", NEW."seq", NEW."type", NEW."time", NEW."surface", '
    f'(SELECT t."id" FROM "texts" t WHERE {_SAME_TEXT} LIMIT 1)); END',
    'CREATE TRIGGER "documents_update" INSTEAD OF UPDATE OF "docid", "sid", "seq", "type", "time", "surface" ON "documents" BEGIN '
    'UPDATE "document_rows" SET "docid" = NEW."docid", "sid" = NEW."sid", "seq" = NEW."seq", "type" = NEW."type", '
    '"time" = NEW."time", "surface" = NEW."surface" WHERE "docid" = OLD."docid"; END',
    'CREATE TRIGGER "documents_delete" INSTEAD OF DELETE ON "documents" BEGIN '
    'DELETE FROM "document_rows" WHERE "docid" = OLD."docid"; END',
)

_FIND: Final = 'SELECT "id", "text_z" FROM "texts" WHERE "hash" = ?'
_CREATE: Final = 'INSERT INTO "texts" ("hash", "length", "text_z") VALUES (?, ?, ?)'
_DECODE: Final = 'SELECT CAST(sessionq_text(?) AS TEXT)'
_HELD: Final = 'SELECT 1 FROM "document_rows" WHERE "text_id" = ? LIMIT 1'

CACHE_CHARS: Final = 16 * 1024 * 1024
"""Decoded texts :class:`TextStore` keeps to compare new documents with (per writer, LRU)."""


class TextStore:
    """The writer's side of ``texts``: the text id of each new document, creating rows as needed.

    Keeps, per text hash, the last stored form seen and its decoded text, so a
    repeated text (most documents of a cold build) is compared without
    decompressing it again; an entry is used only when the stored form read
    from the index is byte for byte the one it was decoded from, so it can
    never be stale (ids may be reused after a text is dropped).
    """

    def __init__(self, capacity: int = CACHE_CHARS) -> None:
        # Thread-safe: writers of several indexes may share the process.
        self.decoded: CheckedCache[int, str] = CheckedCache(capacity, len)

    def _text_of(self, cur: Any, value: int, stored: Any) -> str:
        if isinstance(stored, str):
            return stored
        cached = self.decoded.get(value, stored)
        if cached is not None:
            return cached
        # Through the connection's sessionq_text: it loads a dictionary this process lacks.
        text = cur.execute(_DECODE, (stored,)).fetchone()[0]
        self._remember(value, bytes(stored), text)
        return text

    def _remember(self, value: int, stored: Any, text: str) -> None:
        if isinstance(stored, str) or len(text) > self.decoded.capacity // 8:
            return
        self.decoded.put(value, stored, text)

    def store(self, cur: Any, texts: Sequence[tuple[str, int]], known: KnownTexts | None = None) -> tuple[list[int], list[tuple[int, str]]]:
        """The text id of each ``(text, hash)`` (in order), and the ``(id, text)`` rows created.

        Runs in the caller's transaction (and savepoint); equal texts in
        ``texts`` share the row the first of them found or created.  With
        ``known`` (the caller keeps it true to the open transaction, see
        :class:`KnownTexts`), a text found or created earlier in the
        transaction is answered without a query.
        """
        ids: list[int] = []
        created: list[tuple[int, str]] = []
        for text, value in texts:
            found = known.find(text, value) if known is not None else None
            if found is not None:
                ids.append(found)
                continue
            for text_id, stored in cur.execute(_FIND, (value,)).fetchall():
                if self._text_of(cur, value, stored) == text:
                    found = text_id
                    break
            if found is None:
                packed = pack_text(text)
                found = cur.execute(_CREATE, (value, len(text), packed)).lastrowid
                created.append((found, text))
                if not isinstance(packed, str):
                    self._remember(value, bytes(packed), text)
            if known is not None:
                known.add(text, value, found)
            ids.append(found)
        return ids, created


KNOWN_CHARS: Final = 8 * 1024 * 1024
"""Characters of text :class:`KnownTexts` holds at most (it stops learning beyond)."""
KNOWN_MAX_TEXT: Final = 64 * 1024
"""Longer texts are not learnt: comparing them costs more than the lookup it saves,
and a few would fill :data:`KNOWN_CHARS`."""


class KnownTexts:
    """Text ids found or created in the open transaction, by text hash: what :meth:`TextStore.store`
    would find again, without asking the index.

    A text has one row (``store`` never creates a second row for a text it
    finds), so the row a text was found or created as is the row a query
    would find for it — as long as that row is still there.  Contract: the
    owner calls :meth:`forget` whenever rows may have gone or another writer
    may have written since — at every ``ROLLBACK``/``ROLLBACK TO``, whenever
    it deletes texts, and when its transaction ends (another writer of the
    index may commit between two transactions).  Bounded by
    :data:`KNOWN_CHARS` of text (beyond it, and for texts over
    :data:`KNOWN_MAX_TEXT`, texts are looked up as before).
    """

    __slots__ = ("by_hash", "chars")

    def __init__(self) -> None:
        self.by_hash: dict[int, list[tuple[int, str]]] = {}
        self.chars = 0

    def find(self, text: str, value: int) -> int | None:
        """The id of ``text`` (hash ``value``) if it was learnt, else ``None``."""
        for text_id, seen in self.by_hash.get(value, ()):
            if seen == text:
                return text_id
        return None

    def add(self, text: str, value: int, text_id: int) -> None:
        """Learn that ``text`` (hash ``value``) is row ``text_id`` in the open transaction."""
        if len(text) > KNOWN_MAX_TEXT or self.chars + len(text) > KNOWN_CHARS:
            return
        self.by_hash.setdefault(value, []).append((text_id, text))
        self.chars += len(text)

    def forget(self) -> None:
        """Drop everything learnt (a rollback, a deletion, the end of the transaction)."""
        if self.chars or self.by_hash:
            self.by_hash = {}
            self.chars = 0


def held_by(cur: Any, docids: tuple[int, int]) -> list[int]:
    """The distinct text ids of the documents with ``low <= docid <= high``."""
    return [row[0] for row in cur.execute('SELECT DISTINCT "text_id" FROM "document_rows" WHERE "docid" BETWEEN ? AND ?', docids).fetchall()]


def orphans(cur: Any, candidates: Iterable[int]) -> list[tuple[int, str]]:
    """``(id, text)`` of the ``candidates`` still stored that no document names, in id order."""
    found = []
    for text_id in sorted(set(candidates)):
        if cur.execute(_HELD, (text_id,)).fetchone() is None:
            row = cur.execute(f'SELECT {TEXT_EXPRESSION} FROM "texts" t WHERE t."id" = ?', (text_id,)).fetchone()
            if row is not None:
                found.append((text_id, row[0]))
    return found


def delete(cur: Any, ids: Iterable[int]) -> None:
    """Remove text rows (their grams are the caller's: :func:`readmodel.store.gramindex.delete`)."""
    cur.executemany('DELETE FROM "texts" WHERE "id" = ?', [(text_id,) for text_id in ids])
