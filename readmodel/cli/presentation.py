"""Human-readable terminal output of the read commands (rich tables and trees).

Never used for exact output: ``--json`` prints the reference shapes instead.
Everything here takes the plain JSON values of the results (``to_builtins``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from rich.tree import Tree


def _console() -> Console:
    return Console(highlight=False)


def when(ms: Any) -> str:
    """Epoch milliseconds as local ``YYYY-MM-DD HH:MM:SS`` (anything else verbatim)."""
    if type(ms) not in (int, float):
        return str(ms)
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _content_text(content: Any) -> list[str]:
    parts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool-call":
            parts.append(f"{block.get('name')}({block.get('arguments')})")
        elif kind == "tool-result":
            parts.extend(_content_text(block.get("content")))
    return parts


def event_summary(event: dict[str, Any], width: int = 100) -> str:
    """A one-line gist of an event (message text, tool call, title, turn end)."""
    data = event.get("data")
    etype = event.get("type")
    if not isinstance(data, dict):
        return ""
    text = ""
    message = data if etype == "user/message" else data.get("message")
    if isinstance(message, dict) and isinstance(message.get("content"), list):
        text = " ".join(_content_text(message["content"]))
    elif etype == "tool/call":
        text = f"{data.get('name')} {data.get('arguments')}"
    elif etype == "session/title":
        text = str(data.get("title"))
    elif etype == "turn/end" and isinstance(data.get("reason"), dict):
        text = str(data["reason"].get("kind"))
    return _one_line(text, width)


def _header_line(header: dict[str, Any]) -> str:
    parts = [f"[bold]{header.get('id')}[/bold]", f"created {when(header.get('createdAt'))}"]
    if "cwd" in header:
        parts.append(f"cwd {header['cwd']}")
    if "parentSession" in header:
        parts.append(f"parent {header['parentSession']}")
    return "  ".join(parts)


def _availability(record: dict[str, Any]) -> str:
    flags = [name for name in ("live", "persisted") if record.get(name)]
    return ",".join(flags) or "-"


def print_sessions(records: Sequence[dict[str, Any]]) -> None:
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("created", overflow="fold")
    id_column(table, "id", [str(record["header"].get("id")) for record in records])
    for name in ("cwd", "parent", "source"):
        table.add_column(name, overflow="fold")
    for record in records:
        header = record["header"]
        table.add_row(
            when(header.get("createdAt")),
            str(header.get("id")),
            str(header.get("cwd", "-")),
            str(header.get("parentSession", "-")),
            _availability(record),
        )
    console = _console()
    console.print(table)
    console.print(f"{len(records)} session(s)")


def _events_table(events: Sequence[dict[str, Any]], *, target: Any = None, surfaces: dict[int, str] | None = None) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("seq", justify="right")
    table.add_column("type")
    table.add_column("time")
    if surfaces is not None:
        table.add_column("surface")
    table.add_column("summary", overflow="fold")
    for event in events:
        row = [str(event.get("seq")), str(event.get("type")), when(event.get("time"))]
        if surfaces is not None:
            row.append(surfaces.get(event.get("seq"), ""))
        row.append(event_summary(event))
        table.add_row(*row, style="bold" if target is not None and event.get("seq") == target else None)
    return table


def print_log(snapshot: dict[str, Any]) -> None:
    console = _console()
    console.print(_header_line(snapshot["session"]))
    console.print(_events_table(snapshot["events"]))


def print_records(records: Sequence[dict[str, Any]]) -> None:
    table = Table(show_edge=False, pad_edge=False)
    for name in ("seq", "type", "time", "surface"):
        table.add_column(name, justify="right" if name == "seq" else "left")
    for record in records:
        table.add_row(str(record["seq"]), record["type"], when(record["time"]), record["surface"])
    _console().print(table)


def print_documents(documents: Sequence[dict[str, Any]]) -> None:
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("seq", justify="right")
    table.add_column("type")
    table.add_column("surface")
    table.add_column("text", overflow="fold")
    for document in documents:
        table.add_row(str(document["seq"]), document["type"], document["surface"], _one_line(document["text"], 160))
    console = _console()
    console.print(table)
    console.print(f"{len(documents)} document(s)")


def print_surface(snapshot: dict[str, Any]) -> None:
    console = _console()
    console.print(_header_line(snapshot["session"]))
    console.print(f"captured through seq {snapshot['capturedThroughSeq']}; {len(snapshot['events'])} event(s) on the surface")
    console.print(_events_table(snapshot["events"]))


def print_window(window: dict[str, Any]) -> None:
    console = _console()
    console.print(_header_line(window["session"]))
    console.print(f"seq {window['startSeq']}..{window['endSeq']} around seq {window['target'].get('seq')}")
    console.print(_events_table(window["events"], target=window["target"].get("seq")))


def _record_label(record: dict[str, Any]) -> str:
    header = record["header"]
    return f"{header.get('id')}  [dim]{when(header.get('createdAt'))} {_availability(record)}[/dim]"


def print_lineage(trace: dict[str, Any]) -> None:
    """Ancestors (root first) down to the target, then its descendant forest."""
    ancestors = list(reversed(trace["ancestors"]))
    top = Tree(f"[yellow]{trace['unresolvedParentId']} (missing)[/yellow]") if not trace["complete"] else None
    node = top
    for record in ancestors:
        node = Tree(_record_label(record)) if node is None else node.add(_record_label(record))
        if top is None:
            top = node
    label = f"[bold]{_record_label(trace['target'])}[/bold]"
    target = Tree(label) if node is None else node.add(label)
    if top is None:
        top = target
    stack = [(target, child) for child in reversed(trace["descendants"])]
    while stack:
        parent, child = stack.pop()
        branch = parent.add(_record_label(child["session"]))
        stack.extend((branch, grandchild) for grandchild in reversed(child["descendants"]))
    _console().print(top)


def print_event_trace(trace: dict[str, Any]) -> None:
    target = trace["target"]
    console = _console()
    console.print(f"[bold]{target['sessionId']}[/bold] seq {target['seq']} {target['type']} ({target['surface']})")
    rows = [
        ("replaced by", trace.get("replacedBy", "-")),
        ("replacement chain", trace["replacementChain"]),
        ("replaced events", trace["replacedEventSeqs"]),
        ("source events", trace["sourceEventSeqs"]),
        ("derived events", trace["derivedEventSeqs"]),
    ]
    for name, value in rows:
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        console.print(f"  {name:<18} {shown or '-'}")


def print_titles(results: Sequence[dict[str, Any]]) -> None:
    table = Table(show_edge=False, pad_edge=False)
    id_column(table, "session", [str(result["sessionId"]) for result in results])
    for name in ("title", "source", "event", "updated"):
        table.add_column(name, overflow="fold")
    for result in results:
        if result["status"] == "rejected":
            reason = result["reason"]
            table.add_row(result["sessionId"], f"[red]{reason.get('code', reason.get('name'))}: {reason['message']}[/red]", "", "", "")
            continue
        title = result["value"].get("title")
        if title is None:
            table.add_row(result["sessionId"], "[dim](no title)[/dim]", "", "", "")
            continue
        source = title.get("source") or {}
        table.add_row(
            result["sessionId"],
            str(title.get("title")),
            str(source.get("kind")),
            str(title.get("eventSeq")),
            when(title.get("updatedAt")),
        )
    _console().print(table)


def id_column(table: Table, name: str, ids: Sequence[str]) -> None:
    """A column of session ids: never wrapped or cut (other columns give way)."""
    table.add_column(name, no_wrap=True, min_width=max([len(name), *map(len, ids)]), style="cyan")


def highlighted(snippet: str, query: str) -> Text:
    """``snippet`` with the query's words marked (bold reverse on a terminal)."""
    text = Text(" ".join(snippet.split()))
    words = [word for word in query.split() if word]
    if words:
        text.highlight_words(words, "bold reverse", case_sensitive=False)
    return text


SNIPPET_MIN_WIDTH = 48
"""Below this many columns for the snippet, search hits are printed as records (the snippet on
lines of its own, as wide as the terminal) instead of a table with a squeezed snippet column."""


def print_search_page(page: dict[str, Any], *, within_session: bool, query: str = "", page_number: int = 1, first_rank: int = 1) -> None:
    """Search hits, best first: rank, where, which event, and the snippet with the matches marked.

    A table when the snippet column gets at least :data:`SNIPPET_MIN_WIDTH` columns, else one
    record per hit (its place on one line, the snippet below it); ids are never wrapped.
    """
    console = _console()
    if within_session:
        console.print(_header_line(page["session"]))
    hits = page["items"]
    if not hits:
        console.print("[dim]no matches[/dim]")
    else:
        rows = []
        for rank, hit in enumerate(hits, first_rank):
            event = hit if within_session else hit["bestMatch"]
            where = [] if within_session else [hit["header"]["id"]]
            rows.append([str(rank), *where, str(event["seq"]), event["type"], event["surface"], when(event["time"]), highlighted(event["snippet"], query)])
        # The place columns' widths and the table's separators (" │ " between columns).
        place = sum(max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)) + 3 * (len(rows[0]) - 1)
        if console.width - place >= SNIPPET_MIN_WIDTH:
            console.print(_search_table(rows, within_session))
        else:
            _print_search_records(console, rows)
    if "nextCursor" in page:
        # Soft-wrapped: a cursor is one token to copy, never cut by an inserted newline.
        console.print(f"[dim]more: --page {page_number + 1}, or --cursor {page['nextCursor']}[/dim]", soft_wrap=True)


def _search_table(rows: list[list[Any]], within_session: bool) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("#", justify="right")
    if not within_session:
        id_column(table, "session", [row[1] for row in rows])
    table.add_column("seq", justify="right")
    table.add_column("type")
    table.add_column("surface")
    table.add_column("time", no_wrap=True)
    table.add_column("snippet", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _print_search_records(console: Console, rows: list[list[Any]]) -> None:
    """One hit per record: ``rank  [id]  #seq  type  surface  time`` (broken between fields only,
    so an id or a time is never cut), then the snippet indented, as wide as the terminal allows."""
    indent = len(rows[-1][0]) + 2
    for number, row in enumerate(rows):
        rank, *place, seq, etype, surface, at, snippet = row
        line = Text(rank.rjust(indent - 2), style="bold")
        column = indent - 2
        for text, style in [*((part, "cyan") for part in place), (f"#{seq}", ""), (etype, ""), (surface, "dim"), (at, "dim")]:
            if column + 2 + len(text) > console.width and column > indent:
                line.append("\n" + " " * indent)
                column = indent
            else:
                line.append("  ")
                column += 2
            line.append(text, style=style)
            column += len(text)
        if number:
            console.print()
        console.print(line, overflow="ignore", crop=False)
        console.print(Padding(snippet, (0, 0, 0, indent), expand=False))
