"""Surface order and tool-result digests per event, so a tail append is O(new events).

``events.surface_key`` orders the current surface (an appended node's key is
its seq; a replacement inherits the key of the first node it removed, which is
exactly the position the reference gives it), and ``events.digest`` keeps the
comparison fingerprint of each ``tool/result`` for the rewrite rule.  A partial
index over current nodes serves ``readSurface`` and restores the fold state on
demand; ``sessions.surface_nodes`` is no longer written.

Existing rows lack the new values, so every session is re-read: its revision is
cleared, which makes the next reconcile reload it from byte 0.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("events", recreate="never") as batch:
        batch.add_column(sa.Column("surface_key", sa.Integer))
        batch.add_column(sa.Column("digest", sa.LargeBinary))
    op.create_index("events_surface", "events", ["sid", "surface_key"], sqlite_where=sa.text("surface = 1"), postgresql_where=sa.text("surface = 1"))
    op.execute("UPDATE sessions SET revision = '', resume = NULL, surface_nodes = NULL")


def downgrade() -> None:
    op.drop_index("events_surface", table_name="events")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("digest")
        batch.drop_column("surface_key")
    op.execute("UPDATE sessions SET revision = '', resume = NULL")
