"""Initial index schema: sessions, events, raw event blocks, links, documents with FTS5.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "index_meta",
        sa.Column("singleton", sa.Integer, primary_key=True),
        sa.Column("identity", sa.Text, nullable=False),
        sa.Column("global_generation", sa.Integer, nullable=False),
        sa.Column("root", sa.Text),
        sa.Column("compression", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_reconcile_at", sa.Float),
        sa.Column("last_reconcile_seconds", sa.Float),
    )
    op.create_table(
        "sessions",
        sa.Column("sid", sa.Integer, primary_key=True),
        sa.Column("id", sa.Text, nullable=False, unique=True),
        sa.Column("path", sa.Text, nullable=False, unique=True),
        sa.Column("header_json", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.Float),
        sa.Column("id_key", sa.LargeBinary, nullable=False),
        sa.Column("cwd", sa.Text),
        sa.Column("parent_session", sa.Text),
        sa.Column("revision", sa.Text, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("resume", sa.LargeBinary),
        sa.Column("event_count", sa.Integer, nullable=False),
        sa.Column("stored_count", sa.Integer, nullable=False),
        sa.Column("synthetic_from", sa.Integer),
        sa.Column("tail_state", sa.Text, nullable=False),
        sa.Column("surface_nodes", sa.LargeBinary),
        sa.Column("title_seq", sa.Integer),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("error_code", sa.Text),
        sa.Column("error_message", sa.Text),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("indexed_at", sa.Float, nullable=False),
    )
    op.create_index("sessions_listing", "sessions", [sa.text("created_at DESC"), "id_key"])
    op.create_index("sessions_parent", "sessions", ["parent_session"])
    op.create_table(
        "events",
        sa.Column("sid", sa.Integer, sa.ForeignKey("sessions.sid", ondelete="CASCADE"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("time", sa.Integer),
        sa.Column("surface", sa.Integer, nullable=False),
        sa.Column("replaced_by", sa.Integer),
        sa.Column("sources", sa.LargeBinary),
        sa.Column("replaced", sa.LargeBinary),
        sa.Column("synthetic", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("sid", "seq"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "event_blocks",
        sa.Column("sid", sa.Integer, sa.ForeignKey("sessions.sid", ondelete="CASCADE"), nullable=False),
        sa.Column("first_seq", sa.Integer, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("synthetic", sa.Integer, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("sid", "first_seq"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "event_links",
        sa.Column("sid", sa.Integer, nullable=False),
        sa.Column("source_seq", sa.Integer, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("sid", "source_seq", "seq"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "documents",
        sa.Column("docid", sa.Integer, primary_key=True),
        sa.Column("sid", sa.Integer, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("time", sa.Integer),
        sa.Column("surface", sa.Integer, nullable=False),
        sa.Column("length", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
    )
    op.create_table(
        "layout_problems",
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("observed_at", sa.Float, nullable=False),
    )
    # FTS5 has no SQLAlchemy construct: external content over documents.text.
    # SQLite only: PostgreSQL never tokenises (docs/postgres.md).
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        "CREATE VIRTUAL TABLE documents_fts USING fts5("
        "text, content='documents', content_rowid='docid', tokenize='unicode61')"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS documents_fts")
    for table in ("layout_problems", "documents", "event_links", "event_blocks", "events", "sessions", "index_meta"):
        op.drop_table(table)
