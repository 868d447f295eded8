"""Trace and read rendering (catalogue §10.4 items 58–61) and the JSON layout."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from readmodel.query import SessionQuery
from readmodel.tools.render import NO_TEXT, pretty_json
from tests.logfactory import step_start, turn_end, turn_start, user
from tests.tools.support import Session, Spy, build_index, caller, hdr, ok, open_query, title_event, tools_for

LONG_TEXT = "needle " + "unabridged words " * 400 + "the very end"
DEPTH = 3000


def rendering_sessions() -> list[Session]:
    events = [
        turn_start(0),
        user(1, "first words"),
        user(2, "replacement words\nsecond line", surface_op={"op": "replace", "start": 1, "end": 1}, sources=[1]),
        user(3, LONG_TEXT),
        step_start(4),
        title_event(5, "Rendering"),
        turn_end(6),
    ]
    events[3]["time"] = 1_700_000_000_030
    return [Session(hdr("r", created_at=1_700_000_000_000), events)]


@pytest.fixture(scope="module")
def rendering(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionQuery]:
    query = open_query(build_index(tmp_path_factory.mktemp("tools-render"), rendering_sessions()))
    try:
        yield query
    finally:
        query.close()


@pytest.fixture(scope="module")
def deep_chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionQuery]:
    start = [turn_start(0)]
    sessions = [Session(hdr(f"d{i:04d}", created_at=i + 1, parent=f"d{i - 1:04d}" if i else None), start) for i in range(DEPTH + 1)]
    query = open_query(build_index(tmp_path_factory.mktemp("tools-deep"), sessions))
    try:
        yield query
    finally:
        query.close()


def test_58_a_3000_deep_descendant_chain(deep_chain: SessionQuery) -> None:
    spy = Spy(deep_chain)
    lines = ok(tools_for(spy).call("session_trace", {"session_id": "d0000"}, caller())).splitlines()
    assert lines[-1] == " " * (2 * (DEPTH - 1)) + f"- d{DEPTH:04d} \u2014 (no title) | 1970-01-01T00:00:03.001Z | persisted"
    assert lines[lines.index("Descendants:") + 1] == "- d0001 \u2014 (no title) | 1970-01-01T00:00:00.002Z | persisted"
    (titles,) = spy.of("read_title_snapshots")
    assert len(titles.args[0]) == DEPTH + 1
    # and the other way up: 3000 ancestors, nearest first
    up = ok(tools_for(deep_chain).call("session_trace", {"session_id": f"d{DEPTH:04d}"}, caller())).splitlines()
    assert up[5] == f"- d{DEPTH - 1:04d} \u2014 (no title) | 1970-01-01T00:00:03.000Z | persisted"
    assert up[4 + DEPTH] == "- d0000 \u2014 (no title) | 1970-01-01T00:00:00.001Z | persisted"


def test_59_event_trace(rendering: SessionQuery) -> None:
    text = ok(tools_for(rendering).call("session_event_trace", {"session_id": "r", "seq": 1}, caller()))
    assert text.splitlines() == [
        "Session r \u2014 Rendering",
        "Target: seq 1 | user/message | shadowed | 1970-01-01T00:00:01.000Z",
        "Replaced by: 2",
        "Replacement chain: 2",
        "Replaces: none",
        "Cites as sources: none",
        "Derived events: 2",
    ]
    replacement = ok(tools_for(rendering).call("session_event_trace", {"session_id": "r", "seq": 2}, caller()))
    assert "Replaces: 1\nCites as sources: 1\nDerived events: none" in replacement


def test_60_event_read_is_unabridged(rendering: SessionQuery) -> None:
    text = ok(tools_for(rendering).call("session_event_read", {"session_id": "r", "seq": 3, "before": 1, "after": 1}, caller()))
    lines = text.split("\n")
    assert lines[:3] == ["Session r \u2014 Rendering", "Event seq 3:", "```json"]
    fence_end = lines.index("```", 3)
    event = json.loads("\n".join(lines[3:fence_end]))
    assert event["data"]["content"][0]["text"] == LONG_TEXT and event["time"] == 1_700_000_000_030
    assert list(event) == ["type", "seq", "time", "data", "surfaceOp"]
    assert lines[fence_end:] == [
        "```",
        "",
        "Before:",
        "- seq 2 | user/message | 1970-01-01T00:00:01.000Z",
        "  replacement words",
        "  second line",
        "",
        "After:",
        f"- seq 4 | step/start | 1970-01-01T00:00:01.000Z | {NO_TEXT}",
    ]
    assert "\u2026" not in text


def test_61_empty_relations_and_one_sided_windows(rendering: SessionQuery) -> None:
    tools = tools_for(rendering)
    trace = ok(tools.call("session_event_trace", {"session_id": "r", "seq": 3}, caller()))
    assert trace.splitlines()[1:] == [
        "Target: seq 3 | user/message | current | 2023-11-14T22:13:20.030Z",
        "Replaced by: none",
        "Replacement chain: none",
        "Replaces: none",
        "Cites as sources: none",
        "Derived events: none",
    ]
    after_only = ok(tools.call("session_event_read", {"session_id": "r", "seq": 4, "after": 2}, caller()))
    assert "Before:" not in after_only and after_only.endswith(
        f"After:\n- seq 5 | session/title | 1970-01-01T00:00:01.000Z | {NO_TEXT}\n"
        f"- seq 6 | turn/end | 1970-01-01T00:00:01.000Z | {NO_TEXT}")
    before_only = ok(tools.call("session_event_read", {"session_id": "r", "seq": 1, "before": 5}, caller()))
    assert "After:" not in before_only and before_only.endswith(f"Before:\n- seq 0 | turn/start | 1970-01-01T00:00:01.000Z | {NO_TEXT}")
    neither = ok(tools.call("session_event_read", {"session_id": "r", "seq": 0}, caller()))
    assert neither.endswith("```") and "Before:" not in neither and "After:" not in neither


def test_json_layout_matches_js_stringify() -> None:
    value = {"a": [1, 2.0, 1e21, 0.1, -0.0, None, True], "b": {}, "c": [], "d": "é\u2028\n\"\\", "e": "\ud800x"}
    assert pretty_json(value) == "\n".join([
        "{",
        '  "a": [',
        "    1,",
        "    2,",
        "    1e+21,",
        "    0.1,",
        "    0,",
        "    null,",
        "    true",
        "  ],",
        '  "b": {},',
        '  "c": [],',
        '  "d": "é\u2028\\n\\"\\\\",',
        '  "e": "\\ud800x"',
        "}",
    ])
    deep: object = "core"
    for _ in range(5000):
        deep = {"k": [deep]}
    assert pretty_json(deep).count("\n") == 4 * 5000
    assert pretty_json("x") == '"x"' and pretty_json(float("nan")) == "null"

