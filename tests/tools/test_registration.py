"""Registration, schemas, configuration (catalogue §10.4 items 1–4)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from readmodel.query import SessionQuery
from readmodel.tools import (
    PROMPT_SECTION,
    TOOL_CONFIG_SCHEMA,
    TOOL_NAMES,
    SessionTools,
    ToolConfig,
    ToolRegistry,
    load_tool_config,
    present_call,
    validate_tool_config,
)
from tests.tools.support import caller, ok, tools_for

FORBIDDEN_PARAMETERS = {"cursor", "limit", "offset", "page_size", "pageSize", "cwd"}


def test_1_five_tools_in_order_with_schemas_timeouts_and_concurrency(world: SessionQuery) -> None:
    tools = tools_for(world, searchTimeoutMs=1234)
    assert [definition.name for definition in tools.definitions] == list(TOOL_NAMES) == [
        "session_search",
        "session_event_search",
        "session_trace",
        "session_event_trace",
        "session_event_read",
    ]
    by_name = {definition.name: definition for definition in tools.definitions}
    for definition in tools.definitions:
        assert not FORBIDDEN_PARAMETERS & set(definition.input_schema["properties"])
        assert definition.output_schema == {"type": "string"}
        assert definition.description and definition.input_schema["type"] == "object"
    assert by_name["session_search"].input_schema["required"] == ["query"]
    assert by_name["session_search"].timeout_ms == 1234
    assert by_name["session_event_search"].timeout_ms == 1234
    assert by_name["session_trace"].timeout_ms is None
    assert [name for name, d in by_name.items() if d.concurrency_safe] == [
        "session_trace",
        "session_event_trace",
        "session_event_read",
    ]
    result = tools.call("session_trace", {"session_id": "target"}, caller())
    assert result.content() == [{"type": "text", "text": ok(result)}]


def test_1_call_cards() -> None:
    assert present_call("session_search", {"query": "q"}) == {
        "card": "generic", "kind": "search", "title": "Search earlier sessions", "rawInput": "q"}
    assert present_call("session_event_search", {"query": "q"}) == {
        "card": "generic", "kind": "search", "title": "Search events of a session", "rawInput": "q"}
    assert present_call("session_trace", {}) == {"card": "generic", "kind": "read", "title": "Family of this session"}
    assert present_call("session_trace", {"session_id": "s2"}) == {
        "card": "generic", "kind": "read", "title": "Family of session s2", "rawInput": "s2"}
    assert present_call("session_event_trace", {"seq": 3}) == {
        "card": "generic", "kind": "read", "title": "Relations of event 3", "rawInput": {"seq": 3}}
    assert present_call("session_event_read", {"session_id": "s2", "seq": 4}) == {
        "card": "generic", "kind": "read", "title": "Show event 4", "rawInput": {"session_id": "s2", "seq": 4}}


def test_1_prompt_section_and_disposal(world: SessionQuery) -> None:
    assert PROMPT_SECTION.name == "tool:session-query"
    assert PROMPT_SECTION.order == 113
    assert "session_search" in PROMPT_SECTION.text and "earlier session" in PROMPT_SECTION.text
    registry = ToolRegistry()
    dispose = tools_for(world).register(registry)
    assert list(registry.tools) == list(TOOL_NAMES)
    assert list(registry.prompt_sections) == ["tool:session-query"]
    dispose()
    assert registry.tools == {} and registry.prompt_sections == {}


def test_2_execution_modes(world: SessionQuery) -> None:
    modes = {definition.name: definition.execution_mode for definition in tools_for(world).definitions}
    assert modes == {
        "session_search": "exclusive",
        "session_event_search": "exclusive",
        "session_trace": "parallel",
        "session_event_trace": "parallel",
        "session_event_read": "parallel",
    }


@pytest.mark.parametrize(
    ("config", "mentions"),
    [
        ({"maxSearchResults": 0}, "maxSearchResults"),
        ({"maxSearchResults": 1.5}, "maxSearchResults"),
        ({"maxSearchResults": math.nan}, "maxSearchResults"),
        ({"searchTimeoutMs": 0}, "no greater than 2147483647"),
        ({"searchTimeoutMs": 1.5}, "no greater than 2147483647"),
        ({"searchTimeoutMs": math.inf}, "no greater than 2147483647"),
        ({"searchTimeoutMs": 2**31}, "no greater than 2147483647"),
    ],
)
def test_3_direct_config_is_refused_before_anything_registers(world: SessionQuery, config: dict[str, Any], mentions: str) -> None:
    registry = ToolRegistry()
    with pytest.raises(TypeError, match=mentions):
        SessionTools(world, config).register(registry)
    assert registry.tools == {}
    with pytest.raises(TypeError, match=mentions):
        validate_tool_config(config)


def test_3_a_context_without_the_query_service_is_refused() -> None:
    with pytest.raises(TypeError):
        SessionTools(None)
    with pytest.raises(TypeError):
        SessionTools(object())


def test_3_defaults() -> None:
    assert validate_tool_config() == ToolConfig(100, 30_000)
    assert validate_tool_config({"max_search_results": 7, "search_timeout_ms": 9}) == ToolConfig(7, 9)


def test_4_loader_schema() -> None:
    assert TOOL_CONFIG_SCHEMA["properties"]["searchTimeoutMs"]["maximum"] == 2147483647
    assert load_tool_config({"searchTimeoutMs": 2147483647}) == ToolConfig(100, 2147483647)
    for bad in ({"searchTimeoutMs": 1.5}, {"searchTimeoutMs": 2147483648}, {"maxSearchResults": 0}):
        with pytest.raises(ValueError):
            load_tool_config(bad)
