"""Each distinct document text stored once, and the substring gram index per distinct text.

Agent histories repeat texts (harness system and runtime-context messages,
tool outputs): the 160 MB benchmark root holds 101,230 documents of 1,641
distinct texts, the shared corpus 879 documents of 462.  In SQLite:

* ``texts(id, hash, length, text_z)`` holds every distinct stored text once
  (:mod:`readmodel.store.texts`: found by its hash, then compared, so equal
  texts share a row and a hash collision gets a row of its own), packed as
  schema 0016 packed each document's; indexes ``texts_hash``, ``texts_length``.
* ``document_rows`` names its text (``text_id``, index ``document_rows_text``)
  instead of holding ``length`` and ``text_z``; the ``documents`` view joins
  them back with the same columns, and its ``INSTEAD OF`` triggers are
  recreated (``INSERT`` finds or creates the text row).
* ``document_hashes`` is dropped: a text's hash is in ``texts`` and the
  documents holding it are under its id in ``document_rows_text``.
* ``document_grams`` is rebuilt with one row per text (rowid ``texts.id``).

``documents_fts`` is unchanged (its rows, docids and texts are the same).
The upgrade walks the documents :data:`CHUNK` at a time with a progress bar
when stderr is a terminal; no log is re-read.  PostgreSQL keeps its own
tables (docs/postgres.md): nothing to do there.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Final

from alembic import op

from readmodel.store.revisions import migration_progress

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

CHUNK: Final = 2_000

def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    cursor = op.get_bind().connection.driver_connection.cursor()
    try:
        with migration_progress("storing each distinct text once") as progress:
            _store_texts(cursor, progress)
        _rebuild_grams(cursor)
    finally:
        cursor.close()


def _store_texts(cursor: Any, progress: Callable[[int, int], None] | None) -> None:
    """Copy ``document_rows`` into the new layout, one ``texts`` row per distinct text."""
    from indexer import dictionary
    from readmodel.projection.texthash import text_hash
    from readmodel.store import texts
    from readmodel.store.schema import DOCUMENTS_VIEW_DDL

    dictionary.load(cursor)  # a new text row is packed with this index's dictionary, as its writer would
    total = cursor.execute('SELECT count(*) FROM "document_rows"').fetchone()[0]
    for ddl in texts.TEXTS_DDL:
        cursor.execute(ddl)
    cursor.execute(texts.DOCUMENT_ROWS_DDL.replace('"document_rows"', '"document_rows_0018"'))
    store = texts.TextStore()
    last, done = -1, 0
    while rows := cursor.execute(
        'SELECT "docid", "sid", "seq", "type", "time", "surface", "text" FROM "documents" WHERE "docid" > ? ORDER BY "docid" LIMIT ?',
        (last, CHUNK),
    ).fetchall():
        ids, _created = store.store(cursor, [(row[6], text_hash(row[6])) for row in rows])
        cursor.executemany('INSERT INTO "document_rows_0018" VALUES (?, ?, ?, ?, ?, ?, ?)', [(*row[:6], text_id) for row, text_id in zip(rows, ids)])
        last, done = rows[-1][0], done + len(rows)
        if progress is not None:
            progress(done, total)
    cursor.execute('DROP VIEW "documents"')  # its triggers go with it
    cursor.execute('DROP TABLE "document_rows"')
    cursor.execute('DROP TABLE IF EXISTS "document_hashes"')
    cursor.execute('ALTER TABLE "document_rows_0018" RENAME TO "document_rows"')
    cursor.execute(texts.DOCUMENT_ROWS_INDEX)
    cursor.execute(DOCUMENTS_VIEW_DDL)
    for ddl in texts.TRIGGERS_DDL:
        cursor.execute(ddl)


def _rebuild_grams(cursor: Any) -> None:
    """``document_grams`` again from the stored texts: one row per text, or (downgrade) per document."""
    from readmodel.store import gramindex

    cursor.execute(f'DROP TABLE IF EXISTS "{gramindex.TABLE}"')
    cursor.execute(gramindex.DDL)
    gramindex.rebuild(cursor)  # per text, or per document when "texts" is gone


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    # Schema 0016's storage of documents (this revision's down revision, 0017, kept it).
    old = importlib.import_module("migrations.versions.0016_compact_storage")
    cursor = op.get_bind().connection.driver_connection.cursor()
    try:
        cursor.execute(old.DOCUMENT_ROWS_DDL.replace('"document_rows"', '"document_rows_0017"'))
        cursor.execute(
            'INSERT INTO "document_rows_0017" SELECT d."docid", d."sid", d."seq", d."type", d."time", d."surface", t."length", t."text_z" '
            'FROM "document_rows" d JOIN "texts" t ON t."id" = d."text_id" ORDER BY d."docid"'
        )
        cursor.execute('CREATE TABLE "document_hashes" ("docid" INTEGER NOT NULL PRIMARY KEY, "hash" INTEGER NOT NULL)')
        cursor.execute('INSERT INTO "document_hashes" SELECT d."docid", t."hash" FROM "document_rows" d JOIN "texts" t ON t."id" = d."text_id" ORDER BY d."docid"')
        cursor.execute('CREATE INDEX "document_hashes_hash" ON "document_hashes" ("hash")')
        cursor.execute('DROP VIEW "documents"')
        cursor.execute('DROP TABLE "document_rows"')
        cursor.execute('DROP TABLE "texts"')
        cursor.execute('ALTER TABLE "document_rows_0017" RENAME TO "document_rows"')
        cursor.execute('CREATE INDEX "document_rows_length" ON "document_rows" ("length")')
        cursor.execute(old.DOCUMENTS_VIEW_DDL)
        for ddl in old.DOCUMENTS_TRIGGERS_DDL:
            cursor.execute(ddl)
        _rebuild_grams(cursor)
    finally:
        cursor.close()
