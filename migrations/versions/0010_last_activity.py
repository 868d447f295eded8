"""A maintained last activity per session: ``sessions.last_activity``.

The time of the session's last event, written by the indexer with the events
(:mod:`readmodel.store.activity`), so ``listWorkspaces`` and the session
summaries read one column instead of seeking every session's last event; the
index ``sessions_activity`` (``cwd``, ``last_activity``, ``id``) lets
``listWorkspaces`` group the sessions without reading their rows.
Existing indexes are filled from their stored events, with the same function
the indexer uses.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from readmodel.store.activity import backfill_last_activity

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions", recreate="never") as batch:
        batch.add_column(sa.Column("last_activity", sa.Integer))
    backfill_last_activity(op.get_bind())
    # listWorkspaces reads only this narrow index, never the wide session rows.
    op.create_index("sessions_activity", "sessions", ["cwd", "last_activity", "id"])


def downgrade() -> None:
    op.drop_index("sessions_activity", table_name="sessions")
    # ALTER TABLE … DROP COLUMN (SQLite 3.35+): recreating the table would cascade to the events.
    with op.batch_alter_table("sessions", recreate="never") as batch:
        batch.drop_column("last_activity")
