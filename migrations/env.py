"""Alembic environment for the sessionq index.

Always run programmatically (``sessionq db ...`` or the daemon): the caller
passes an open SQLAlchemy connection in ``config.attributes["connection"]``.
"""

from __future__ import annotations

from alembic import context

import readmodel.store.postgres  # noqa: F401  - PostgreSQL DDL: integer columns as BIGINT
from readmodel.store.schema import metadata
from readmodel.store.schemacheck import include_object


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("sessionq migrations run only with a connection supplied by sessionq")
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,
        include_object=include_object,
        compare_type=False,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline migrations are not supported; use `sessionq db upgrade`")
run_migrations_online()
