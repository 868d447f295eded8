"""Argument validation and translation (catalogue §10.4 items 5–14 and 62)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from readmodel.query import SessionQuery
from readmodel.tools import timestamps
from readmodel.tools.render import NO_EVENT_MATCHES, NO_SESSION_MATCHES
from readmodel.tools.timestamps import ExactInstant, days_from_civil, format_instant, parse_timestamp
from tests.tools.conftest import ME_EVENTS
from tests.tools.support import W, Spy, caller, err, ok, tools_for

MIN_DOUBLE = 5e-324
FILTER = "SESSION_QUERY_INVALID_FILTER"
QUERY = "SESSION_QUERY_INVALID_QUERY"
ARGS = "INVALID_ARGS"


def search(spy: Spy, **arguments: Any) -> Any:
    return tools_for(spy).call("session_search", {"query": "alpha", **arguments}, caller(events=ME_EVENTS))


def session_filters(spy: Spy) -> list[dict[str, Any]]:
    (call,) = spy.of("search_sessions")
    return call.args[0]["sessionFilters"]


def event_filters(spy: Spy) -> list[dict[str, Any]]:
    (call,) = spy.of("search_sessions")
    return call.args[0]["eventFilters"]


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"query": " \t\u3000 "}, QUERY),
        ({"query": "a\x00b"}, QUERY),
        ({"session_ids": []}, FILTER),
        ({"parent_session_ids": []}, FILTER),
        ({"availability": []}, FILTER),
        ({"event_types": []}, FILTER),
        ({"event_surfaces": []}, FILTER),
        ({"availability": ["archived"]}, ARGS),
        ({"event_surfaces": ["hidden"]}, ARGS),
        ({"event_seq_from": -1}, FILTER),
        ({"event_seq_to": 2**53}, FILTER),
        ({"event_seq_from": 2, "event_seq_to": 1}, FILTER),
        ({"created_at_from": "2024-01-01T00:00:00"}, FILTER),
        ({"created_at_from": "2024-02-30T00:00:00Z"}, FILTER),
        ({"created_at_from": "2100-02-29T00:00:00Z"}, FILTER),
        ({"created_at_from": "2024-04-31T00:00:00Z"}, FILTER),
        ({"created_at_from": "2024-01-01T24:00:00Z"}, FILTER),
        ({"created_at_from": "2024-01-01T00:60:00Z"}, FILTER),
        ({"created_at_from": "2024-01-01T00:00:60Z"}, FILTER),
        ({"created_at_from": "2024-01-01T00:00:00+24:00"}, FILTER),
        ({"created_at_from": "2024-01-01T00:00:00+00:60"}, FILTER),
        ({"created_at_from": "2024-01-02T00:00:00Z", "created_at_to": "2024-01-01T00:00:00Z"}, FILTER),
    ],
    ids=lambda value: repr(value)[:60],
)
def test_5_session_search_rejections(world: SessionQuery, arguments: dict[str, Any], code: str) -> None:
    spy = Spy(world)
    err(search(spy, **arguments), code)
    assert spy.calls == []


@pytest.mark.parametrize(
    "text",
    [
        "2024-01-01 00:00:00Z",
        "2024-01-01t00:00:00Z",
        "2024-01-01T00:00:00z",
        "2024-01-01T00:00:00+0000",
        "2024-01-01T00:00:00.Z",
        "2024-01-01T00Z",
        "\uff12024-01-01T00:00:00Z",
        "2024-01-01T00:00:00Z\n",
        "24-01-01T00:00:00Z",
    ],
)
def test_5_timestamp_shapes_are_strict(text: str) -> None:
    with pytest.raises(Exception, match="ISO 8601"):
        parse_timestamp(text, "time_from")


def test_5_leap_rule_and_offset_extremes() -> None:
    assert parse_timestamp("2000-02-29T00:00Z", "x").millisecond == 951782400000
    assert parse_timestamp("2024-02-29T00:00Z", "x").millisecond == 1709164800000
    assert parse_timestamp("2024-01-01T00:00:00-23:59", "x").millisecond == 1704067200000 + (23 * 60 + 59) * 60000
    assert parse_timestamp("0000-01-01T00:00:00Z", "x").millisecond == -62167219200000
    assert days_from_civil(1970, 1, 1) == 0


def test_6_full_argument_set_compiles_in_order(world: SessionQuery) -> None:
    spy = Spy(world)
    text = ok(
        search(
            spy,
            query="  alpha \n\t beta  ",
            session_ids=["a", "b"],
            created_at_from="2024-01-02T03:04:05+02:00",
            created_at_to="2024-01-03T00:00:00.5-01:30",
            parent_session_ids=["target"],
            include_root_sessions=True,
            availability=["persisted", "live"],
            event_seq_from=2,
            event_seq_to=9,
            event_time_from="1970-01-01T00:00:00Z",
            event_time_to="2030-01-01T00:00Z",
            event_types=["plugin/open-event", "user/message"],
            event_surfaces=["current", "log-only"],
        )
    )
    (call,) = spy.of("search_sessions")
    request = call.args[0]
    assert request["query"] == "alpha beta"
    assert "limit" not in request and "cursor" not in request
    assert request["sessionFilters"] == [
        {"kind": "id", "values": ["a", "b"]},
        {"kind": "created-at", "from": 1704157445000, "to": 1704245400500},
        {"kind": "availability", "values": ["persisted", "live"]},
        {"kind": "parent", "values": ["target", None]},
        {"kind": "cwd", "values": [W]},
    ]
    assert request["eventFilters"] == [
        {"kind": "seq", "from": 2, "to": 9},
        {"kind": "time", "from": 0, "to": 1893456000000},
        {"kind": "type", "values": ["plugin/open-event", "user/message"]},
        {"kind": "surface", "values": ["current", "log-only"]},
    ]
    assert text == NO_SESSION_MATCHES  # the 2024 creation window excludes every session


@pytest.mark.parametrize(("fraction", "offset"), [(".1", 100), (".12", 120), (".123", 123)])
def test_7_fractions_are_exact_milliseconds(world: SessionQuery, fraction: str, offset: int) -> None:
    spy = Spy(world)
    ok(search(spy, created_at_from=f"2024-01-01T00:00:00{fraction}Z"))
    assert session_filters(spy)[0] == {"kind": "created-at", "from": 1704067200000 + offset}


def test_8_same_millisecond_sub_ms_bounds(world: SessionQuery) -> None:
    spy = Spy(world)
    text = ok(
        search(spy, event_time_from="1970-01-01T00:00:00.12300001Z", event_time_to="1970-01-01T08:00:00.1239999+08:00")
    )
    (clause,) = event_filters(spy)
    assert 123 < clause["from"] < clause["to"] < 124
    assert math.isfinite(clause["from"]) and math.isfinite(clause["to"])
    assert text == NO_SESSION_MATCHES


def test_9_bounds_reversed_below_a_millisecond(world: SessionQuery) -> None:
    spy = Spy(world)
    text = err(
        search(spy, created_at_from="2024-01-01T00:00:00.1239999Z", created_at_to="2024-01-01T00:00:00.12300001Z"), FILTER
    )
    assert "created_at" in text
    assert spy.calls == []


def test_10_remainders_compare_as_decimals(world: SessionQuery) -> None:
    spy = Spy(world)
    ok(search(spy, event_time_from="2024-01-01T00:00:00.1231Z", event_time_to="2024-01-01T00:00:00.12311Z"))
    assert len(spy.of("search_sessions")) == 1
    spy = Spy(world)
    err(search(spy, event_time_from="2024-01-01T00:00:00.12311Z", event_time_to="2024-01-01T00:00:00.1231Z"), FILTER)
    assert spy.calls == []


def test_11_trailing_zeros_do_not_matter(world: SessionQuery) -> None:
    spy = Spy(world)
    ok(search(spy, event_time_from="2024-01-01T00:00:00.1230000100Z", event_time_to="2024-01-01T00:00:00.12300001Z"))
    (clause,) = event_filters(spy)
    assert clause["from"] == math.nextafter(1704067200123.0, math.inf)
    assert clause["to"] == math.nextafter(1704067200124.0, -math.inf)
    assert len(spy.of("search_sessions")) == 1
    assert ExactInstant(5, "1").compare(ExactInstant(5, "1")) == 0


def test_12_adjacent_doubles_around_the_epoch(world: SessionQuery) -> None:
    spy = Spy(world)
    ok(search(spy, created_at_from="1970-01-01T00:00:00.0000001Z", created_at_to="1970-01-01T00:00:01Z"))
    assert session_filters(spy)[0]["from"] == MIN_DOUBLE
    spy = Spy(world)
    ok(search(spy, created_at_to="1969-12-31T23:59:59.9999999Z"))
    assert session_filters(spy)[0]["to"] == -MIN_DOUBLE
    spy = Spy(world)
    text = ok(
        tools_for(spy).call(
            "session_event_search",
            {"session_id": "a", "query": "alpha", "time_from": "1969-12-31T23:59:59.87600001Z",
             "time_to": "1969-12-31T23:59:59.8769999Z"},
            caller(),
        )
    )
    (call,) = spy.of("search_events")
    (clause,) = call.args[0]["filters"]
    assert -124 < clause["from"] < clause["to"] < -123
    assert text.endswith(NO_EVENT_MATCHES)


def test_13_a_failed_instant_computation_is_rejected(world: SessionQuery, monkeypatch: pytest.MonkeyPatch) -> None:
    # Python has no Date.parse returning NaN; the seam that computes the instant stands in for it.
    monkeypatch.setattr(timestamps, "_epoch_ms", lambda *_args: math.nan)
    spy = Spy(world)
    text = err(search(spy, created_at_from="2024-01-01T00:00:00Z"), FILTER)
    assert "created_at_from" in text
    assert spy.calls == []


def test_14_minutes_only_one_sided_and_parent_shapes(world: SessionQuery) -> None:
    spy = Spy(world)
    ok(search(spy, created_at_from="2024-01-01T00:00Z", event_time_to="2024-01-01T10:30+01:00"))
    assert session_filters(spy)[0] == {"kind": "created-at", "from": 1704067200000}
    assert event_filters(spy) == [{"kind": "time", "to": 1704101400000}]
    spy = Spy(world)
    ok(search(spy, include_root_sessions=True))
    assert session_filters(spy)[0] == {"kind": "parent", "values": [None]}
    assert spy.methods() == ["search_sessions", "read_title_snapshots"]  # root-only: no parent to authorize
    spy = Spy(world)
    ok(search(spy, parent_session_ids=["target"]))
    assert session_filters(spy)[0] == {"kind": "parent", "values": ["target"]}


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("session_event_trace", {"seq": -1}, FILTER),
        ("session_event_read", {"seq": 2**53}, FILTER),
        ("session_event_read", {"seq": 1, "before": -1}, FILTER),
        ("session_event_read", {"seq": 1, "after": 1.5}, ARGS),
    ],
)
def test_62_exact_tool_integers(world: SessionQuery, tool: str, arguments: dict[str, Any], code: str) -> None:
    spy = Spy(world)
    # Validated before the caller is even looked at: no caller here.
    err(tools_for(spy).call(tool, {"session_id": "a", **arguments}, None), code)
    assert spy.calls == []


def test_62_schema_shapes(world: SessionQuery) -> None:
    tools = tools_for(world)
    me = caller()
    err(tools.call("session_event_read", {"session_id": "a"}, me), ARGS)
    err(tools.call("session_event_read", {"session_id": "a", "seq": True}, me), ARGS)
    err(tools.call("session_event_read", {"session_id": 5, "seq": 1}, me), ARGS)
    err(tools.call("session_search", {"query": "x", "limit": 5}, me), ARGS)
    err(tools.call("session_search", {"query": "x", "session_ids": [1]}, me), ARGS)
    err(tools.call("session_search", {"query": "x", "include_root_sessions": "yes"}, me), ARGS)
    err(tools.call("session_search", None, me), ARGS)
    err(tools.call("no_such_tool", {}, me), "TOOL_NOT_FOUND")
    assert "Event seq 1:" in ok(tools.call("session_event_read", {"session_id": "a", "seq": 1.0}, me))


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (30, "1970-01-01T00:00:00.030Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (1785916902430, "2026-08-05T08:01:42.430Z"),
        (-62167219200000, "0000-01-01T00:00:00.000Z"),
        (-62167219200001, "-000001-12-31T23:59:59.999Z"),
        (253402300800000, "+010000-01-01T00:00:00.000Z"),
        (8.64e15, "+275760-09-13T00:00:00.000Z"),
        (-0.5, "1970-01-01T00:00:00.000Z"),
        (8.64e15 + 1, "invalid time"),
        ("1", "invalid time"),
    ],
)
def test_times_render_like_to_iso_string(ms: Any, text: str) -> None:
    assert format_instant(ms) == text
