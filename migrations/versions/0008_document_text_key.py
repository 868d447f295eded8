"""An index on each document's text key, for boilerplate demotion in the words and substring modes.

``documents_text_key`` indexes ``(length, substr(text, 1, 32))`` — an
expression index, so SQLite maintains it in the transaction that writes a
document (the indexer is unchanged, and incremental == cold by construction).
A scoped words or substring search looks a matching text up through it to
learn whether at least three sessions hold that exact text
(:mod:`readmodel.search.sqlitemodes`).  Building it for an existing index is
one ``CREATE INDEX`` over ``documents``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute('CREATE INDEX IF NOT EXISTS "documents_text_key" ON "documents" ("length", substr("text", 1, 32))')


def downgrade() -> None:
    op.execute('DROP INDEX IF EXISTS "documents_text_key"')
