"""Covering index for the session listing: newest first, then id collation, with the header.

Listing ten thousand sessions then reads one compact index instead of visiting
every (wide) session row.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("sessions_listing", table_name="sessions")
    op.create_index("sessions_listing", "sessions", [sa.text("created_at DESC"), "id_key", "header_json"])


def downgrade() -> None:
    op.drop_index("sessions_listing", table_name="sessions")
    op.create_index("sessions_listing", "sessions", [sa.text("created_at DESC"), "id_key"])
