"""A random per-index secret that signs search cursors.

Cursors used to be signed with a key derived from the index identity, which
every cursor carries in its payload, so anyone holding one cursor could forge
others.  ``index_meta.cursor_secret`` holds 32 random bytes that never leave
the index file; existing indexes get a fresh secret here, which invalidates
the cursors they handed out before (a cursor is a short-lived paging token).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # SQLite adds a column only as nullable (or with a default): add it, fill the
    # single row, then make it NOT NULL by recreating the one-row table.
    with op.batch_alter_table("index_meta", recreate="never") as batch:
        batch.add_column(sa.Column("cursor_secret", sa.LargeBinary))
    op.get_bind().execute(sa.text("UPDATE index_meta SET cursor_secret = :secret"), {"secret": secrets.token_bytes(32)})
    with op.batch_alter_table("index_meta", recreate="always") as batch:
        batch.alter_column("cursor_secret", existing_type=sa.LargeBinary, nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("index_meta") as batch:
        batch.drop_column("cursor_secret")
