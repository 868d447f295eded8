"""Workspace authority and lineage redaction (catalogue §10.4 items 15–35)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from readmodel.core.cancel import AbortController
from readmodel.core.errors import SessionQueryError
from readmodel.query import SessionQuery
from readmodel.tools.errors import GENERIC_FAILURE_MESSAGE, UNAUTHORIZED_MESSAGE
from readmodel.tools.render import (
    HIDDEN_ANCESTORS,
    HIDDEN_PARENT,
    HIDDEN_SUBTREE,
    NO_SESSION_MATCHES,
    ROOT_SESSION,
)
from readmodel.core.vocabulary import SessionRecord
from tests.tools.conftest import ME_EVENTS
from tests.tools.support import OTHER, W, ListLogger, Spy, caller, err, ok, tools_for

UNAUTHORIZED = "SESSION_QUERY_TOOL_UNAUTHORIZED"
FAILED = "SESSION_QUERY_TOOL_FAILED"
ABORTED = "SESSION_QUERY_ABORTED"
DENIED_TEXT = f"Error: {UNAUTHORIZED_MESSAGE}"
GENERIC_TEXT = f"Error: {GENERIC_FAILURE_MESSAGE}"


def raising(error: BaseException) -> Any:
    def hook(_args: tuple[Any, ...]) -> Any:
        raise error

    return hook


def aborting(controller: AbortController, reason: BaseException, cleaned: list[str]) -> Any:
    """A hook that aborts mid-call, then finishes its own cleanup before returning."""

    def hook(_args: tuple[Any, ...]) -> None:
        controller.abort(reason)
        time.sleep(0.01)
        cleaned.append("done")

    return hook


# --------------------------------------------------------------------------- 15–16


def test_15_missing_agent_and_cross_workspace_read(world: SessionQuery) -> None:
    spy = Spy(world)
    tools = tools_for(spy)
    for name, arguments in [
        ("session_search", {"query": "alpha"}),
        ("session_event_search", {"query": "alpha"}),
        ("session_trace", {}),
        ("session_event_trace", {"seq": 1}),
        ("session_event_read", {"seq": 1}),
    ]:
        err(tools.call(name, arguments, None), "SESSION_QUERY_TOOL_MISSING_AGENT")
    assert spy.calls == []
    text = err(tools.call("session_event_read", {"session_id": "outsider", "seq": 1}, caller()), UNAUTHORIZED)
    assert text == DENIED_TEXT and "outsider" not in text
    assert spy.methods() == ["filter_sessions"]


def test_16_caller_without_workspace(world: SessionQuery) -> None:
    spy = Spy(world)
    tools = tools_for(spy)
    nocwd = caller("nocwd", None)
    assert ok(tools.call("session_trace", {}, nocwd)).startswith("Session nocwd \u2014 Nocwd\n")
    assert "filter_sessions" not in spy.methods()
    err(tools.call("session_search", {"query": "alpha"}, nocwd), UNAUTHORIZED)
    assert err(tools.call("session_trace", {"session_id": "nocwd2"}, nocwd), UNAUTHORIZED) == DENIED_TEXT
    assert err(tools.call("session_event_search", {"session_id": "a", "query": "x"}, nocwd), UNAUTHORIZED) == DENIED_TEXT
    assert "filter_sessions" not in spy.methods() and "search_sessions" not in spy.methods()


# --------------------------------------------------------------------------- 17–23 parent guesses


def test_17_hidden_and_nonexistent_parent_guesses_are_indistinguishable(world: SessionQuery) -> None:
    outputs = []
    for guess in ("outsider", "ghost"):
        spy = Spy(world)
        result = tools_for(spy).call("session_search", {"query": "alpha beta", "parent_session_ids": [guess]}, caller())
        outputs.append((result.text, result.is_error, result.code))
        assert "search_sessions" not in spy.methods()
    assert outputs[0] == outputs[1] == (NO_SESSION_MATCHES, False, None)
    # ... while searching for the children directly shows the hidden parent only as a marker.
    text = ok(tools_for(world).call("session_search", {"query": "alpha beta more"}, caller()))
    assert "Session b" in text and f"Parent: {HIDDEN_PARENT}" in text and "outsider" not in text


@pytest.mark.parametrize(
    ("guesses", "expected"),
    [
        (["target", "outsider", "target", "ghost"], ["target", None]),
        (["outsider"], [None]),
        (["ghost", "ghost"], [None]),
    ],
)
def test_18_only_authorized_parent_guesses_reach_the_provider(world: SessionQuery, guesses: list[str], expected: list[Any]) -> None:
    spy = Spy(world)
    ok(tools_for(spy).call(
        "session_search", {"query": "alpha", "parent_session_ids": guesses, "include_root_sessions": True}, caller()))
    auth = spy.of("filter_sessions")[0]  # the later one authorizes the hits' parents
    assert auth.args[0] == [{"kind": "id", "values": list(dict.fromkeys(guesses))}, {"kind": "cwd", "values": [W]}]
    (call,) = spy.of("search_sessions")
    assert call.args[0]["sessionFilters"] == [{"kind": "parent", "values": expected}, {"kind": "cwd", "values": [W]}]


def test_19_unrequested_and_wrong_workspace_records_are_ignored(world: SessionQuery) -> None:
    spy = Spy(world)
    spy.replace["filter_sessions"] = lambda _args: [
        SessionRecord(header={"version": 0, "id": "a", "createdAt": 1, "cwd": W}, live=False, persisted=True),
        SessionRecord(header={"version": 0, "id": "target", "createdAt": 1, "cwd": OTHER}, live=False, persisted=True),
    ]
    text = ok(tools_for(spy).call("session_search", {"query": "alpha", "parent_session_ids": ["target"]}, caller()))
    assert text == NO_SESSION_MATCHES
    assert spy.methods() == ["filter_sessions"]


def test_20_invalid_event_filter_fails_before_parent_authorization(world: SessionQuery) -> None:
    spy = Spy(world)
    err(tools_for(spy).call(
        "session_search", {"query": "alpha", "parent_session_ids": ["target"], "event_types": []}, caller()),
        "SESSION_QUERY_INVALID_FILTER")
    assert spy.calls == []


def test_21_parent_authorization_failure_is_sanitized(world: SessionQuery) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace["filter_sessions"] = raising(SessionQueryError("SESSION_QUERY_SOURCE_CONFLICT", "secret-token-21"))
    result = tools_for(spy, logger).call("session_search", {"query": "alpha", "parent_session_ids": ["target"]}, caller())
    assert err(result, FAILED) == GENERIC_TEXT
    assert "secret-token-21" in logger.text and "id set workspace check" in logger.text
    assert "search_sessions" not in spy.methods()


def test_22_target_authorization_failure_is_sanitized(world: SessionQuery) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace["filter_sessions"] = raising(SessionQueryError("SESSION_QUERY_SOURCE_CONFLICT", "secret-token-22"))
    result = tools_for(spy, logger).call("session_event_search", {"session_id": "a", "query": "alpha"}, caller())
    assert err(result, FAILED) == GENERIC_TEXT
    assert "secret-token-22" in logger.text and "target workspace check" in logger.text
    assert spy.methods() == ["filter_sessions"]


def test_23_cancelling_parent_authorization(world: SessionQuery) -> None:
    spy, logger, controller, cleaned = Spy(world), ListLogger(), AbortController(), []
    reason = SessionQueryError("SESSION_QUERY_ABORTED", "stopped by the user")
    spy.before["filter_sessions"] = aborting(controller, reason, cleaned)
    result = tools_for(spy, logger).call(
        "session_search", {"query": "alpha", "parent_session_ids": ["target"]}, caller(), controller.signal)
    assert err(result, ABORTED) == "Error: stopped by the user"
    assert cleaned == ["done"] and logger.messages == []
    assert "search_sessions" not in spy.methods()


# --------------------------------------------------------------------------- 24–33 lineage


def test_24_trace_hides_outside_parent_and_child_subtree(world: SessionQuery) -> None:
    spy = Spy(world)
    text = ok(tools_for(spy).call("session_trace", {"session_id": "x"}, caller()))
    assert text.splitlines() == [
        "Session x \u2014 Lineage x",
        "Created: 1970-01-01T00:00:00.400Z",
        "Availability: persisted",
        "",
        "Ancestors (closest first):",
        f"- {HIDDEN_ANCESTORS}",
        "",
        "Descendants:",
        f"- {HIDDEN_SUBTREE}",
    ]
    for hidden in ("outsider", "xc", "xg", "Secret", "Hidden"):
        assert hidden not in text
    (titles,) = spy.of("read_title_snapshots")
    assert titles.args[0] == ["x"]


def test_24_hidden_and_missing_parents_render_byte_identically(world: SessionQuery) -> None:
    tools = tools_for(world)
    hidden = ok(tools.call("session_trace", {"session_id": "b"}, caller())).splitlines()
    missing = ok(tools.call("session_trace", {"session_id": "ghostchild"}, caller())).splitlines()
    assert hidden[3:] == missing[3:]
    assert not any("ghost" in line for line in missing[1:])


def test_25_outside_ancestor_cycle(world: SessionQuery) -> None:
    logger = ListLogger()
    text = err(tools_for(world, logger).call("session_trace", {"session_id": "cyc"}, caller()),
               "SESSION_QUERY_INVALID_LINEAGE")
    assert text == "Error: the session ancestry is inconsistent"
    assert "cyc1" in logger.text  # the diagnostic keeps everything, the model sees nothing


@pytest.mark.parametrize(
    ("failure", "code", "message"),
    [
        (SessionQueryError("SESSION_QUERY_SOURCE_CONFLICT", "secret-26"), FAILED, GENERIC_FAILURE_MESSAGE),
        (SessionQueryError("SESSION_QUERY_PERSISTENCE_FAILED", "secret-26"), "SESSION_QUERY_PERSISTENCE_FAILED",
         "stored session history cannot be read right now"),
        (RuntimeError("secret-26"), FAILED, GENERIC_FAILURE_MESSAGE),
    ],
)
def test_26_trace_failures_are_sanitized(world: SessionQuery, failure: Exception, code: str, message: str) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace["trace_session"] = raising(failure)
    assert err(tools_for(spy, logger).call("session_trace", {}, caller()), code) == f"Error: {message}"
    assert "secret-26" in logger.text and "family lookup" in logger.text


@pytest.mark.parametrize(("tool", "method"), [("session_event_trace", "trace_event"), ("session_event_read", "read_event")])
def test_27_event_not_found(world: SessionQuery, tool: str, method: str) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace[method] = raising(SessionQueryError("SESSION_QUERY_EVENT_NOT_FOUND", "secret-27"))
    text = err(tools_for(spy, logger).call(tool, {"session_id": "a", "seq": 1}, caller()), "SESSION_QUERY_EVENT_NOT_FOUND")
    assert text == "Error: that session has no event with this sequence number"
    assert "secret-27" in logger.text and "secret-27" not in text
    # and for real: no event 999 in session a
    real = err(tools_for(world).call(tool, {"session_id": "a", "seq": 999}, caller()), "SESSION_QUERY_EVENT_NOT_FOUND")
    assert real == text


@pytest.mark.parametrize(
    ("tool", "method", "arguments"),
    [
        ("session_trace", "trace_session", {"session_id": "target"}),
        ("session_event_trace", "trace_event", {"session_id": "a", "seq": 1}),
        ("session_event_read", "read_event", {"session_id": "a", "seq": 1}),
    ],
)
def test_28_exact_tools_get_the_callers_signal_and_surface_its_reason(
    world: SessionQuery, tool: str, method: str, arguments: dict[str, Any]
) -> None:
    spy, logger, controller, cleaned = Spy(world), ListLogger(), AbortController(), []
    spy.before[method] = aborting(controller, SessionQueryError("SESSION_QUERY_ABORTED", "reason-28"), cleaned)
    result = tools_for(spy, logger).call(tool, arguments, caller(), controller.signal)
    assert err(result, ABORTED) == "Error: reason-28"
    assert all(call.signal is controller.signal for call in spy.calls)
    assert cleaned == ["done"] and logger.messages == []


def test_29_abort_while_the_trace_resolves(world: SessionQuery) -> None:
    spy, controller = Spy(world), AbortController()
    spy.after["trace_session"] = lambda _args: controller.abort(SessionQueryError("SESSION_QUERY_ABORTED", "reason-29"))
    result = tools_for(spy).call("session_trace", {"session_id": "target"}, caller(), controller.signal)
    assert err(result, ABORTED) == "Error: reason-29"
    assert "read_title_snapshots" not in spy.methods()


def test_30_abort_wins_over_a_lineage_failure(world: SessionQuery) -> None:
    spy, logger, controller = Spy(world), ListLogger(), AbortController()

    def abort_then_fail(_args: tuple[Any, ...]) -> Any:
        controller.abort(SessionQueryError("SESSION_QUERY_ABORTED", "reason-30"))
        raise SessionQueryError("SESSION_QUERY_INVALID_LINEAGE", "secret-30")

    spy.replace["trace_session"] = abort_then_fail
    result = tools_for(spy, logger).call("session_trace", {}, caller(), controller.signal)
    assert err(result, ABORTED) == "Error: reason-30"
    assert logger.messages == []


def test_31_branching_descendants_in_preorder(world: SessionQuery) -> None:
    spy = Spy(world)
    text = ok(tools_for(spy).call("session_trace", {"session_id": "target"}, caller()))
    assert text == "\n".join([
        "Session target \u2014 Target",
        "Created: 1970-01-01T00:00:00.300Z",
        "Availability: persisted",
        "",
        "Ancestors (closest first):",
        f"- {ROOT_SESSION}",
        "",
        "Descendants:",
        "- first \u2014 First | 1970-01-01T00:00:00.310Z | persisted",
        "  - nested \u2014 Nested | 1970-01-01T00:00:00.320Z | persisted",
        f"- {HIDDEN_SUBTREE}",
        "- last \u2014 Last | 1970-01-01T00:00:00.350Z | persisted",
    ])
    (titles,) = spy.of("read_title_snapshots")
    assert titles.args[0] == ["target", "first", "nested", "last"]


def test_32_visible_root_ancestor_and_missing_parent(world: SessionQuery) -> None:
    tools = tools_for(world)
    text = ok(tools.call("session_trace", {"session_id": "nested"}, caller()))
    assert "Ancestors (closest first):\n- first \u2014 First | 1970-01-01T00:00:00.310Z | persisted\n" \
           "- target \u2014 Target | 1970-01-01T00:00:00.300Z | persisted\n\nDescendants:\n- none" in text
    text = ok(tools.call("session_trace", {"session_id": "ghostchild"}, caller()))
    assert f"Ancestors (closest first):\n- {HIDDEN_ANCESTORS}\n" in text


def test_33_unavailable_target_and_the_callers_own_descendant(world: SessionQuery) -> None:
    spy = Spy(world)

    def unavailable(args: tuple[Any, ...]) -> Any:
        trace = world.trace_session(*args)
        trace.target = SessionRecord(header=trace.target.header, live=False, persisted=False)
        return trace

    spy.replace["trace_session"] = unavailable
    text = ok(tools_for(spy).call("session_trace", {"session_id": "target"}, caller("last")))
    assert "Availability: unavailable" in text
    assert "- last \u2014 Last | 1970-01-01T00:00:00.350Z | persisted" in text


# --------------------------------------------------------------------------- 34–35 post-observation


def _moved(result: Any, path: str) -> Any:
    holder = result
    for part in path.split("."):
        holder = getattr(holder, part)
    holder["cwd"] = OTHER
    return result


@pytest.mark.parametrize(
    ("tool", "arguments", "method", "path"),
    [
        ("session_event_search", {"session_id": "a", "query": "alpha"}, "search_events", "session"),
        ("session_trace", {"session_id": "target"}, "trace_session", "target.header"),
        ("session_event_trace", {"session_id": "a", "seq": 1}, "trace_event", "session"),
        ("session_event_read", {"session_id": "a", "seq": 1}, "read_event", "session"),
    ],
)
def test_34_a_target_that_moved_workspace_is_refused(
    world: SessionQuery, tool: str, arguments: dict[str, Any], method: str, path: str
) -> None:
    spy = Spy(world)
    spy.replace[method] = lambda args: _moved(getattr(world, method)(*args), path)
    result = tools_for(spy).call(tool, arguments, caller())
    assert err(result, UNAUTHORIZED) == DENIED_TEXT


def test_34_a_title_observation_that_moved_workspace_is_refused(world: SessionQuery) -> None:
    spy = Spy(world)

    def moved(args: tuple[Any, ...]) -> Any:
        results = world.read_title_snapshots(*args)
        results[-1].value.session["cwd"] = OTHER
        return results

    spy.replace["read_title_snapshots"] = moved
    assert err(tools_for(spy).call("session_trace", {"session_id": "target"}, caller()), UNAUTHORIZED) == DENIED_TEXT
    assert err(tools_for(spy).call("session_search", {"query": "alpha beta"}, caller()), UNAUTHORIZED) == DENIED_TEXT


def test_35_own_session_that_moved_workspace_is_refused(world: SessionQuery) -> None:
    me = caller(events=ME_EVENTS)
    assert "Event seq 1:" in ok(tools_for(world).call("session_event_read", {"seq": 1}, me))
    spy = Spy(world)
    spy.replace["read_event"] = lambda args: _moved(world.read_event(*args), "session")
    assert err(tools_for(spy).call("session_event_read", {"seq": 1}, me), UNAUTHORIZED) == DENIED_TEXT
    assert "filter_sessions" not in spy.methods()  # the own session needs no preflight call
