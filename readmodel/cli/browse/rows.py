"""What the browser shows, computed off the UI thread: result rows, workspace listings, transcripts.

Every function takes the engine (:class:`readmodel.query.SessionQuery`, which is
thread-safe) and returns plain values with rich :class:`~rich.text.Text` for
display, so the app can run it in a worker thread; nothing here touches
Textual.  Engine errors propagate (the app shows their message in its status
line); an aborted search raises the signal's reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
from rich.console import Group, RenderableType
from rich.text import Text

from readmodel.cli.listing import age, clip, short_path
from readmodel.cli.transcript import render
from readmodel.core.cancel import AbortSignal
from readmodel.search.modes import people_match

SEARCH_LIMIT: Final = 20
"""Sessions one search shows (the engine's best first; the engine's default page, a screenful)."""
PER_WORKSPACE: Final = 5
"""Newest sessions shown under each workspace while the query is empty."""
WORKSPACE_LIMIT: Final = 500
"""Sessions listed when one workspace is opened (the summaries API's page maximum)."""
MATCH_LIMIT: Final = 2000
"""Most matches of the query one transcript marks (n/p move between them)."""
NO_WORKSPACE: Final = "(no workspace)"
TITLE_WIDTH: Final = 60
PATH_WIDTH: Final = 40


@dataclass(frozen=True, slots=True)
class Row:
    """One entry of the results list: its ``lines`` (one screen line each).

    ``kind`` is ``"session"`` (opens a transcript), ``"workspace"`` (opens the
    workspace's whole listing) or ``"note"`` (not selectable).  ``seq`` is the
    best match's event for a search hit.
    """

    kind: str
    lines: tuple[Text, ...]
    session_id: str | None = None
    cwd: str | None = None
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class Block:
    """One event of a transcript as the browser shows it."""

    seq: int
    body: RenderableType
    log_only: bool
    match: bool


@dataclass(slots=True)
class Transcript:
    """A session's events as blocks, and the seqs of the query's matches (ascending)."""

    session_id: str
    heading: Text
    blocks: list[Block] = field(default_factory=list)
    matches: list[int] = field(default_factory=list)

    def visible(self, with_log: bool) -> list[Block]:
        """The blocks shown: log-only events only when ``with_log``."""
        return [block for block in self.blocks if with_log or not block.log_only]


def query_terms(query: str) -> list[str]:
    """The words of ``query`` worth highlighting (case is ignored when highlighting)."""
    return [word for word in re.split(r"\W+", query) if word]


def highlighted(text: str, terms: Sequence[str], style: str = "") -> Text:
    """``text`` with every occurrence of ``terms`` in bold yellow."""
    out = Text(text, style=style)
    if terms:
        out.highlight_words(terms, style="bold yellow", case_sensitive=False)
    return out


def _one_line(cwd: str | None) -> str:
    """A workspace in full on one line (a control character in a path would break the row)."""
    return NO_WORKSPACE if cwd is None else " ".join(cwd.splitlines())


def _workspace(cwd: str | None) -> str:
    return NO_WORKSPACE if cwd is None else short_path(cwd, PATH_WIDTH)


def session_lines(summary: Any, snippet: str | None = None, terms: Sequence[str] = ()) -> tuple[Text, ...]:
    """A session's entry: title, short id, workspace, age and events; the snippet on a second line."""
    title = summary.title if summary is not None and summary.title else "(untitled)"
    first = Text.assemble(
        (clip(title, TITLE_WIDTH), "bold"),
        ("  ", ""),
        (summary.id[:8], "cyan"),
        (f"  {_workspace(summary.cwd)} · {age(summary.last_activity)} ago · {summary.event_count} events", "dim"),
    )
    if not snippet:
        return (first,)
    second = Text("  ")
    second.append_text(highlighted(clip(snippet, 200), terms))
    return first, second


def _note(text: str) -> Row:
    return Row("note", (Text(clip(text, 200), style="dim"),))


def _summary_row(summary: Any, snippet: str | None = None, terms: Sequence[str] = (), seq: int | None = None) -> Row:
    return Row("session", session_lines(summary, snippet, terms), summary.id, summary.cwd, seq)


@dataclass(frozen=True, slots=True)
class _Bare:
    """A session the summaries do not list (a live session that ended): what its header says."""

    id: str
    cwd: str | None
    title: None = None
    last_activity: Any = None
    event_count: int = 0


@dataclass(frozen=True, slots=True)
class Found:
    """A search's first page as the engine answered it: the hits, best first, and their sessions'
    summaries.  Rows are made from it when shown (:func:`found_rows`), so a kept page still says
    how long ago each session was active."""

    hits: tuple[Any, ...]
    summaries: dict[str, Any]


def find(engine: Any, query: str, signal: AbortSignal | None = None, limit: int = SEARCH_LIMIT) -> Found:
    """The sessions matching ``query`` (people's mode, :func:`~readmodel.search.modes.people_match`)."""
    mode, text = people_match(query)
    page = engine.search_sessions({"query": text, "match": mode, "limit": limit}, signal)
    ids = [hit.header["id"] for hit in page.items]
    return Found(tuple(page.items), engine.session_summaries(ids) if ids else {})


def found_rows(found: Found, query: str) -> list[Row]:
    """The rows of ``found``, each session with its best match's snippet, ``query``'s words highlighted."""
    terms = query_terms(query)
    rows = []
    for hit in found.hits:
        header = hit.header
        summary = found.summaries.get(header["id"]) or _Bare(str(header["id"]), header.get("cwd"))
        rows.append(_summary_row(summary, hit.best_match.snippet, terms, hit.best_match.seq))
    if not rows:
        rows.append(_note(f"no session matches “{query}”"))
    return rows


def search_rows(engine: Any, query: str, signal: AbortSignal | None = None, limit: int = SEARCH_LIMIT) -> list[Row]:
    """The sessions matching ``query``, best first, each with its best match's snippet."""
    return found_rows(find(engine, query, signal, limit), query)


def warm_up(engine: Any) -> None:
    """Open the search backend (its connection, the accelerator, the first pages of the FTS
    index) with a search that can match almost nothing, so the first keystroke does not pay for it."""
    engine.search_sessions({"query": "zq", "limit": 1})


def workspace_rows(engine: Any, per_workspace: int = PER_WORKSPACE) -> list[Row]:
    """Every workspace (newest activity first) with its newest ``per_workspace`` sessions."""
    rows = []
    for workspace in engine.list_workspaces():
        cwd = workspace.cwd
        more = f"  Enter lists all {workspace.session_count}" if workspace.session_count > per_workspace else ""
        heading = Text.assemble((_one_line(cwd), "bold green"), (f"  {workspace.session_count} sessions · {age(workspace.last_activity)} ago{more}", "dim"))
        rows.append(Row("workspace", (heading,), cwd=cwd))
        page = engine.list_session_summaries({"cwd": cwd, "limit": per_workspace})
        rows.extend(_summary_row(summary) for summary in page.items)
    if not rows:
        rows.append(_note("the index holds no sessions yet (`sessionq index` builds it)"))
    return rows


def workspace_session_rows(engine: Any, cwd: str | None, limit: int = WORKSPACE_LIMIT) -> list[Row]:
    """The newest ``limit`` sessions of one workspace, newest first."""
    page = engine.list_session_summaries({"cwd": cwd, "limit": limit})
    rows = [Row("workspace", (Text.assemble((_one_line(cwd), "bold green"), ("  Esc goes back", "dim")),), cwd=cwd)]
    rows.extend(_summary_row(summary) for summary in page.items)
    if page.next_cursor:
        rows.append(_note(f"… the newest {limit} shown; type to search"))
    return rows


def match_seqs(engine: Any, session_id: str, query: str, limit: int = MATCH_LIMIT) -> list[int]:
    """The seqs of the session's events matching ``query`` as search matches them, ascending."""
    if not query.strip():
        return []
    found: set[int] = set()
    mode, text = people_match(query)
    request: dict[str, Any] = {"sessionId": session_id, "query": text, "match": mode, "limit": engine.search_config.max_limit}
    while len(found) < limit:
        page = engine.search_events(request)
        found.update(hit.seq for hit in page.items)
        if not page.next_cursor:
            break
        request["cursor"] = page.next_cursor
    return sorted(found)[:limit]


def _block(event: dict[str, Any], surface: str, match: bool) -> Block:
    parts: list[RenderableType] = render([event], {event.get("seq"): surface}, full=False, everything=True, start=None)
    if match:
        parts.insert(0, Text("◆ match", style="bold yellow"))
    return Block(int(event["seq"]), Group(*parts), surface == "log-only", match)


def load_transcript(engine: Any, session_id: str, query: str = "") -> Transcript:
    """The session's events as blocks (log-only ones flagged), its matches of ``query`` marked."""
    snapshot = msgspec.to_builtins(engine.read_session(session_id))
    surfaces = {record.seq: record.surface for record in engine.list_events(session_id)}
    matches = match_seqs(engine, session_id, query)
    header = snapshot["session"]
    heading = Text.assemble(
        (str(header.get("id")), "bold cyan"),
        (f"  {header.get('cwd') or NO_WORKSPACE} · {len(snapshot['events'])} events", "dim"),
        (f" · {len(matches)} matches of “{query}”" if query.strip() else "", "yellow"),
    )
    matched = set(matches)
    blocks = [_block(event, surfaces.get(event.get("seq"), "log-only"), event.get("seq") in matched) for event in _events(snapshot)]
    return Transcript(session_id, heading, blocks, matches)


def _events(snapshot: dict[str, Any]) -> Iterable[dict[str, Any]]:
    return (event for event in snapshot["events"] if isinstance(event.get("seq"), int))
