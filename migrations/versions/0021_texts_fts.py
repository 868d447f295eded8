"""The word index per distinct text: ``texts_fts`` replaces ``documents_fts``.

Since schema 0018 each distinct text is stored once (``texts``), but the FTS5
word index still tokenised and stored every *document*: on the 160 MB
benchmark root 63.5 MB of FTS5 for texts repeated about sixty times over.
Matching, span counts and ``highlight()`` depend on the text alone, so the
index now has one row per text (rowid ``texts.id``), external content over
the view ``text_contents`` (each text decoded), and search reaches the
documents through ``document_rows_text`` (:mod:`readmodel.store.textsearch`).

The upgrade creates the view and the table, fills it from ``texts`` (FTS5
``rebuild``; no log is re-read) and drops ``documents_fts``.  PostgreSQL has
no FTS5 table (docs/postgres.md): nothing to do there.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02
"""

from __future__ import annotations

from typing import Final

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

# Schema 0017's per-document table, for the downgrade.
_DOCUMENTS_FTS: Final = (
    "CREATE VIRTUAL TABLE documents_fts USING fts5("
    "text, content='documents', content_rowid='docid', tokenize='unicode61', prefix='1 2')"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    from readmodel.store import textsearch

    for ddl in textsearch.DDL:
        op.execute(ddl)
    cursor = op.get_bind().connection.driver_connection.cursor()
    try:
        textsearch.rebuild(cursor)  # reads text_contents: needs sessionq_text, which every sessionq connection has
    finally:
        cursor.close()
    op.execute("DROP TABLE IF EXISTS documents_fts")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(_DOCUMENTS_FTS)
    op.execute("INSERT INTO documents_fts(documents_fts) VALUES('rebuild')")
    op.execute("DROP TABLE IF EXISTS texts_fts")
    op.execute('DROP VIEW IF EXISTS "text_contents"')
