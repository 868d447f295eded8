"""``sessionq mcp``: the five session tools as an MCP server over stdio.

Built on the official ``mcp`` SDK's low-level server.  The caller every tool
call runs as is fixed when the server starts: the workspace ``--cwd DIR``
and, with ``--session ID``, that session (its own events, for the current
session cut-off, are read from the index on each call that needs them).
Without ``--session`` the caller is the workspace alone: tools that default
to "the current session" then need an explicit ``session_id``.

Every tool is advertised as read-only, non-destructive, idempotent and
closed-world.  Tool failures are tool results with ``isError: true``, the
text ``Error: <message>`` and the code in ``_meta`` under
:data:`ERROR_CODE_META_KEY`; they are never protocol errors.  The
system-prompt section becomes the server's ``instructions``.

Tool calls run in worker threads (the query engine is synchronous) under the
tools' exclusive/parallel gate; a request the client cancels aborts its
execution signal, which interrupts a running search.

Both SDK generations in the supported range are handled: 2.x registers
handlers through the ``Server`` constructor, 1.x through decorators.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

import anyio

from readmodel.core.cancel import AbortController
from readmodel.core.errors import SessionQueryError
from readmodel.tools.access import Caller, LazyCaller
from readmodel.tools.errors import ABORTED, ToolError
from readmodel.tools.host import PROMPT_SECTION_TEXT, SessionTools, ToolDefinition, ToolResult
from readmodel.core.vocabulary import Event

SERVER_NAME: Final = "sessionq"
ERROR_CODE_META_KEY: Final = "sessionq/errorCode"
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _package_version() -> str:
    try:
        return version("sessionq")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


def wire_text(text: str) -> str:
    """Text that can travel as UTF-8 JSON (a lone surrogate becomes U+FFFD)."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def tool_descriptor(definition: ToolDefinition) -> dict[str, Any]:
    """The MCP ``Tool`` object of one definition, in wire (camelCase) form."""
    return {
        "name": definition.name,
        "title": definition.title,
        "description": definition.description,
        "inputSchema": dict(definition.input_schema),
        "annotations": {
            "title": definition.title,
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    }


def result_payload(result: ToolResult) -> dict[str, Any]:
    """The MCP ``CallToolResult`` of a tool result, in wire form (one text block)."""
    payload: dict[str, Any] = {"content": [{"type": "text", "text": wire_text(result.text)}], "isError": result.is_error}
    if result.code is not None:
        payload["_meta"] = {ERROR_CODE_META_KEY: result.code}
    return payload


class ToolServer:
    """The SDK-independent half of the server: tools, caller and threaded calls."""

    def __init__(self, tools: SessionTools, caller_factory: Callable[[], Caller]) -> None:
        self.tools = tools
        self.caller_factory = caller_factory

    def descriptors(self) -> list[dict[str, Any]]:
        return [tool_descriptor(definition) for definition in self.tools.definitions]

    async def call(self, name: str, arguments: dict[str, Any] | None) -> ToolResult:
        """Run one call in a worker thread; cancelling the request aborts the execution."""
        controller = AbortController()
        caller = self.caller_factory()
        try:
            return await anyio.to_thread.run_sync(
                lambda: self.tools.call(name, arguments, caller, controller.signal), abandon_on_cancel=True
            )
        except anyio.get_cancelled_exc_class():
            controller.abort(ToolError(ABORTED, "the client cancelled this tool call"))
            raise


def _modern_server(tool_server: ToolServer) -> Any:
    """An SDK 2.x ``Server`` (handlers passed to the constructor)."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    tools = [types.Tool.model_validate(descriptor) for descriptor in tool_server.descriptors()]

    async def on_list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(_ctx: Any, params: Any) -> Any:
        result = await tool_server.call(params.name, params.arguments)
        return types.CallToolResult.model_validate(result_payload(result))

    return Server(
        SERVER_NAME,
        version=_package_version(),
        instructions=PROMPT_SECTION_TEXT,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


class _ToolFailure(Exception):
    """SDK 1.x reports a raised error as an ``isError`` result with its text."""


def _accepts_whole_results(decorator: Any) -> bool:
    """Whether a 1.x ``call_tool`` handler may return a ``CallToolResult`` itself
    (later 1.x releases; earlier ones only take content lists)."""
    try:
        return "CallToolResult)" in inspect.getsource(decorator)
    except (OSError, TypeError):
        return False


def _legacy_server(tool_server: ToolServer) -> Any:
    """An SDK 1.x ``Server`` (handlers registered with decorators)."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    server = Server(SERVER_NAME, version=_package_version(), instructions=PROMPT_SECTION_TEXT)
    tools = [types.Tool.model_validate(descriptor) for descriptor in tool_server.descriptors()]

    @server.list_tools()  # type: ignore[misc]
    async def list_tools() -> list[Any]:
        return tools

    decorator = server.call_tool
    options = {"validate_input": False} if "validate_input" in inspect.signature(decorator).parameters else {}
    whole_results = _accepts_whole_results(decorator)

    @decorator(**options)  # type: ignore[misc]
    async def call_tool(name: str, arguments: dict[str, Any] | None) -> Any:
        result = await tool_server.call(name, arguments)
        if whole_results:
            return types.CallToolResult.model_validate(result_payload(result))
        if result.is_error:  # early 1.x: only a raised error becomes an error result (no code)
            raise _ToolFailure(wire_text(result.text))
        return [types.TextContent(type="text", text=wire_text(result.text))]

    return server


def build_server(tools: SessionTools, caller_factory: Callable[[], Caller]) -> Any:
    """The MCP low-level server exposing ``tools`` as called by ``caller_factory()``."""
    from mcp.server.lowlevel import Server

    tool_server = ToolServer(tools, caller_factory)
    if "on_call_tool" in inspect.signature(Server.__init__).parameters:
        return _modern_server(tool_server)
    return _legacy_server(tool_server)


def index_caller_factory(query: Any, cwd: str, session_id: str | None) -> Callable[[], Caller]:
    """Callers for a server bound to ``cwd`` (and ``session_id``): the session's
    own events are read from the index when a call needs them."""

    def load_events() -> Sequence[Event]:
        if session_id is None:
            return ()
        try:
            return query.read_session(session_id).events
        except SessionQueryError:
            return ()  # not indexed (yet): no step to cut off at

    return lambda: LazyCaller(session_id, cwd, load_events)


async def serve_stdio(server: Any) -> None:
    """Serve one MCP connection on this process's stdin/stdout until it closes."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run(db: str, cwd: str, session_id: str | None = None, config: Any = None) -> None:
    """Open the index at ``db`` and serve the tools over stdio (blocks until EOF)."""
    from readmodel.query import SessionQuery

    query = SessionQuery.open(db)
    try:
        tools = SessionTools(query, config)
        server = build_server(tools, index_caller_factory(query, cwd, session_id))
        anyio.run(serve_stdio, server)
    finally:
        query.close()
