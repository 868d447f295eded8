"""Sources: which indexer (host) each session was indexed by.

Adds ``sessions.source`` (with the index ``sessions_source``),
``layout_problems.source``, ``index_meta.next_sid`` (session ids handed out
to writers ahead of their transactions, so daemons of different sources never
allocate the same one) and the ``sources`` table (one row per source: its
root, compression, last reconcile and generation counter).

Existing rows are labelled with the source the upgrading command names
(``config.attributes["source"]``: ``sessionq index --upgrade --source NAME``
or ``sessionq db upgrade --source NAME``), else this host's name at upgrade
time (:func:`readmodel.store.sources.default_source`).

Revision ID: 0012
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from readmodel.store.sources import check_source, default_source

revision = "0012"
down_revision = "0007"
branch_labels = None
depends_on = None


def _upgrading_source() -> str:
    named = context.config.attributes.get("source")
    return check_source(named) if named else default_source()


def upgrade() -> None:
    with op.batch_alter_table("sessions", recreate="never") as batch:
        batch.add_column(sa.Column("source", sa.Text))
    op.create_index("sessions_source", "sessions", ["source", "path"])
    with op.batch_alter_table("layout_problems", recreate="never") as batch:
        batch.add_column(sa.Column("source", sa.Text))
    with op.batch_alter_table("index_meta", recreate="never") as batch:
        batch.add_column(sa.Column("next_sid", sa.Integer))
    op.create_table(
        "sources",
        sa.Column("source", sa.Text, primary_key=True),
        sa.Column("root", sa.Text),
        sa.Column("compression", sa.Text),
        sa.Column("first_seen_at", sa.Float, nullable=False),
        sa.Column("last_reconcile_at", sa.Float),
        sa.Column("last_reconcile_seconds", sa.Float),
        sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
    )
    bind = op.get_bind()
    has_rows = bind.execute(sa.text("SELECT 1 FROM sessions LIMIT 1")).first() is not None
    meta = bind.execute(sa.text("SELECT root, compression, created_at, last_reconcile_at, last_reconcile_seconds FROM index_meta")).first()
    if not has_rows and (meta is None or meta[0] is None):
        return  # a fresh index: the first daemon registers its own source
    source = _upgrading_source()
    bind.execute(sa.text("UPDATE sessions SET source = :source WHERE source IS NULL"), {"source": source})
    bind.execute(sa.text("UPDATE layout_problems SET source = :source WHERE source IS NULL"), {"source": source})
    if meta is not None:
        bind.execute(
            sa.text(
                "INSERT INTO sources (source, root, compression, first_seen_at, last_reconcile_at, last_reconcile_seconds, generation) "
                "VALUES (:source, :root, :compression, :created, :last, :seconds, 0)"
            ),
            {"source": source, "root": meta[0], "compression": meta[1], "created": meta[2], "last": meta[3], "seconds": meta[4]},
        )


def downgrade() -> None:
    # SQLite drops these columns in place (3.35+): recreating ``sessions`` in batch
    # mode would drop the old table, and its ON DELETE CASCADE would empty ``events``.
    op.drop_table("sources")
    op.drop_index("sessions_source", table_name="sessions")
    for table, column in (("index_meta", "next_sid"), ("layout_problems", "source"), ("sessions", "source")):
        op.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
