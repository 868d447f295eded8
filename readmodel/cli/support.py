"""CLI plumbing shared by every ``sessionq`` command (read side and write side).

Lives in :mod:`readmodel` so that both :mod:`readmodel.cli.reads` and
:mod:`indexer.cli` can use it (``readmodel`` never imports ``indexer``).

Exit status contract (interface.md): 0 success; 2 a query error (with
``--json`` the object ``{"error": {"code", "message"}}`` on stdout); 1 anything
else, including an index that cannot be used (``SESSION_QUERY_INDEX_FAILED``:
missing, a directory, not a database, damaged; one plain line, and the error
object with ``--json``).  No traceback unless the root ``--debug`` flag is given.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, Final, TypeVar

import click

from readmodel.core.errors import SessionQueryError
from readmodel.core.jsonout import encode_json

F = TypeVar("F", bound=Callable[..., Any])
INDEX_FAILED: Final = "SESSION_QUERY_INDEX_FAILED"


def examples(*lines: str) -> str:
    """A click epilog: ``Examples:`` then one command per line, kept as written."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def default_db() -> str:
    """``$SESSIONQ_DB``, else ``$XDG_DATA_HOME/sessionq/index.db``."""
    if os.environ.get("SESSIONQ_DB"):
        return os.environ["SESSIONQ_DB"]
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return str(data_home / "sessionq" / "index.db")


def dsh_home() -> str:
    """The harness's home: ``$DSH_HOME``, else ``~/.dsh``."""
    return os.environ.get("DSH_HOME") or str(Path.home() / ".dsh")


def default_root() -> str:
    """The log root every command defaults to: ``$SESSIONQ_ROOT``, else ``$DSH_HOME/sessions``."""
    return os.environ.get("SESSIONQ_ROOT") or os.path.join(dsh_home(), "sessions")


def default_attachments() -> str:
    """The attachment store: ``$SESSIONQ_ATTACHMENTS``, else ``$DSH_HOME/attachments/v1``."""
    return os.environ.get("SESSIONQ_ATTACHMENTS") or os.path.join(dsh_home(), "attachments", "v1")


def emit_json(value: Any) -> None:
    """Print one JSON document (the exact reference shape) on stdout."""
    emit_json_bytes(encode_json(value))


def emit_json_bytes(data: bytes) -> None:
    """Print one already encoded JSON document on stdout."""
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


class CliContext:
    """Options shared by every command."""

    def __init__(self, debug: bool) -> None:
        self.debug = debug


def handles_errors(func: F) -> F:
    """Map failures to the documented exit statuses and error output."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool(ctx.find_root().params.get("debug"))
        as_json = bool(kwargs.get("as_json"))
        try:
            return func(*args, **kwargs)
        except SessionQueryError as exc:
            if debug:
                raise
            if as_json:
                emit_json({"error": exc.to_json()})
            elif exc.code == INDEX_FAILED:
                click.echo(f"error: {exc.message}", err=True)
            else:
                click.echo(f"error: {exc.code}: {exc.message}", err=True)
            # An index that cannot be used (missing, not a database, damaged, unreadable) is a
            # problem of the set-up, not of the query: exit 1, as every other failure that is
            # not a query error.
            ctx.exit(1 if exc.code == INDEX_FAILED else 2)
        except (click.ClickException, click.exceptions.Exit, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
            if debug:
                raise
            click.echo(f"error: {uncoded_message(exc, kwargs.get('db'))}", err=True)
            ctx.exit(1)

    return wrapper  # type: ignore[return-value]


def uncoded_message(exc: BaseException, db: str | None = None) -> str:
    """One line for an unexpected failure: a database error names the index and SQLite's
    reason (never SQLAlchemy's SQL echo or help link); anything else its type and text.
    A password in a ``postgresql://`` ``db`` is never shown (:func:`readmodel.store.urls.mask_url`)."""
    from readmodel.store.urls import mask_password

    if _is_database_error(exc):
        from readmodel.store.database import failure_reason

        where = f"the index {db}" if db else "the index"
        line = f"{where} cannot be used: {failure_reason(exc)}; `sessionq status` and `sessionq db check` diagnose it"
    else:
        line = f"{type(exc).__name__}: {exc}"
    return mask_password(line, db)


def _is_database_error(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.Error):
        return True
    # SQLAlchemy is already imported if one of its errors was raised.
    module = sys.modules.get("sqlalchemy.exc")
    return module is not None and isinstance(exc, module.SQLAlchemyError)


def refuse_impossible_db(db: str) -> None:
    """For the long-running servers (``rpc``, ``serve``, ``mcp``): exit 1 at once when
    ``db`` can never be an index file (a directory, a device).  A missing or
    broken index is answered per call instead where the server allows it,
    since the indexer may build or rebuild it while they run."""
    from readmodel.store.database import IndexDatabaseError, check_path
    from readmodel.store.urls import is_postgres

    if is_postgres(db):
        return  # a server, not a path: an unreachable one is answered per call
    try:
        check_path(db)
    except IndexDatabaseError as exc:
        raise click.ClickException(str(exc)) from None


POSTGRES_COMMANDS: frozenset[str] = frozenset(
    {
        "db upgrade",
        "db current",
        "db check",
        "status",
        # The indexer and prune (phase 2, the write side).
        "index",
        "prune",
        # Reads, search and the servers (phase 2, the read side; docs/postgres.md).
        "sessions",
        "show",
        "read",
        "events",
        "docs",
        "surface",
        "event",
        "trace",
        "trace-event",
        "title",
        "search",
        "rpc",
        "serve",
        "mcp",
        # A log this host has (a session indexed elsewhere is refused, naming its source).
        "export",
        # The terminal browser (its searches, listings and transcripts through the same engine).
        "browse",
    }
)
"""The commands that accept a PostgreSQL ``--db`` so far (docs/postgres.md)."""


def _refuse_unsupported_postgres(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """A PostgreSQL ``--db`` for a command that cannot use one yet: one line, exit 1."""
    if not value or "://" not in value:  # a file path: no URL parsing (nor SQLAlchemy's import) needed
        return value
    from readmodel.store.urls import is_postgres, not_supported_message

    if is_postgres(value):
        names = []
        while ctx.parent is not None:  # the command's names below the root (however the root was invoked)
            names.append(ctx.info_name or "")
            ctx = ctx.parent
        name = " ".join(reversed(names))
        if name not in POSTGRES_COMMANDS:
            raise click.ClickException(not_supported_message(value, f"`sessionq {name}`"))
    return value


def db_option(func: F) -> F:
    """``--db PATH_OR_URL`` defaulting to :func:`default_db`.

    A ``postgresql://`` URL is accepted by the commands in
    :data:`POSTGRES_COMMANDS`; every other command refuses it in one line
    (exit 1), naming what is not supported yet.
    """
    return click.option(
        "--db",
        "db",
        default=default_db,
        callback=_refuse_unsupported_postgres,
        show_default="$SESSIONQ_DB, else $XDG_DATA_HOME/sessionq/index.db, i.e. ~/.local/share/sessionq/index.db",
        help="The index database: a path, or postgresql://user@host/dbname (every command); the one scripts/run writes by default.",
    )(func)


def root_option(func: F) -> F:
    """``--root DIR`` defaulting to :func:`default_root`."""
    return click.option(
        "--root",
        "root",
        default=default_root,
        show_default="$SESSIONQ_ROOT or $DSH_HOME/sessions",
        type=click.Path(file_okay=False, path_type=str),
        help="The session log root.",
    )(func)


def json_option(func: F) -> F:
    """``--json``: print the exact reference JSON instead of a table."""
    return click.option("--json", "as_json", is_flag=True, help="Print the exact JSON shape.")(func)


def redact_option(func: F) -> F:
    """``--redact index|all|off`` (``$SESSIONQ_REDACT``): the secret-redaction policy.

    The value reaches the command as a policy name (see
    :data:`readmodel.projection.secrets.POLICIES`); click rejects any other.
    """
    from readmodel.projection.secrets import DEFAULT_POLICY, ENV_VAR, POLICIES

    return click.option(
        "--redact",
        "redact",
        type=click.Choice(POLICIES, case_sensitive=False),
        envvar=ENV_VAR,
        default=DEFAULT_POLICY,
        show_default=True,
        help="Secret redaction: index (the index and model tools never hold a detected secret; raw reads "
        "and exports as written), all (raw reads and exports too), off (nothing redacted).  [env: SESSIONQ_REDACT]",
    )(func)


def redacts_reads(redact: str) -> bool:
    """Whether raw reads and exports are redacted under the policy named ``redact`` (only ``all``).

    The engine then redacts the events it reads, streamed chunks with their
    runs as context (:mod:`readmodel.projection.redaction`).
    """
    from readmodel.projection.secrets import parse_policy, redacts_raw

    return redacts_raw(parse_policy(redact))
