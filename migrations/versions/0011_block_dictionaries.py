"""zstd dictionaries for raw event blocks: ``block_dictionaries``.

A cold build of a large root trains one dictionary on samples of its logs and
compresses every raw block with it (a block's zstd frame header names its
dictionary, so blocks with and without one mix).  Existing blocks are left as
they are: they stay readable, and an index built before this revision shrinks
only when it is rebuilt (``sessionq status`` says so).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "block_dictionaries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("block_dictionaries")
