"""PostgreSQL's search tables: ``terms``, ``postings`` and ``document_gram_keys``.

PostgreSQL never tokenises (docs/postgres.md): the term dictionary (hash →
bytes, with ``terms_prefix`` on its first bytes for prefix queries), each document's postings (term hash, docid, tf, every position) with
the indexes the ranking reads (``postings_top``: a term's documents by
descending tf; ``postings_docid``: a document's rows, for deletes), and each
document's substring gram keys in a ``bigint[]`` with a GIN index
(:mod:`readmodel.search.serverterms`).  The upgrade computes them from the
stored documents (no log is re-read).  On SQLite nothing changes: FTS5's
``documents_fts`` and ``document_grams`` hold the same information.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

from readmodel.search import serverterms

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return
    for statement in serverterms.DDL:
        op.execute(statement)
    cursor = bind.connection.driver_connection.cursor()
    try:
        serverterms.backfill(cursor, texts=False)  # the per-text tables come with 0020
    finally:
        cursor.close()


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    for table in reversed(serverterms.TABLES):
        op.execute(f'DROP TABLE IF EXISTS "{table}"')
