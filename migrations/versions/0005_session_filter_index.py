"""Covering index for search's session filters.

A filtered search selects its eligible sessions once (``cwd``, ``parent``,
``created-at`` and ``id`` filters over sessions whose status is ``ok``); with
every column it reads in one narrow index it never visits the wide session rows,
whose header JSON comes before those columns.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("sessions_filters", "sessions", ["cwd", "status", "created_at", "parent_session", "id"])


def downgrade() -> None:
    op.drop_index("sessions_filters", table_name="sessions")
