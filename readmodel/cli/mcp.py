"""``sessionq mcp``: the click command (the MCP SDK is imported only when it runs)."""

from __future__ import annotations

import click

from readmodel.cli.support import db_option, examples, handles_errors, refuse_impossible_db


@click.command(
    "mcp",
    epilog=examples("sessionq mcp --cwd ~/work/app", "sessionq mcp --cwd ~/work/app --session 6f31f323-b7af-465b-a778-4f0f3c9014ac"),
)
@click.option("--cwd", "cwd", required=True, help="The workspace directory the tools answer for (matched exactly).")
@click.option("--session", "session_id", default=None, help="Also act as this session (its own events bound searches).")
@click.option("--max-search-results", type=int, default=None, help="Result cap of the search tools (default 100).")
@click.option("--search-timeout-ms", type=int, default=None, help="Deadline of the search tools (default 30000).")
@db_option
@handles_errors
def mcp_command(
    cwd: str, session_id: str | None, max_search_results: int | None, search_timeout_ms: int | None, db: str
) -> None:
    """Serve the five session tools over MCP on stdin/stdout, authorised as a caller in CWD."""
    from readmodel.tools.host import validate_tool_config
    from readmodel.tools.mcpserver import run

    refuse_impossible_db(db)
    try:
        config = validate_tool_config({"maxSearchResults": max_search_results, "searchTimeoutMs": search_timeout_ms})
    except TypeError as exc:
        raise click.BadParameter(str(exc)) from exc
    try:
        run(db, cwd, session_id, config)
    except KeyboardInterrupt:
        pass
