"""Real persistence + real SQLite index (catalogue §10.5), and real paging."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from readmodel.live import InMemoryLiveSource
from readmodel.query import SessionQuery
from readmodel.store.sqlite import IndexStore
from readmodel.tools.render import CAP_NOTICE, NO_EVENT_MATCHES, NO_SESSION_MATCHES
from tests.logfactory import step_start, turn_end, turn_start, user
from tests.tools.support import OTHER, W, Session, Spy, build_index, caller, chat, hdr, ok, title_event, tools_for

LIVE_EVENTS = [
    turn_start(0),
    user(1, "marker from the live prior step"),
    step_start(2),
    user(3, "marker from the live current step"),
]


def clock_events() -> list[dict[str, Any]]:
    events = [turn_start(0)]
    for seq, time in ((1, 123), (2, 124), (3, -124), (4, -123)):
        event = user(seq, f"clock reading {seq}")
        event["time"] = time
        events.append(event)
    events.append(turn_end(5))
    return events


def integration_sessions() -> list[Session]:
    many = [turn_start(0), *(user(seq, f"repeated paging phrase number {seq}") for seq in range(1, 6)), turn_end(6)]
    sessions = [
        Session(hdr("p", W, 10), [*chat(["persisted marker text"]), title_event(3, "Persisted")]),
        Session(hdr("clock", W, 20), clock_events()),
        Session(hdr("many", W, 30), many),
        Session(hdr("elsewhere", OTHER, 40), chat(["persisted marker text elsewhere", "repeated paging phrase"])),
    ]
    sessions += [Session(hdr(f"page{i}", W, 100 + i), chat([f"repeated paging phrase in session {i}"])) for i in range(5)]
    return sessions


@pytest.fixture(scope="module")
def live() -> InMemoryLiveSource:
    source = InMemoryLiveSource()
    source.create(hdr("live-me", W, 50), LIVE_EVENTS)
    return source


@pytest.fixture(scope="module")
def integration(tmp_path_factory: pytest.TempPathFactory, live: InMemoryLiveSource) -> Iterator[SessionQuery]:
    db = build_index(tmp_path_factory.mktemp("tools-integration"), integration_sessions())
    query = SessionQuery(IndexStore.open(db), live, {"defaultLimit": 2})
    try:
        yield query
    finally:
        query.close()


def test_1_persisted_and_live_sessions(integration: SessionQuery) -> None:
    me = caller("live-me", W, LIVE_EVENTS)
    tools = tools_for(integration)
    found = ok(tools.call("session_search", {"query": "marker"}, me))
    assert found.startswith("Matching sessions (1):\n\n1. Session p \u2014 Persisted\n")
    assert "live-me" not in found and "elsewhere" not in found
    events = ok(tools.call("session_event_search", {"session_id": "p", "query": "persisted marker"}, me))
    assert "\n1. seq 1 | user/message | current |" in events
    own = ok(tools.call("session_event_search", {"query": "marker"}, me))
    assert own.splitlines() == [
        "Session live-me \u2014 (no title)",
        "",
        "Matching events (1):",
        "1. seq 1 | user/message | current | 1970-01-01T00:00:01.000Z",
        "   Snippet: marker from the live prior step",
    ]
    assert "Availability: live" in ok(tools.call("session_trace", {}, me))


def event_seqs(text: str) -> list[int]:
    return sorted(int(line.split()[2]) for line in text.splitlines() if line[:1].isdigit())


@pytest.mark.parametrize(
    ("time_from", "time_to", "expected"),
    [
        ("1970-01-01T00:00:00.12300001Z", None, [2]),
        ("1970-01-01T00:00:00Z", "1970-01-01T00:00:00.1239999Z", [1]),
        ("1970-01-01T00:00:00.12300001Z", "1970-01-01T00:00:00.1239999Z", []),
        ("1969-12-31T23:59:59.87600001Z", "1969-12-31T23:59:59.999Z", [4]),
        ("1969-12-31T23:59:59Z", "1969-12-31T23:59:59.8769999Z", [3]),
    ],
)
def test_2_fractional_bounds_through_sqlite(integration: SessionQuery, time_from: str, time_to: str | None, expected: list[int]) -> None:
    arguments: dict[str, Any] = {"session_id": "clock", "query": "clock reading", "time_from": time_from}
    if time_to is not None:
        arguments["time_to"] = time_to
    text = ok(tools_for(integration).call("session_event_search", arguments, caller()))
    assert event_seqs(text) == expected
    if not expected:
        assert text.endswith(NO_EVENT_MATCHES)
    cross = {"query": "clock reading", "event_time_from": time_from, **({"event_time_to": time_to} if time_to else {})}
    across = ok(tools_for(integration).call("session_search", cross, caller()))
    if expected:
        assert f"Best match: seq {expected[0]} |" in across
    else:
        assert across == NO_SESSION_MATCHES


def test_real_paging_within_a_session(integration: SessionQuery) -> None:
    spy = Spy(integration)
    text = ok(tools_for(spy).call("session_event_search", {"session_id": "many", "query": "repeated paging"}, caller()))
    assert event_seqs(text) == [1, 2, 3, 4, 5] and CAP_NOTICE not in text
    assert [bool(call.args[0].get("cursor")) for call in spy.of("search_events")] == [False, True, True]
    spy = Spy(integration)
    capped = ok(tools_for(spy, maxSearchResults=3).call(
        "session_event_search", {"session_id": "many", "query": "repeated paging"}, caller()))
    assert len(event_seqs(capped)) == 3 and capped.endswith(CAP_NOTICE)
    assert len(spy.of("search_events")) == 2


def test_real_paging_across_sessions(integration: SessionQuery) -> None:
    spy = Spy(integration)
    text = ok(tools_for(spy).call("session_search", {"query": "repeated paging phrase"}, caller("page0")))
    assert text.startswith("Matching sessions (5):")  # many + page1..page4; page0 is the caller
    assert "elsewhere" not in text and "Session page0" not in text
    assert len(spy.of("search_sessions")) == 3  # 6 same-workspace hits in pages of 2; the caller dropped by the tool
    capped = ok(tools_for(integration, maxSearchResults=4).call("session_search", {"query": "repeated paging phrase"}, caller("page0")))
    assert capped.startswith("Matching sessions (4):") and capped.endswith(CAP_NOTICE)
