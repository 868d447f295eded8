"""Prefix indexes of one and two characters in ``documents_fts``, for the words search mode.

A ``words`` query's last token matches as a prefix (search as you type), and FTS5
answers a prefix term by merging the doclists of every token it expands to
(``c``* — thousands of tokens) at each query, over the whole index even when the
search is bounded to one session's rowids.  ``prefix='1 2'`` keeps those merged
doclists for one- and two-character prefixes, so such a term reads one doclist
(longer prefixes expand to few tokens).  Matching, highlighting and every phrase
search are unchanged: the option only adds index entries.

The upgrade recreates the external-content table with the option and rebuilds it
from ``documents`` (the stored, redacted texts, read through the view of schema 0016; no log is re-read).  PostgreSQL
has no FTS5 table (docs/postgres.md): nothing to do there.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

from typing import Final

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_DDL: Final = "CREATE VIRTUAL TABLE documents_fts USING fts5(text, content='documents', content_rowid='docid', tokenize='unicode61'{prefix})"


def _recreate(prefix: str) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("DROP TABLE IF EXISTS documents_fts")
    op.execute(_DDL.format(prefix=prefix))
    op.execute("INSERT INTO documents_fts(documents_fts) VALUES('rebuild')")


def upgrade() -> None:
    _recreate(", prefix='1 2'")


def downgrade() -> None:
    _recreate("")
