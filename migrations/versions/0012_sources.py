"""Sources: which indexer (host) each session was indexed by.

Adds ``sessions.source`` (with the index ``sessions_source``),
``layout_problems.source`` (the table is rebuilt keyed by ``(source, path)``:
two hosts may find problems at the same path), ``index_meta.next_sid`` (session ids handed out
to writers ahead of their transactions, so daemons of different sources never
allocate the same one) and the ``sources`` table (one row per source: its
root, compression, last reconcile and generation counter).

Existing rows are labelled with the source the upgrading command names
(``config.attributes["source"]``: ``sessionq index --upgrade --source NAME``
or ``sessionq db upgrade --source NAME``), else this host's name at upgrade
time (:func:`readmodel.store.sources.default_source`).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from readmodel.store.sources import check_source, default_source

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def _upgrading_source() -> str:
    named = context.config.attributes.get("source")
    return check_source(named) if named else default_source()


def upgrade() -> None:
    with op.batch_alter_table("sessions", recreate="never") as batch:
        batch.add_column(sa.Column("source", sa.Text))
    op.create_index("sessions_source", "sessions", ["source", "path"])
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
    has_problems = bind.execute(sa.text("SELECT 1 FROM layout_problems LIMIT 1")).first() is not None
    meta = bind.execute(sa.text("SELECT root, compression, created_at, last_reconcile_at, last_reconcile_seconds FROM index_meta")).first()
    labelled = has_rows or has_problems or (meta is not None and meta[0] is not None)
    source = _upgrading_source() if labelled else ""
    _rebuild_layout_problems(source)
    if not labelled:
        return  # a fresh index: the first daemon registers its own source
    bind.execute(sa.text("UPDATE sessions SET source = :source WHERE source IS NULL"), {"source": source})
    if meta is not None:
        bind.execute(
            sa.text(
                "INSERT INTO sources (source, root, compression, first_seen_at, last_reconcile_at, last_reconcile_seconds, generation) "
                "VALUES (:source, :root, :compression, :created, :last, :seconds, 0)"
            ),
            {"source": source, "root": meta[0], "compression": meta[1], "created": meta[2], "last": meta[3], "seconds": meta[4]},
        )


def _rebuild_layout_problems(source: str) -> None:
    """``layout_problems`` keyed by ``(source, path)``, its rows labelled ``source`` (a small table: copied)."""
    op.create_table(
        "layout_problems_0012",
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("observed_at", sa.Float, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("source", "path"),
    )
    op.get_bind().execute(
        sa.text(
            "INSERT INTO layout_problems_0012 (path, kind, message, observed_at, source) "
            "SELECT path, kind, message, observed_at, :source FROM layout_problems"
        ),
        {"source": source},
    )
    op.drop_table("layout_problems")
    op.rename_table("layout_problems_0012", "layout_problems")


def downgrade() -> None:
    # SQLite drops these columns in place (3.35+): recreating ``sessions`` in batch
    # mode would drop the old table, and its ON DELETE CASCADE would empty ``events``.
    op.drop_table("sources")
    op.drop_index("sessions_source", table_name="sessions")
    for table, column in (("index_meta", "next_sid"), ("sessions", "source")):
        op.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
    op.create_table(
        "layout_problems_0007",
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("observed_at", sa.Float, nullable=False),
    )
    op.execute(
        "INSERT INTO layout_problems_0007 (path, kind, message, observed_at) "
        "SELECT path, min(kind), min(message), min(observed_at) FROM layout_problems GROUP BY path"
    )
    op.drop_table("layout_problems")
    op.rename_table("layout_problems_0007", "layout_problems")
