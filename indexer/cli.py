"""The ``sessionq`` command line: a thin adapter over the library.

Exit status: 0 success; 2 a query error (with ``--json`` the error object
``{"error": {"code", "message"}}`` is printed on stdout); 1 anything else.
No traceback is printed unless ``--debug`` is given.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

# Shared CLI plumbing lives in readmodel (the read-side commands use it too);
# re-exported here because the write-side commands look it up on this module.
from readmodel.cli.support import CliContext, default_db, emit_json, examples, handles_errors, root_option  # noqa: F401

from .failures import as_query_error
from .layout import Compression, LayoutError, detect_compression, locate, transcripts_with_prefix
from .reader import inspect_session, inspect_view, read_listing_header

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
@click.version_option(package_name="sessionq")
def main(debug: bool) -> None:
    """sessionq: search and trace AI coding-agent session history."""


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


@main.command(epilog=examples("sessionq inspect 6f31f323", "sessionq inspect 6f31f323 --root ./var/sample-root --json"))
@click.argument("session_id")
@root_option
@compression_option
@click.option("--json", "as_json", is_flag=True, help="Print the exact {session, events} JSON.")
@handles_errors
def inspect(session_id: str, root: str, compression: str, as_json: bool) -> None:
    """Read one log straight from the root (no database): the non-mutating inspect view.

    SESSION_ID may be a unique prefix of the id of a log in the root (an ambiguous one lists
    the matching ids and exits 2).
    """
    mode = resolve_compression(root, compression)
    try:
        log = inspect_session(root, _log_id(root, session_id, mode), mode)
    except (LayoutError, ValueError, OSError) as exc:
        error = as_query_error(exc, session_id)
        if not as_json and error.code == "SESSION_QUERY_SESSION_NOT_FOUND":
            # People need to know where it looked; --json keeps the reference's exact message.
            error = type(error)(error.code, f"{error.message} under the root {os.path.abspath(root)} (--root or $SESSIONQ_ROOT names another)")
        raise error from exc
    view = inspect_view(log)
    if as_json:
        emit_json(view)
        return
    from .presentation import print_inspect

    print_inspect(log, view)


def _log_id(root: str, text: str, mode: Compression) -> str:
    """The session id ``text`` names among the logs of ``root``: itself when a log has that id,
    else the one log whose id starts with it (several: their ids are listed, exit 2)."""
    from readmodel.cli.inputs import PREFIX_CANDIDATES_SHOWN, ambiguous_prefix

    try:
        locate(root, text, mode)
        return text
    except (LayoutError, ValueError):
        pass  # not an id (or a broken layout the exact lookup reports): try it as a prefix
    paths = transcripts_with_prefix(root, text, mode)
    ids = []
    for path in paths:
        try:
            header = read_listing_header(path, mode)
        except Exception:  # noqa: BLE001 - a log that cannot be listed names no candidate
            continue
        if header is not None and type(header.get("id")) is str and header["id"].startswith(text):
            ids.append(header["id"])
            if len(ids) > PREFIX_CANDIDATES_SHOWN:
                break
    if len(ids) > 1:
        raise ambiguous_prefix(text, sorted(ids))
    return ids[0] if ids else text  # nothing matches: the exact lookup answers (not found)


# The daemon and admin commands (index, status, db, demo-root) live in their own
# module, which imports nothing from this one at import time.
from .commands import COMMANDS as _WRITE_SIDE_COMMANDS  # noqa: E402

for _command in _WRITE_SIDE_COMMANDS:
    main.add_command(_command)

# The read-side commands (sessions, read, events, ..., rpc) live in readmodel.
from readmodel.cli.reads import COMMANDS as _READ_SIDE_COMMANDS  # noqa: E402

for _command in _READ_SIDE_COMMANDS:
    main.add_command(_command)

from readmodel.cli.browse import browse_command  # noqa: E402  (the terminal browser; Textual loads only when it runs)

main.add_command(browse_command)

if __name__ == "__main__":  # pragma: no cover
    main()
