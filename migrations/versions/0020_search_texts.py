"""PostgreSQL's per-text search tables: ``search_texts`` and ``text_postings``.

The ``words`` and ``substring`` rankings depend on a document's text alone
(strength, length, the boilerplate verdict), and texts repeat across
documents, so PostgreSQL keeps the search rows once per distinct text too
(:mod:`readmodel.search.serverterms`): ``search_texts`` (the text hash of
``document_hashes``, the length, the gram keys with a GIN index) and
``text_postings`` (term, text hash, tf, positions), plus
``document_hashes_walk`` on ``document_hashes (hash, docid)``, which the
boilerplate verdict walks session by session.  The texts-first ranking
(:mod:`readmodel.search.pgtexts`) reads them.  The upgrade computes them from
one stored document per distinct text (no log is re-read).  On SQLite nothing
changes.

Revision ID: 0020
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

from readmodel.search import serverterms

revision = "0020"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return
    for statement in serverterms.TEXT_DDL:
        op.execute(statement)
    cursor = bind.connection.driver_connection.cursor()
    try:
        serverterms.backfill_texts(cursor)
    finally:
        cursor.close()


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    op.execute('DROP INDEX IF EXISTS "document_hashes_walk"')
    for table in reversed(serverterms.TEXT_TABLES):
        op.execute(f'DROP TABLE IF EXISTS "{table}"')
