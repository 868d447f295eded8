"""Compact storage for the bulk of a log: runs of plain events, spans of provenance links.

``event_runs`` holds runs of consecutive plain events (chunks, steps, request
headers, tool calls, ...: log-only, without provenance) as one row each instead
of one ``events`` row per event, and an ``event_links`` row now covers ``span``
consecutive cited seqs.  Both only change what the writer stores from now on:
existing rows (one event per row, ``span`` 1) keep their meaning, so no log
needs to be re-read.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_runs",
        sa.Column("sid", sa.Integer, sa.ForeignKey("sessions.sid", ondelete="CASCADE"), nullable=False),
        sa.Column("first_seq", sa.Integer, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("types", sa.LargeBinary, nullable=False),
        sa.Column("times", sa.LargeBinary, nullable=False),
        sa.Column("synthetic", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("sid", "first_seq"),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("event_links", recreate="never") as batch:
        batch.add_column(sa.Column("span", sa.Integer, nullable=False, server_default="1"))


def downgrade() -> None:
    # Older code reads neither runs nor spans: drop them and re-read every log.
    op.drop_table("event_runs")
    with op.batch_alter_table("event_links") as batch:
        batch.drop_column("span")
    op.execute("UPDATE sessions SET revision = '', resume = NULL")
