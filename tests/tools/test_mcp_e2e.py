"""``sessionq mcp`` end to end: a subprocess driven by the MCP SDK's own stdio client,
over an index of the shared reference corpus."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest

from readmodel.query import SessionQuery
from readmodel.tools import TOOL_NAMES
from readmodel.tools.errors import UNAUTHORIZED_MESSAGE
from readmodel.tools.host import PROMPT_SECTION_TEXT
from readmodel.tools.mcpserver import ERROR_CODE_META_KEY
from tests.corpus import REPO
from tests.tools.support import open_query

WORKSPACE = "/home/dev/cli-tools"


def pick_sessions(db: str) -> tuple[str, str, str]:
    """A session of the workspace with a step/start, another one of it, and a foreign one."""
    query: SessionQuery = open_query(db)
    try:
        records = query.list_sessions()
        mine = [r.header["id"] for r in records if r.header.get("cwd") == WORKSPACE]
        foreign = next(r.header["id"] for r in records if r.header.get("cwd") not in (WORKSPACE, None))
        with_step = next(
            session_id for session_id in mine
            if any(event.get("type") == "step/start" for event in query.read_session(session_id).events)
        )
        other = next(session_id for session_id in mine if session_id != with_step)
        return with_step, other, foreign
    finally:
        query.close()


async def drive(db: str, me: str, other: str, foreign: str) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "indexer.cli", "mcp", "--cwd", WORKSPACE, "--session", me, "--db", db],
        cwd=str(REPO),
    )
    seen: dict[str, Any] = {}
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            seen["instructions"] = getattr(init, "instructions", None)
            seen["tools"] = (await session.list_tools()).tools
            calls = {
                "search": ("session_search", {"query": "bash"}),
                "own_search": ("session_event_search", {"query": "the"}),
                "event_search": ("session_event_search", {"session_id": other, "query": "the"}),
                "trace": ("session_trace", {}),
                "event_trace": ("session_event_trace", {"session_id": other, "seq": 1}),
                "event_read": ("session_event_read", {"session_id": other, "seq": 1, "before": 1, "after": 1}),
                "foreign": ("session_trace", {"session_id": foreign}),
                "bad_args": ("session_event_read", {"session_id": other}),
            }
            for key, (name, arguments) in calls.items():
                seen[key] = await session.call_tool(name, arguments)
    return seen


def field(model: Any, name: str) -> Any:
    """A field of an SDK model by its wire (camelCase) name: SDK 2.x names
    attributes in snake_case, 1.x in camelCase."""
    return model.model_dump(by_alias=True, exclude_none=False).get(name)


def text_of(result: Any) -> str:
    (block,) = result.content
    assert block.type == "text"
    return block.text


def error_code(result: Any) -> Any:
    return (field(result, "_meta") or {}).get(ERROR_CODE_META_KEY)


def test_mcp_server_over_stdio(corpus_db: str) -> None:
    me, other, foreign = pick_sessions(corpus_db)
    seen = anyio.run(drive, corpus_db, me, other, foreign)

    assert seen["instructions"] == PROMPT_SECTION_TEXT
    tools = seen["tools"]
    assert [tool.name for tool in tools] == list(TOOL_NAMES)
    for tool in tools:
        hints = field(tool, "annotations")
        assert (hints["readOnlyHint"], hints["destructiveHint"], hints["idempotentHint"], hints["openWorldHint"]) == (
            True, False, True, False)
        assert "cursor" not in field(tool, "inputSchema")["properties"]

    search = text_of(seen["search"])
    assert not field(seen["search"], "isError") and search.startswith("Matching sessions (")
    assert f"Session {me} " not in search  # the caller's own session is never a result

    own = text_of(seen["own_search"])
    assert own.startswith(f"Session {me} \u2014 ") and not field(seen["own_search"], "isError")
    assert text_of(seen["event_search"]).startswith(f"Session {other} \u2014 ")
    trace = text_of(seen["trace"])
    assert trace.startswith(f"Session {me} \u2014 ") and "\nAncestors (closest first):\n" in trace
    assert text_of(seen["event_trace"]).splitlines()[1].startswith("Target: seq 1 | ")
    read = text_of(seen["event_read"])
    assert "Event seq 1:\n```json\n{" in read and "\nBefore:\n- seq 0 | " in read and "\nAfter:\n- seq 2 | " in read

    denied = seen["foreign"]
    assert field(denied, "isError") and text_of(denied) == f"Error: {UNAUTHORIZED_MESSAGE}" and foreign not in text_of(denied)
    assert error_code(denied) == "SESSION_QUERY_TOOL_UNAUTHORIZED"
    assert field(seen["bad_args"], "isError") and error_code(seen["bad_args"]) == "INVALID_ARGS"


@pytest.mark.parametrize("argv", [["mcp", "--help"]])
def test_mcp_command_is_registered(argv: list[str]) -> None:
    from click.testing import CliRunner

    from indexer.cli import main

    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0 and "--cwd" in result.output and "--session" in result.output
