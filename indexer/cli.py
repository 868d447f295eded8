"""The ``sessionq`` command line: a thin adapter over the library.

Exit status: 0 success; 2 a query error (with ``--json`` the error object
``{"error": {"code", "message"}}`` is printed on stdout); 1 anything else.
No traceback is printed unless ``--debug`` is given.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

from readmodel.errors import SessionQueryError

from .failures import as_query_error
from .layout import Compression, LayoutError, detect_compression
from .reader import inspect_session, inspect_view

F = TypeVar("F", bound=Callable[..., Any])
_encode_json = msgspec.json.Encoder().encode


def dsh_home() -> Path:
    return Path(os.environ.get("DSH_HOME") or Path.home() / ".dsh")


def default_root() -> str:
    """``$SESSIONQ_ROOT``, else the harness's own ``$DSH_HOME/sessions``."""
    return os.environ.get("SESSIONQ_ROOT") or str(dsh_home() / "sessions")


def default_db() -> str:
    """``$SESSIONQ_DB``, else ``$XDG_DATA_HOME/sessionq/index.db``."""
    if os.environ.get("SESSIONQ_DB"):
        return os.environ["SESSIONQ_DB"]
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return str(data_home / "sessionq" / "index.db")


def emit_json(value: Any) -> None:
    """Print one JSON document (the exact reference shape) on stdout."""
    sys.stdout.buffer.write(_encode_json(value) + b"\n")
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
            else:
                click.echo(f"error: {exc.code}: {exc.message}", err=True)
            ctx.exit(2)
        except (click.ClickException, click.exceptions.Exit, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
            if debug:
                raise
            click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
            ctx.exit(1)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
@click.version_option(package_name="sessionq")
def main(debug: bool) -> None:
    """sessionq: search and trace AI coding-agent session history."""


def root_option(func: F) -> F:
    return click.option(
        "--root",
        "root",
        default=default_root,
        show_default="$SESSIONQ_ROOT or $DSH_HOME/sessions",
        type=click.Path(file_okay=False, path_type=str),
        help="The session log root.",
    )(func)


def compression_option(func: F) -> F:
    return click.option(
        "--compression",
        type=click.Choice(["auto", "zstd", "none"]),
        default="auto",
        show_default=True,
        help="Transcript encoding of the root (auto: detect from the files).",
    )(func)


def resolve_compression(root: str, choice: str) -> Compression:
    return detect_compression(root) if choice == "auto" else Compression(choice)


@main.command()
@click.argument("session_id")
@root_option
@compression_option
@click.option("--json", "as_json", is_flag=True, help="Print the exact {session, events} JSON.")
@handles_errors
def inspect(session_id: str, root: str, compression: str, as_json: bool) -> None:
    """Read one log straight from the root (no database): the non-mutating inspect view."""
    mode = resolve_compression(root, compression)
    try:
        log = inspect_session(root, session_id, mode)
    except (LayoutError, ValueError, OSError) as exc:
        raise as_query_error(exc, session_id) from exc
    view = inspect_view(log)
    if as_json:
        emit_json(view)
        return
    from .presentation import print_inspect

    print_inspect(log, view)


if __name__ == "__main__":  # pragma: no cover
    main()
