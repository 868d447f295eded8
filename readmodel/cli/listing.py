"""``sessionq sessions``: the session list as people scan it, and as pipes read it.

The terminal table shows id, created, last activity, events, title and
workspace, newest first; ids are never cut or wrapped (the title and the
workspace give way instead), whatever the width, a pipe included (rich's 80
columns, or ``$COLUMNS``).  ``--plain`` prints tab-separated lines with full
values for ``cut``/``awk``; ``--json`` prints the reference's exact
``listSessions``/``filterSessions`` answer, unchanged.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any, Final

import click
from rich.console import Console
from rich.text import Text

from readmodel.cli.inputs import PeopleCommand
from readmodel.cli.options import combine, filters_json_value, open_engine, session_clauses, session_filter_options, show, values_clause
from readmodel.cli.support import db_option, handles_errors, json_option

PLAIN_COLUMNS: Final = ("id", "created", "lastActivity", "events", "workspace", "title", "parent", "status")
_GAP: Final = " "


def age(ms: Any, now: float | None = None) -> str:
    """How long ago epoch ``ms`` was, compactly: ``45s``, ``12m``, ``3h``, ``5d``, ``7w``; ``-`` for no time."""
    if type(ms) not in (int, float):
        return "-"
    seconds = max(0.0, (time.time() if now is None else now) - ms / 1000)
    for unit, size in (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def iso(ms: Any) -> str:
    """Epoch ``ms`` as a local ISO 8601 datetime to the second; empty for no time."""
    if type(ms) not in (int, float):
        return ""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ms / 1000))
    except (OverflowError, OSError, ValueError):
        return str(ms)


def short_path(path: str | None, width: int) -> str:
    """A workspace in at most ``width`` characters: ``~`` for the home, then its tail."""
    if path is None:
        return "-"
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + "/")):
        path = "~" + path[len(home) :]
    if len(path) <= width:
        return path
    name = path.rstrip("/").rsplit("/", 1)[-1]  # the last component says the most
    return clip("…/" + name if len(name) + 2 <= width else name, width)


def clip(text: str, width: int) -> str:
    """``text`` on one line in at most ``width`` characters (``…`` marks a cut)."""
    text = " ".join(text.split())
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


def _rows(records: Sequence[dict[str, Any]], summaries: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for record in records:
        header = record["header"]
        session_id = str(header.get("id"))
        summary = summaries.get(session_id)
        rows.append(
            {
                "id": session_id,
                "created": header.get("createdAt"),
                "lastActivity": summary.last_activity if summary else None,
                "events": summary.event_count if summary else None,
                "workspace": header.get("cwd") if type(header.get("cwd")) is str else None,
                "title": (summary.title if summary else None) or "",
                "parent": header.get("parentSession") if type(header.get("parentSession")) is str else None,
                "status": summary.status if summary else "live",
            }
        )
    return rows


def print_plain(rows: Sequence[dict[str, Any]]) -> None:
    """One tab-separated line per session (columns: :data:`PLAIN_COLUMNS`), nothing cut."""
    for row in rows:
        values = [
            row["id"],
            iso(row["created"]),
            iso(row["lastActivity"]),
            "" if row["events"] is None else str(row["events"]),
            row["workspace"] or "",
            row["title"],
            row["parent"] or "",
            row["status"],
        ]
        click.echo("\t".join(" ".join(value.split()) if "\t" in value or "\n" in value else value for value in values))


def print_table(rows: Sequence[dict[str, Any]], total: int) -> None:
    """The terminal table: fixed columns first (the id whole), the title and workspace share the rest."""
    console = Console(highlight=False)
    now = time.time()
    cells = [
        (row["id"], age(row["created"], now), age(row["lastActivity"], now), "" if row["events"] is None else str(row["events"]), row)
        for row in rows
    ]
    id_w = max([len("id"), *(len(c[0]) for c in cells)])
    created_w = max([len("created"), *(len(c[1]) for c in cells)])
    active_w = max([len("active"), *(len(c[2]) for c in cells)])
    events_w = max([len("events"), *(len(c[3]) for c in cells)])
    rest = console.width - (id_w + created_w + active_w + events_w) - 5 * len(_GAP)
    title_w = max(5, rest * 3 // 5)
    space_w = max(1, rest - title_w)
    head = _GAP.join(["id".ljust(id_w), "created".rjust(created_w), "active".rjust(active_w), "events".rjust(events_w), "title".ljust(title_w), clip("workspace", space_w)])
    console.print(Text(head, style="bold"), no_wrap=True, crop=False, overflow="ignore")
    for session_id, created, active, events, row in cells:
        line = Text(session_id.ljust(id_w), style="cyan")
        line.append(_GAP + created.rjust(created_w) + _GAP + active.rjust(active_w) + _GAP + events.rjust(events_w) + _GAP)
        line.append(clip(row["title"] or "(no title)", title_w).ljust(title_w), style=None if row["title"] else "dim")
        line.append(_GAP + short_path(row["workspace"], space_w), style="dim")
        console.print(line, no_wrap=True, crop=False, overflow="ignore")
    shown = f"{len(rows)} of {total} session(s); --limit 0 shows all" if len(rows) < total else f"{total} session(s)"
    console.print(f"[dim]{shown}[/dim]")


_EPILOG: Final = """\b
Examples:
  sessionq sessions                          the 50 newest sessions
  sessionq sessions --cwd ~/work/app --created-from 2d
  sessionq sessions --created-from 2026-08-01 --created-to 2026-08-31
  sessionq sessions --plain --limit 0 | cut -f1,6   every id with its title
  sessionq sessions --json                   the exact listSessions JSON
"""


@click.command("sessions", cls=PeopleCommand, epilog=_EPILOG)
@session_filter_options
@click.option("--live", is_flag=True, help="Only sessions that are live (availability).")
@click.option("--persisted", is_flag=True, help="Only sessions that are persisted (availability).")
@click.option("--filters", "filters_json", metavar="JSON", help='The reference\'s session filter array, e.g. \'[{"kind":"parent","values":["ID"]}]\'.')
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Show at most N sessions (default 50 in the table, all with --plain; 0: all).")
@click.option("--plain", is_flag=True, help=f"Tab-separated lines, nothing cut: {', '.join(PLAIN_COLUMNS)} (times ISO 8601).")
@db_option
@json_option
@handles_errors
def sessions_command(
    live: bool, persisted: bool, filters_json: str | None, limit: int | None, plain: bool, db: str, as_json: bool, **options: Any
) -> None:
    """List sessions, newest first: id, created, last activity, events, title, workspace.

    Filter by workspace (--cwd, exact path), creation time, parent or id.
    """
    if "cwds" in options:
        options["cwds"] = tuple(os.path.abspath(os.path.expanduser(path)) if path.startswith(("~", ".")) else path for path in options["cwds"])
    availability = tuple(name for name, on in (("live", live), ("persisted", persisted)) if on)
    clauses = [*session_clauses(options), *values_clause("availability", availability)]
    query = open_engine(db)
    if filters_json is None and not clauses:
        records = query.list_sessions()
    else:
        records = query.filter_sessions(combine(filters_json_value(filters_json), clauses))
    if as_json:
        show(records, True, "print_sessions")
        return
    if limit is None:
        limit = 0 if plain else 50
    shown = records if limit == 0 else records[:limit]
    summaries = query.session_summaries([str(r.header.get("id")) for r in shown])
    rows = _rows([{"header": r.header} for r in shown], summaries)
    if plain:
        print_plain(rows)
    else:
        print_table(rows, len(records))
