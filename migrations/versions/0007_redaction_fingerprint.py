"""What the documents were derived with: ``index_meta.redaction``.

The fingerprint of the secret-redaction rule set and policy the stored
documents were derived with (:func:`readmodel.projection.secrets.index_fingerprint`).
It starts out NULL, which matches no fingerprint: the next full pass of the
indexer re-derives every session's documents (an index built before
redaction existed may hold secrets) and then stores the fingerprint.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("index_meta", recreate="never") as batch:
        batch.add_column(sa.Column("redaction", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("index_meta") as batch:
        batch.drop_column("redaction")
