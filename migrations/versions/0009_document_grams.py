"""The substring candidate index: ``document_grams`` and ``index_meta.grams``.

``document_grams`` is a contentless ``detail=none`` FTS5 table holding each
document's character grams (:mod:`readmodel.store.gramindex`);
``index_meta.grams`` records the gram scheme it was built with.  The upgrade
builds it from the stored documents (a few seconds per 100,000 documents),
showing a progress bar when stderr is a terminal; no log is re-read.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from readmodel.store import gramindex
from readmodel.store.revisions import migration_progress

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("index_meta", recreate="never") as batch:
        batch.add_column(sa.Column("grams", sa.Text))
    if op.get_bind().dialect.name != "sqlite":
        return  # the gram index is FTS5 here; PostgreSQL keeps grams as bigint[] with GIN (docs/postgres.md)
    op.execute(gramindex.DDL)
    cursor = op.get_bind().connection.driver_connection.cursor()
    try:
        with migration_progress("building the substring index") as progress:
            gramindex.rebuild(cursor, progress)
    finally:
        cursor.close()


def downgrade() -> None:
    op.execute(f"DROP TABLE IF EXISTS {gramindex.TABLE}")
    with op.batch_alter_table("index_meta") as batch:
        batch.drop_column("grams")
