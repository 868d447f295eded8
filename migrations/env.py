"""Alembic environment for the sessionq index.

Always run programmatically (``sessionq db ...`` or the daemon): the caller
passes an open SQLAlchemy connection in ``config.attributes["connection"]``.
"""

from __future__ import annotations

from alembic import context

import readmodel.store.postgres  # noqa: F401  - PostgreSQL DDL: integer columns as BIGINT
from readmodel.store.schema import FTS_PREFIXES, KNOWN_TABLES, SERVER_TABLES, metadata


def _include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    # FTS5 virtual tables and their shadow tables are managed by explicit DDL.
    if type_ == "table" and name and (name.startswith(FTS_PREFIXES) or name in SERVER_TABLES):
        return False
    return not (type_ == "table" and reflected and name not in KNOWN_TABLES)


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("sessionq migrations run only with a connection supplied by sessionq")
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,
        include_object=_include_object,
        compare_type=False,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline migrations are not supported; use `sessionq db upgrade`")
run_migrations_online()
