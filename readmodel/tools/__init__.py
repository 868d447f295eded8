"""The five model-facing session tools (search-tools spec §8).

``session_search``, ``session_event_search``, ``session_trace``,
``session_event_trace`` and ``session_event_read``: workspace-authorised,
cursor-free views of the session history for a model, rendered as text.

Public API (see :mod:`readmodel.tools.host`)::

    from readmodel.tools import SessionTools, ToolCaller, call_tool
    tools = SessionTools(SessionQuery.open("index.db"), {"maxSearchResults": 50})
    result = tools.call("session_trace", {}, ToolCaller("s1", "/work/project", events))

The MCP server over stdio is :mod:`readmodel.tools.mcpserver`
(``sessionq mcp --cwd DIR [--session ID] [--db PATH]``; the command itself
is :mod:`readmodel.cli.mcp`).

Owns: the tools' inputs, workspace authorisation, paging, deadlines, text
rendering and the MCP server.

Imports: the engine and the layers below it (never the CLI or HTTP adapters).
"""

from __future__ import annotations

from readmodel.tools.access import Caller, LazyCaller, ToolCaller
from readmodel.tools.errors import ToolError, ToolTimeout
from readmodel.tools.host import (
    PROMPT_SECTION,
    TOOL_CONFIG_SCHEMA,
    TOOL_NAMES,
    PromptSection,
    SessionTools,
    ToolConfig,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    call_tool,
    load_tool_config,
    present_call,
    validate_tool_config,
)

__all__ = [
    "PROMPT_SECTION",
    "TOOL_CONFIG_SCHEMA",
    "TOOL_NAMES",
    "Caller",
    "LazyCaller",
    "PromptSection",
    "SessionTools",
    "ToolCaller",
    "ToolConfig",
    "ToolDefinition",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "ToolTimeout",
    "call_tool",
    "load_tool_config",
    "present_call",
    "validate_tool_config",
]
