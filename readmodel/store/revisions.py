"""Schema revisions: which Alembic revision an index is at, and upgrading it.

Alembic is imported only where migrations run or the head is asked for, so a
reader that merely compares the stamped revision never pays for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection

MIGRATIONS_DIR: Final = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(conn: Connection | None = None, *, source: str | None = None) -> Any:
    # Alembic is imported only where migrations run: readers never pay for it.
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if conn is not None:
        config.attributes["connection"] = conn
    if source is not None:
        config.attributes["source"] = source  # migration 0012 labels existing sessions with it
    return config


def head_revision() -> str:
    """The newest migration; equals :data:`readmodel.store.schema.SCHEMA_REVISION` (a test pins it)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head() or ""


def current_revision(conn: Connection) -> str | None:
    """The schema revision stamped in the database (``None`` before any migration)."""
    if conn.dialect.name != "sqlite":
        from sqlalchemy import inspect

        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    has_table = conn.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='alembic_version'"
    ).first()
    if has_table is None:
        return None
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def upgrade(conn: Connection, *, source: str | None = None) -> None:
    """Bring the schema to the head revision (inside the caller's transaction).

    ``source`` labels the sessions of an index from before sources (migration
    0012); ``None``: this host's name.
    """
    from alembic import command

    command.upgrade(alembic_config(conn, source=source), "head")


@contextmanager
def migration_progress(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar titled ``label`` on stderr for a migration's data pass, only when
    stderr is a terminal; it yields ``update(done, total)`` (``None`` elsewhere)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn(f"[bold]{label}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("documents"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )
    task = bar.add_task(label, total=None)
    with bar:
        yield lambda done, total: bar.update(task, completed=done, total=total)
