"""``sessionq show ID``: a session's conversation as a person reads it.

User and assistant messages are rendered as markdown (rich), tool calls
with their arguments and results (a long result is cut with a count of what
was left out; ``--full`` shows everything), reasoning dimmed, compaction
replacements marked and shadowed messages dimmed.  Log-only events
(chunks, steps, request headers, ...) are hidden; ``--all`` lists them as
one line each.  On a terminal the output goes through a pager (``$PAGER``,
``less -R``); piped, it is printed as plain text.  ``--seq N`` starts at
event N and marks it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Final

import click
from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.rule import Rule
from rich.styled import Styled
from rich.text import Text

from readmodel.cli.inputs import PeopleCommand
from readmodel.cli.options import builtins, open_session
from readmodel.cli.presentation import event_summary, when
from readmodel.cli.support import db_option, handles_errors

RESULT_LINES: Final = 20
"""A tool result longer than this many lines is cut (``--full`` shows all)."""
RESULT_CHARS: Final = 2000
ARGUMENT_CHARS: Final = 400

_MESSAGE_TYPES: Final = frozenset({"user/message", "assistant/message", "tool/result"})


def cut(text: str, full: bool, lines: int = RESULT_LINES, chars: int = RESULT_CHARS) -> tuple[str, str | None]:
    """``text`` cut to ``lines`` lines / ``chars`` characters, and a note of what was left out."""
    if full:
        return text, None
    kept = text.splitlines()
    note = None
    if len(kept) > lines:
        note = f"… {len(kept) - lines} more line(s) of {len(kept)} (--full shows all)"
        text = "\n".join(kept[:lines])
    if len(text) > chars:
        note = f"… {len(text) - chars} more character(s) (--full shows all)"
        text = text[:chars]
    return text, note


def _message(event: dict[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    if not isinstance(data, dict):
        return {}
    message = data if event.get("type") == "user/message" else data.get("message")
    return message if isinstance(message, dict) else {}


def _blocks(content: Any, full: bool) -> Iterator[RenderableType]:
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and str(block.get("text", "")).strip():
            yield Markdown(str(block["text"]))
        elif kind == "reasoning" and str(block.get("text", "")).strip():
            text, note = cut(str(block["text"]), full)
            yield Text(text, style="dim italic")
            if note:
                yield Text(note, style="dim")
        elif kind == "tool-call":
            arguments, _ = cut(str(block.get("arguments", "")), full, lines=8, chars=ARGUMENT_CHARS)
            yield Text.assemble(("→ ", "bold magenta"), (str(block.get("name")), "bold magenta"), " ", (arguments, "magenta"))
        elif kind == "tool-result":
            yield from _result(block, full)
        elif kind is not None and kind != "text":
            yield Text(f"[{kind} block]", style="dim")


def _result(block: dict[str, Any], full: bool) -> Iterator[RenderableType]:
    parts = [str(b.get("text", "")) for b in block.get("content") or () if isinstance(b, dict) and b.get("type") == "text"]
    text, note = cut("\n".join(parts), full)
    yield Text(text or "(empty result)", style="red" if block.get("isError") else "")
    if note:
        yield Text(note, style="dim")


def _title(event: dict[str, Any], surface: str, marked: bool) -> Text:
    etype = event.get("type")
    message = _message(event)
    role = {"user/message": "user", "assistant/message": "assistant", "tool/result": "tool result"}.get(str(etype), str(etype))
    source = message.get("source") if isinstance(message.get("source"), dict) else {}
    if etype == "user/message" and source.get("kind") not in (None, "user"):
        role = f"user ({source.get('plugin') or source.get('kind')})"
    label = Text.assemble(("▶ " if marked else "", "bold reverse"), (role, "bold"), f" · seq {event.get('seq')} · {when(event.get('time'))}")
    op = event.get("surfaceOp")
    if isinstance(op, dict) and op.get("op") == "replace":
        label.append(f" · replaces seq {op.get('start')}..{op.get('end')} (compaction)", style="yellow")
    if surface == "shadowed":
        label.append(" · shadowed (replaced later; not in the model's view)", style="dim yellow")
    return label


def render(events: Sequence[dict[str, Any]], surfaces: dict[Any, str], *, full: bool, everything: bool, start: int | None) -> list[RenderableType]:
    """The transcript's renderables, from ``start`` (marked) when given."""
    out: list[RenderableType] = []
    for event in events:
        seq = event.get("seq")
        if start is not None and isinstance(seq, int) and seq < start:
            continue
        marked = start is not None and seq == start
        surface = surfaces.get(seq, "log-only")
        if event.get("type") in _MESSAGE_TYPES and surface != "log-only":
            style = "dim" if surface == "shadowed" else ""
            out.append(Rule(_title(event, surface, marked), align="left", style="dim"))
            body = list(_blocks(_message(event).get("content"), full)) or [Text("(no content)", style="dim")]
            out.append(Styled(Group(*body), style) if style else Group(*body))
        elif everything or marked:
            gist = event_summary(event)
            out.append(Text.assemble(("▶ " if marked else "  ", "bold reverse" if marked else ""), (f"seq {seq} {event.get('type')}", "dim"), f"  {gist}" if gist else ""))
    return out


_EPILOG: Final = """\b
Examples:
  sessionq show 6f31f323              the conversation (a unique id prefix is enough)
  sessionq show 6f31f323 --seq 120    start at event 120, marked with ▶
  sessionq show 6f31f323 --full --all | less -R   every event, nothing cut
"""


@click.command("show", cls=PeopleCommand, epilog=_EPILOG)
@click.argument("session_id")
@click.option("--seq", "start", type=int, help="Start at this event and mark it.")
@click.option("--full", is_flag=True, help=f"Show long tool results and arguments whole (default: cut after {RESULT_LINES} lines).")
@click.option("--all", "everything", is_flag=True, help="Also list log-only events (chunks, steps, tool calls, requests) as one line each.")
@click.option("--pager/--no-pager", default=None, help="Page the output (default: on a terminal only).")
@db_option
@handles_errors
def show_command(session_id: str, start: int | None, full: bool, everything: bool, pager: bool | None, db: str) -> None:
    """Show a session's conversation: messages as markdown, tool calls and their results."""
    engine, session_id = open_session(db, session_id)
    snapshot = builtins(engine.read_session(session_id))
    surfaces = {record.seq: record.surface for record in engine.list_events(session_id)}
    if start is not None and not any(event.get("seq") == start for event in snapshot["events"]):
        engine.read_event({"sessionId": session_id, "seq": start})  # the reference's answer for a bad seq
    header = snapshot["session"]
    console = Console(highlight=False)
    parts: list[RenderableType] = [Text(f"session {header.get('id')} · created {when(header.get('createdAt'))} · {header.get('cwd', 'no workspace')}", style="bold")]
    parts += render(snapshot["events"], surfaces, full=full, everything=everything, start=start)
    use_pager = sys.stdout.isatty() if pager is None else pager
    if use_pager:
        os.environ.setdefault("LESS", "-R")
        with console.pager(styles=True):
            console.print(*parts)
    else:
        console.print(*parts)
