"""``sessionq browse``: an interactive terminal browser over the index (Textual).

Owns: the ``browse`` click command (:data:`browse_command`), the Textual app
and its screens (:mod:`.app`: search as you type, sessions by workspace,
transcripts with match jumps, copying ids) and what they show, computed off
the UI thread (:mod:`.rows`), the first pages kept per search generation and
fetched ahead (:mod:`.cache`), and rows as cheap-to-paint visuals (:mod:`.lines`).

Imports: the engine (:mod:`readmodel.query`, through the CLI's plumbing),
:mod:`readmodel.core`, and the CLI's presentation helpers
(:mod:`readmodel.cli.listing`, :mod:`readmodel.cli.transcript`).  Textual is
imported only when the command runs, so other commands do not pay for it.
"""

from __future__ import annotations

import sys
from typing import Final

import click

from readmodel.cli.inputs import PeopleCommand
from readmodel.cli.options import open_engine
from readmodel.cli.support import db_option, handles_errors

KEYS: Final = """\b
Keys:
  type            search every session (results update as you type)
  ↓ / ↑, Enter    move in the results, open a session (or a whole workspace)
  n / p           next / previous match in an open transcript
  l               show or hide log-only events (chunks, steps, tool calls)
  c, ctrl+y       copy the session id
  Esc, q          back (Esc on an empty search quits)
\b
Examples:
  sessionq browse
  sessionq browse --db ./var/index.db
  sessionq browse --db postgresql://me@dbhost/sessionq
"""


@click.command("browse", cls=PeopleCommand, epilog=KEYS)
@db_option
@handles_errors
def browse_command(db: str) -> None:
    """Browse sessions in the terminal: search as you type, read transcripts, copy ids."""
    engine = open_engine(db)
    # An unusable index fails here, in one line and before the screen is taken over.
    engine.list_workspaces()
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise click.ClickException("browse needs a terminal (stdin and stdout); `sessionq sessions` and `sessionq search` print to pipes")
    from readmodel.cli.browse.app import BrowserApp

    try:
        BrowserApp(engine).run()
    finally:
        engine.close()
