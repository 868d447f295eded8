"""Human-readable terminal output for log-store commands (rich tables)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from .reader import DecodedLog


def event_summary(event: dict[str, Any], width: int = 80) -> str:
    """A one-line gist of an event for tables (never used for exact output)."""
    data = event.get("data")
    etype = event.get("type")
    text = ""
    if isinstance(data, dict):
        message = data if etype == "user/message" else data.get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), list):
            parts = []
            for block in message["content"]:
                if isinstance(block, dict):
                    if block.get("type") == "text":
                        parts.append(str(block.get("text", "")))
                    elif block.get("type") == "tool-call":
                        parts.append(f"{block.get('name')}({block.get('arguments')})")
                    elif block.get("type") == "tool-result":
                        parts.extend(str(b.get("text", "")) for b in block.get("content", []) if isinstance(b, dict))
            text = " ".join(parts)
        elif etype == "tool/call":
            text = f"{data.get('name')} {data.get('arguments')}"
        elif etype == "session/title":
            text = str(data.get("title"))
        elif etype == "turn/end":
            reason = data.get("reason")
            text = str(reason.get("kind")) if isinstance(reason, dict) else ""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def print_inspect(log: DecodedLog, view: dict[str, Any]) -> None:
    console = Console()
    header = view["session"]
    console.print(f"[bold]{header.get('id')}[/bold]  cwd={header.get('cwd', '-')}  createdAt={header.get('createdAt')}")
    notes = []
    if log.torn is not None:
        notes.append(f"torn tail at byte {log.torn.truncate_to} ({log.torn.recovered} events recovered)")
    if log.closers:
        notes.append(f"{len(log.closers)} synthetic closer(s) appended in memory")
    if notes:
        console.print("[yellow]" + "; ".join(notes) + "[/yellow]")
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("seq", justify="right")
    table.add_column("type")
    table.add_column("time", justify="right")
    table.add_column("summary", overflow="fold")
    synthetic_from = len(view["events"]) - len(log.closers)
    for index, event in enumerate(view["events"]):
        style = "dim" if index >= synthetic_from else None
        table.add_row(str(event.get("seq")), str(event.get("type")), str(event.get("time")), event_summary(event), style=style)
    console.print(table)
