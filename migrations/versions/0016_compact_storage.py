"""A smaller SQLite index: documents' text compressed behind a view, raw blocks in a rowid table.

Three changes, measured on the 160 MB benchmark root (README, issue 21):

* ``documents`` becomes a view over ``document_rows``, whose ``text_z``
  holds each text compressed with the index's block dictionary
  (:mod:`readmodel.store.doctext`); the view's ``text`` is decoded by
  ``sessionq_text(text_z)``, so readers and FTS5's external content read
  the same columns as before, and ``INSTEAD OF`` triggers take the writers'
  unchanged statements (``sessionq_pack`` stores the text).  The upgrade packs every stored text,
  :data:`CHUNK` documents at a time, with a progress bar when stderr is a
  terminal; no log is re-read.
* ``documents_text_key`` (migration 0008, an expression index on the text) is
  dropped: the search modes look copies of a text up by its hash
  (``document_hashes``, migration 0013), and lengths through
  ``document_rows_length``.
* ``event_blocks`` is rebuilt as a rowid table with the same columns and key.
  A ``WITHOUT ROWID`` table is a b-tree of index pages, where a row keeps at
  most about a quarter of a page and spills the rest of a block (median 1.4 KB
  compressed) to overflow pages of its own: a third of its pages were empty.

* ``sessions.id_key`` is recomputed in the compact encoding of
  :func:`readmodel.store.rowkeys.id_sort_key` (a UUID's key: 555 bytes
  before, 159 after; the listing index holds it too).

PostgreSQL has no FTS5 and no page layout of this kind: there
``documents_text_key`` is dropped and ``id_key`` recomputed.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import sqlalchemy as sa
from alembic import op

from readmodel.store.revisions import migration_progress

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

CHUNK: Final = 2_000

DOCUMENT_ROWS_DDL: Final = (
    'CREATE TABLE "document_rows" ("docid" INTEGER NOT NULL PRIMARY KEY, "sid" INTEGER NOT NULL, "seq" INTEGER NOT NULL, '
    '"type" TEXT NOT NULL, "time" INTEGER, "surface" INTEGER NOT NULL, "length" INTEGER NOT NULL, "text_z" BLOB NOT NULL)'
)
DOCUMENTS_VIEW_DDL: Final = (
    'CREATE VIEW "documents" AS SELECT "docid", "sid", "seq", "type", "time", "surface", "length", '
    'CASE typeof("text_z") WHEN \'blob\' THEN CAST(sessionq_text("text_z") AS TEXT) ELSE "text_z" END AS "text" '
    'FROM "document_rows"'
)
# Writers keep writing "documents" (PostgreSQL's table, SQLite's view): these store a row's text packed.
DOCUMENTS_TRIGGERS_DDL: Final = (
    'CREATE TRIGGER "documents_insert" INSTEAD OF INSERT ON "documents" BEGIN '
    'INSERT INTO "document_rows" ("docid", "sid", "seq", "type", "time", "surface", "length", "text_z") '
    'VALUES (NEW."docid", NEW."sid", NEW."seq", NEW."type", NEW."time", NEW."surface", NEW."length", sessionq_pack(NEW."text")); END',
    'CREATE TRIGGER "documents_update" INSTEAD OF UPDATE ON "documents" BEGIN '
    'UPDATE "document_rows" SET "docid" = NEW."docid", "sid" = NEW."sid", "seq" = NEW."seq", "type" = NEW."type", '
    '"time" = NEW."time", "surface" = NEW."surface", "length" = NEW."length", '
    '"text_z" = CASE WHEN NEW."text" IS OLD."text" THEN "text_z" ELSE sessionq_pack(NEW."text") END '
    'WHERE "docid" = OLD."docid"; END',
    'CREATE TRIGGER "documents_delete" INSTEAD OF DELETE ON "documents" BEGIN '
    'DELETE FROM "document_rows" WHERE "docid" = OLD."docid"; END',
)
EVENT_BLOCKS_DDL: Final = (
    'CREATE TABLE "{name}" ("sid" INTEGER NOT NULL, "first_seq" INTEGER NOT NULL, "count" INTEGER NOT NULL, '
    '"synthetic" INTEGER NOT NULL, "data" BLOB NOT NULL, PRIMARY KEY ("sid", "first_seq"), '
    'FOREIGN KEY ("sid") REFERENCES "sessions" ("sid") ON DELETE CASCADE)'
)


def upgrade() -> None:
    from readmodel.store.rowkeys import id_sort_key

    op.execute('DROP INDEX IF EXISTS "documents_text_key"')
    _rekey_sessions(id_sort_key)
    if op.get_bind().dialect.name != "sqlite":
        return
    cursor = op.get_bind().connection.driver_connection.cursor()
    try:
        _rebuild_event_blocks(cursor)
        with migration_progress("compressing document texts") as progress:
            _pack_documents(cursor, progress)
    finally:
        cursor.close()


def _rekey_sessions(key: Callable[[str], bytes]) -> None:
    """Recompute every session's ``id_key`` with ``key`` (sessions are few: one read, chunked writes)."""
    bind = op.get_bind()
    rows = bind.execute(sa.text('SELECT "sid", "id" FROM "sessions"')).fetchall()
    update = sa.text('UPDATE "sessions" SET "id_key" = :key WHERE "sid" = :sid')
    for start in range(0, len(rows), CHUNK):
        bind.execute(update, [{"key": key(session_id), "sid": sid} for sid, session_id in rows[start : start + CHUNK]])


def _five_byte_key(session_id: str) -> bytes:
    """``id_key`` as before schema 0016: each weight + 1 in five bytes, levels ended by five zero bytes."""
    import unicodedata

    from readmodel.projection.collation import locale_compare_key

    levels = locale_compare_key(unicodedata.normalize("NFD", session_id))
    return b"".join(b"".join((weight + 1).to_bytes(5, "big") for weight in level) + bytes(5) for level in levels)


def _rebuild_event_blocks(cursor: object) -> None:
    cursor.execute(EVENT_BLOCKS_DDL.format(name="event_blocks_rowid"))  # type: ignore[attr-defined]
    cursor.execute('INSERT INTO "event_blocks_rowid" SELECT "sid", "first_seq", "count", "synthetic", "data" FROM "event_blocks" ORDER BY "sid", "first_seq"')  # type: ignore[attr-defined]
    cursor.execute('DROP TABLE "event_blocks"')  # type: ignore[attr-defined]
    cursor.execute('ALTER TABLE "event_blocks_rowid" RENAME TO "event_blocks"')  # type: ignore[attr-defined]


def _pack_documents(cursor: object, progress: Callable[[int, int], None] | None) -> None:
    """Copy ``documents`` into ``document_rows`` with packed texts, then put the view in its place."""
    from indexer import dictionary
    from readmodel.store.doctext import pack_text

    dictionary.load(cursor)  # pack with this index's dictionary (or none), as its writer would
    total = cursor.execute('SELECT count(*) FROM "documents"').fetchone()[0]  # type: ignore[attr-defined]
    cursor.execute(DOCUMENT_ROWS_DDL)  # type: ignore[attr-defined]
    last, done = -1, 0
    while True:
        rows = cursor.execute(  # type: ignore[attr-defined]
            'SELECT "docid", "sid", "seq", "type", "time", "surface", "length", "text" FROM "documents" WHERE "docid" > ? ORDER BY "docid" LIMIT ?',
            (last, CHUNK),
        ).fetchall()
        if not rows:
            break
        cursor.executemany(  # type: ignore[attr-defined]
            'INSERT INTO "document_rows" VALUES (?, ?, ?, ?, ?, ?, ?, ?)', [(*row[:-1], pack_text(row[-1])) for row in rows]
        )
        last, done = rows[-1][0], done + len(rows)
        if progress is not None:
            progress(done, total)
    cursor.execute('DROP TABLE "documents"')  # type: ignore[attr-defined]
    cursor.execute(DOCUMENTS_VIEW_DDL)  # type: ignore[attr-defined]
    for ddl in DOCUMENTS_TRIGGERS_DDL:
        cursor.execute(ddl)  # type: ignore[attr-defined]
    cursor.execute('CREATE INDEX "document_rows_length" ON "document_rows" ("length")')  # type: ignore[attr-defined]


def downgrade() -> None:
    _rekey_sessions(_five_byte_key)
    if op.get_bind().dialect.name != "sqlite":
        op.execute('CREATE INDEX IF NOT EXISTS "documents_text_key" ON "documents" ("length", substr("text", 1, 32))')
        return
    op.execute(
        'CREATE TABLE "documents_plain" ("docid" INTEGER NOT NULL PRIMARY KEY, "sid" INTEGER NOT NULL, "seq" INTEGER NOT NULL, '
        '"type" TEXT NOT NULL, "time" INTEGER, "surface" INTEGER NOT NULL, "length" INTEGER NOT NULL, "text" TEXT NOT NULL)'
    )
    op.execute('INSERT INTO "documents_plain" SELECT * FROM "documents"')
    op.execute('DROP VIEW "documents"')
    op.execute('DROP TABLE "document_rows"')
    op.execute('ALTER TABLE "documents_plain" RENAME TO "documents"')
    op.execute('CREATE INDEX IF NOT EXISTS "documents_text_key" ON "documents" ("length", substr("text", 1, 32))')
