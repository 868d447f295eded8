"""Each document's text hash, for the boilerplate verdict of the words and substring search modes.

``document_hashes(docid, hash)`` holds
:func:`readmodel.projection.texthash.text_hash` of every stored document's
text, indexed by hash (``document_hashes_hash``): the sessions holding a text
are the docids under its hash.  The indexer writes a document's row in the
same transaction as the document and deletes it with the document, so
incremental and cold builds agree.  The upgrade hashes the stored documents
(no log is re-read), :data:`CHUNK` at a time.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

from typing import Final

import sqlalchemy as sa
from alembic import op

from readmodel.projection.texthash import text_hash

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

CHUNK: Final = 2_000


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        # PostgreSQL (phase 1 of issue 18: the schema only): the table from the
        # models (integers as BIGINT there) and a portable backfill.
        op.create_table(
            "document_hashes",
            sa.Column("docid", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("hash", sa.Integer, nullable=False),
        )
        op.create_index("document_hashes_hash", "document_hashes", ["hash"])
        select = sa.text('SELECT "docid", "text" FROM "documents" WHERE "docid" > :last ORDER BY "docid" LIMIT :chunk')
        insert = sa.text('INSERT INTO "document_hashes" ("docid", "hash") VALUES (:docid, :hash)')
        last = -1
        while rows := bind.execute(select, {"last": last, "chunk": CHUNK}).fetchall():
            bind.execute(insert, [{"docid": docid, "hash": text_hash(text)} for docid, text in rows])
            last = rows[-1][0]
        return
    op.execute('CREATE TABLE IF NOT EXISTS "document_hashes" ("docid" INTEGER NOT NULL PRIMARY KEY, "hash" INTEGER NOT NULL)')
    op.execute('CREATE INDEX IF NOT EXISTS "document_hashes_hash" ON "document_hashes" ("hash")')
    cursor = bind.connection.driver_connection.cursor()
    try:
        last = -1
        while True:
            rows = cursor.execute('SELECT "docid", "text" FROM "documents" WHERE "docid" > ? ORDER BY "docid" LIMIT ?', (last, CHUNK)).fetchall()
            if not rows:
                break
            cursor.executemany('INSERT OR REPLACE INTO "document_hashes" ("docid", "hash") VALUES (?, ?)', [(docid, text_hash(text)) for docid, text in rows])
            last = rows[-1][0]
    finally:
        cursor.close()


def downgrade() -> None:
    op.execute('DROP TABLE IF EXISTS "document_hashes"')
