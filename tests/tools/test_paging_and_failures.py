"""Search paging, caps, failure containment, titles, cancellation, deadlines
(catalogue §10.4 items 36–57)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import pytest

from readmodel.core.cancel import AbortController
from readmodel.core.errors import SessionQueryError
from readmodel.query import SessionQuery
from readmodel.core.requests import SessionTitleObservationResult
from readmodel.search.sqlite import SqliteSearchBackend
from readmodel.search.vocabulary import SessionEventSearchHit, SessionEventSearchPage, SessionSearchHit, SessionSearchPage
from readmodel.tools.boundary import CAUSE_CYCLE, UNPRINTABLE
from readmodel.tools.errors import GENERIC_FAILURE_MESSAGE, UNAUTHORIZED_MESSAGE, ToolError
from readmodel.tools.render import CAP_NOTICE, HIDDEN_PARENT, NO_EVENT_MATCHES
from readmodel.tools.runtime import DeadlineSignal
from tests.logfactory import turn_start, user
from tests.tools.conftest import ME_EVENTS
from tests.tools.support import OTHER, W, ListLogger, RaisingLogger, Spy, caller, err, hdr, ok, tools_for

FAILED = "SESSION_QUERY_TOOL_FAILED"
ABORTED = "SESSION_QUERY_ABORTED"
GENERIC_TEXT = f"Error: {GENERIC_FAILURE_MESSAGE}"


def hit(session_id: str, cwd: str | None = W, parent: str | None = None, live: bool = False, persisted: bool = True) -> SessionSearchHit:
    match = SessionEventSearchHit(session_id=session_id, seq=1, type="user/message", time=30, surface="current",
                                  snippet=f"snippet of {session_id}")
    return SessionSearchHit(header=hdr(session_id, cwd, 1, parent), live=live, persisted=persisted, best_match=match)


def event_hit(seq: int) -> SessionEventSearchHit:
    return SessionEventSearchHit(session_id="a", seq=seq, type="user/message", time=30, surface="current", snippet=f"s{seq}")


def scripted(pages: dict[str | None, Any]) -> Any:
    """Answer each request by its cursor."""
    return lambda args: pages[args[0].get("cursor")]


def session_page(items: Sequence[SessionSearchHit], cursor: str | None = None) -> SessionSearchPage:
    return SessionSearchPage(items=list(items)) if cursor is None else SessionSearchPage(items=list(items), next_cursor=cursor)


def event_page(items: Sequence[SessionEventSearchHit], cursor: str | None = None) -> SessionEventSearchPage:
    session = hdr("a", W, 100)
    if cursor is None:
        return SessionEventSearchPage(session=session, items=list(items))
    return SessionEventSearchPage(session=session, items=list(items), next_cursor=cursor)


def raising(error: BaseException) -> Any:
    def hook(_args: tuple[Any, ...]) -> Any:
        raise error

    return hook


def rejected(*pairs: tuple[str, Any]) -> Any:
    return lambda _args: [SessionTitleObservationResult(session_id=sid, status="rejected", reason=reason) for sid, reason in pairs]


# --------------------------------------------------------------------------- 36–37 paging and the cap


def test_36_pages_are_followed_and_capped(world: SessionQuery) -> None:
    spy = Spy(world)
    spy.replace["search_sessions"] = scripted({
        None: session_page([hit("me"), hit("a")], "c1"),
        "c1": session_page([hit("outsider", OTHER), hit("b", parent="outsider")], "c2"),
        "c2": session_page([hit("target")]),
    })
    text = ok(tools_for(spy, maxSearchResults=2).call("session_search", {"query": "alpha"}, caller()))
    requests = [call.args[0] for call in spy.of("search_sessions")]
    assert [request.get("cursor") for request in requests] == [None, "c1", "c2"]
    assert all("limit" not in request for request in requests)
    assert "1. Session a \u2014 Alpha" in text and "2. Session b \u2014 Beta" in text
    assert f"Parent: {HIDDEN_PARENT}" in text
    assert text.endswith(f"\n\n{CAP_NOTICE}")
    for absent in ("outsider", "Session me", "Session target", "3."):
        assert absent not in text


def test_37_rejected_hits_after_the_cap_do_not_count(world: SessionQuery) -> None:
    spy = Spy(world)
    spy.replace["search_sessions"] = scripted({
        None: session_page([hit("a")], "c1"),
        "c1": session_page([hit("me"), hit("outsider", OTHER)]),
    })
    text = ok(tools_for(spy, maxSearchResults=1).call("session_search", {"query": "alpha"}, caller()))
    assert len(spy.of("search_sessions")) == 2
    assert CAP_NOTICE not in text and text.startswith("Matching sessions (1):")


def test_self_exclusion_with_the_real_provider(world: SessionQuery) -> None:
    text = ok(tools_for(world).call("session_search", {"query": "caller note"}, caller(events=ME_EVENTS)))
    assert text == "No earlier session in this workspace matches."
    other = ok(tools_for(world).call("session_search", {"query": "caller note"}, caller("a")))
    assert "1. Session me \u2014 (no title)" in other


# --------------------------------------------------------------------------- 38–44 failure containment


class StringCause(RuntimeError):
    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


@pytest.mark.parametrize(
    ("tool", "method", "arguments"),
    [
        ("session_search", "search_sessions", {"query": "alpha"}),
        ("session_event_search", "search_events", {"session_id": "a", "query": "alpha"}),
    ],
)
@pytest.mark.parametrize(
    "failure",
    [
        SessionQueryError("SESSION_QUERY_SOURCE_CONFLICT", "secret-primary", RuntimeError("secret-cause")),
        StringCause("secret-primary", "secret-cause"),
    ],
    ids=["coded-with-error-cause", "plain-with-string-cause"],
)
def test_38_provider_failures_are_contained(world: SessionQuery, tool: str, method: str, arguments: dict[str, Any], failure: Exception) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace[method] = raising(failure)
    assert err(tools_for(spy, logger).call(tool, arguments, caller()), FAILED) == GENERIC_TEXT
    assert "secret-primary" in logger.text and "secret-cause" in logger.text
    assert "caused by: " in logger.text


class ClassTrap(RuntimeError):
    """Inspecting its class fails (the nearest thing to a hostile JS proxy)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("class trap")


class TracebackTrap(RuntimeError):
    @property
    def __traceback__(self) -> Any:  # type: ignore[override]
        raise RuntimeError("traceback trap")


class CauseTrap(RuntimeError):
    @property
    def cause(self) -> Any:
        raise RuntimeError("cause trap")


class StrTrap(RuntimeError):
    def __str__(self) -> str:
        raise RuntimeError("str trap")


class CodeTrap(SessionQueryError):
    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)

    @property
    def code(self) -> Any:  # type: ignore[override]
        raise RuntimeError("code trap")


def odd_code(code: Any) -> SessionQueryError:
    error = SessionQueryError.__new__(SessionQueryError)
    Exception.__init__(error, "primary-odd-code")
    error.code = code
    error.message = "primary-odd-code"
    return error


@pytest.mark.parametrize(
    ("failure", "logged"),
    [
        (ClassTrap("primary-class"), "primary-class"),
        (TracebackTrap("primary-traceback"), UNPRINTABLE),
        (CauseTrap("primary-cause"), UNPRINTABLE),
        (StrTrap(), UNPRINTABLE),
        (CodeTrap("primary-code"), "primary-code"),
        (odd_code("__class__"), "primary-odd-code"),
        (odd_code(404), "primary-odd-code"),
    ],
    ids=["class-trap", "traceback-getter", "cause-getter", "string-coercion", "code-getter", "dunder-code", "non-string-code"],
)
def test_39_unsafe_failures_become_the_generic_error(world: SessionQuery, failure: Exception, logged: str) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace["trace_session"] = raising(failure)
    assert err(tools_for(spy, logger).call("session_trace", {"session_id": "target"}, caller()), FAILED) == GENERIC_TEXT
    assert logged in logger.text


def test_40_typed_failure_with_unprintable_cause_keeps_its_safe_code(world: SessionQuery) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace["trace_session"] = raising(SessionQueryError("SESSION_QUERY_PERSISTENCE_FAILED", "disk", StrTrap()))
    text = err(tools_for(spy, logger).call("session_trace", {}, caller()), "SESSION_QUERY_PERSISTENCE_FAILED")
    assert text == "Error: stored session history cannot be read right now"
    assert UNPRINTABLE in logger.text


def test_41_cyclic_cause_chain(world: SessionQuery) -> None:
    first, second = RuntimeError("first-41"), RuntimeError("second-41")
    first.cause, second.cause = second, first  # type: ignore[attr-defined]
    spy, logger = Spy(world), ListLogger()
    spy.replace["trace_session"] = raising(first)
    assert err(tools_for(spy, logger).call("session_trace", {}, caller()), FAILED) == GENERIC_TEXT
    assert "first-41" in logger.text and "second-41" in logger.text and CAUSE_CYCLE in logger.text


def test_42_a_failing_logger_gives_the_generic_error(world: SessionQuery) -> None:
    spy, logger = Spy(world), RaisingLogger()
    spy.replace["trace_session"] = raising(SessionQueryError("SESSION_QUERY_PERSISTENCE_FAILED", "disk"))
    assert err(tools_for(spy, logger).call("session_trace", {}, caller()), FAILED) == GENERIC_TEXT
    assert len(logger.messages) == 1


def test_43_stale_cursor_is_reported_not_restarted(world: SessionQuery) -> None:
    spy = Spy(world)

    def pages(args: tuple[Any, ...]) -> Any:
        if args[0].get("cursor") is None:
            return session_page([hit("a")], "c1")
        raise SessionQueryError("SESSION_QUERY_STALE_CURSOR", "stale")

    spy.replace["search_sessions"] = pages
    text = err(tools_for(spy).call("session_search", {"query": "alpha"}, caller()), "SESSION_QUERY_STALE_CURSOR")
    assert text == "Error: session history changed while the results were being collected; run the same search again"
    assert len(spy.of("search_sessions")) == 2


def test_44_a_repeated_cursor_is_refused(world: SessionQuery) -> None:
    spy = Spy(world)
    spy.replace["search_sessions"] = lambda _args: session_page([hit("a")], "same")
    text = err(tools_for(spy).call("session_search", {"query": "alpha"}, caller()), "SESSION_QUERY_INVALID_CURSOR")
    assert text == "Error: the search provider returned the same continuation twice"
    assert len(spy.of("search_sessions")) == 2


# --------------------------------------------------------------------------- 45–48 rendering of hits, the cut-off


def test_45_parents_and_availability(world: SessionQuery) -> None:
    spy = Spy(world)
    spy.replace["search_sessions"] = scripted({None: session_page([
        hit("first", parent="target", live=True, persisted=True),
        hit("a", parent="me", persisted=True),
        hit("b", parent="outsider", live=False, persisted=False),
        hit("last", live=True, persisted=False),
    ])})
    text = ok(tools_for(spy).call("session_search", {"query": "alpha"}, caller()))
    blocks = text.split("\n\n")[1:]
    assert "Parent: target" in blocks[0] and "Availability: live, persisted" in blocks[0]
    assert "Parent: me" in blocks[1] and "Availability: persisted" in blocks[1]
    assert f"Parent: {HIDDEN_PARENT}" in blocks[2] and "Availability: unavailable" in blocks[2]
    assert "Parent: root" in blocks[3] and "Availability: live\n" in blocks[3]
    assert blocks[0].splitlines() == [
        "1. Session first \u2014 First",
        "   Created: 1970-01-01T00:00:00.001Z",
        "   Parent: target",
        "   Availability: live, persisted",
        "   Best match: seq 1 | user/message | current | 1970-01-01T00:00:00.030Z",
        "   Snippet: snippet of first",
    ]
    (auth,) = spy.of("filter_sessions")
    assert auth.args[0][0] == {"kind": "id", "values": ["target", "outsider"]}  # the caller's own id needs no check


def test_46_current_session_cut_off(world: SessionQuery) -> None:
    spy = Spy(world)
    tools = tools_for(spy)
    me = caller(events=ME_EVENTS)
    text = ok(tools.call("session_event_search", {"query": "caller note", "seq_from": 0, "seq_to": 99}, me))
    ok(tools.call("session_event_search", {"query": "caller note"}, me))
    ok(tools.call("session_event_search", {"session_id": "a", "query": "alpha", "seq_from": 0, "seq_to": 99}, me))
    filters = [call.args[0]["filters"] for call in spy.of("search_events")]
    assert filters == [
        [{"kind": "seq", "from": 0, "to": 1}],
        [{"kind": "seq", "to": 1}],
        [{"kind": "seq", "from": 0, "to": 99}],
    ]
    assert "invoking step" not in text and text.splitlines()[2:] == [
        "Matching events (1):",
        "1. seq 1 | user/message | current | 1970-01-01T00:00:01.000Z",
        "   Snippet: alpha beta caller note from an earlier step",
    ]


def test_47_cut_off_before_the_range_skips_the_search(world: SessionQuery) -> None:
    spy = Spy(world)
    text = ok(tools_for(spy).call("session_event_search", {"query": "alpha", "seq_from": 2}, caller(events=ME_EVENTS)))
    assert text == f"Session me \u2014 (no title)\n\n{NO_EVENT_MATCHES}"
    assert spy.methods() == ["read_title_snapshots"]


def test_47_cut_off_at_seq_zero_fails_the_upper_bound(world: SessionQuery) -> None:
    from tests.logfactory import step_start

    spy = Spy(world)
    result = tools_for(spy).call("session_event_search", {"query": "alpha"}, caller(events=[step_start(0)]))
    err(result, "SESSION_QUERY_INVALID_FILTER")
    assert "search_events" not in spy.methods()


def test_48_no_current_step_and_paged_event_search(world: SessionQuery) -> None:
    spy = Spy(world)
    err(tools_for(spy).call("session_event_search", {"query": "alpha"}, caller(events=[turn_start(0), user(1, "x")])),
        "SESSION_QUERY_TOOL_NO_CURRENT_STEP")
    spy.replace["search_events"] = scripted({
        None: event_page([event_hit(5), event_hit(4)], "c1"),
        "c1": event_page([event_hit(3), event_hit(2)]),
    })
    text = ok(tools_for(spy, maxSearchResults=2).call("session_event_search", {"session_id": "a", "query": "alpha"}, caller()))
    assert len(spy.of("search_events")) == 2
    assert text == "\n".join([
        "Session a \u2014 Alpha", "", "Matching events (2):",
        "1. seq 5 | user/message | current | 1970-01-01T00:00:00.030Z", "   Snippet: s5",
        "2. seq 4 | user/message | current | 1970-01-01T00:00:00.030Z", "   Snippet: s4",
        "", CAP_NOTICE,
    ])


# --------------------------------------------------------------------------- 49–54 titles


class HostError(Exception):
    """A host-side coded error (the reference's HarnessError)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def test_49_failed_title_keeps_the_result(world: SessionQuery) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace["read_title_snapshots"] = rejected(("target", HostError("SOME_HOST_CODE", "title-secret-49")))
    text = ok(tools_for(spy, logger).call("session_event_trace", {"session_id": "target", "seq": 1}, caller()))
    assert text.startswith("Session target \u2014 (title could not be read: SESSION_QUERY_TOOL_FAILED)\n")
    assert "HostError" in logger.text and "title-secret-49" in logger.text and "title-secret-49" not in text


def test_50_string_and_stackless_title_failures(world: SessionQuery) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace["search_sessions"] = scripted({None: session_page([hit("a"), hit("b", parent="target")])})
    spy.replace["read_title_snapshots"] = rejected(("a", "string-failure-50"), ("b", ValueError("stackless")))
    text = ok(tools_for(spy, logger).call("session_search", {"query": "alpha"}, caller()))
    assert "1. Session a \u2014 (title could not be read: SESSION_QUERY_TOOL_FAILED)" in text
    assert "2. Session b \u2014 (title could not be read: SESSION_QUERY_TOOL_FAILED)" in text
    (titles,) = spy.of("read_title_snapshots")
    assert titles.args[0] == ["a", "b"]
    assert "string-failure-50" in logger.text and "ValueError: stackless" in logger.text


def test_51_unprintable_title_failure(world: SessionQuery) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace["read_title_snapshots"] = rejected(("a", StrTrap()))
    text = ok(tools_for(spy, logger).call("session_event_read", {"session_id": "a", "seq": 1}, caller()))
    assert text.startswith("Session a \u2014 (title could not be read: SESSION_QUERY_TOOL_FAILED)")
    assert UNPRINTABLE in logger.text and "trap" not in text


def test_52_a_failed_title_batch_fails_the_tool(world: SessionQuery) -> None:
    spy, logger = Spy(world), ListLogger()
    spy.replace["read_title_snapshots"] = raising(RuntimeError("secret-52"))
    assert err(tools_for(spy, logger).call("session_trace", {}, caller()), FAILED) == GENERIC_TEXT
    assert "secret-52" in logger.text and "title lookup" in logger.text


def test_53_cancellation_during_titles_fails_the_tool(world: SessionQuery) -> None:
    spy, controller = Spy(world), AbortController()

    def abort_and_reject(args: tuple[Any, ...]) -> Any:
        controller.abort(SessionQueryError("SESSION_QUERY_ABORTED", "reason-53"))
        return [SessionTitleObservationResult(session_id="target", status="rejected", reason=RuntimeError("x"))]

    spy.replace["read_title_snapshots"] = abort_and_reject
    result = tools_for(spy).call("session_trace", {"session_id": "target"}, caller(), controller.signal)
    assert err(result, ABORTED) == "Error: reason-53"
    assert spy.of("read_title_snapshots")[0].signal is controller.signal


def test_53_real_title_rejections_become_markers(world: SessionQuery) -> None:
    spy = Spy(world)
    spy.replace["search_sessions"] = scripted({None: session_page([hit("not-indexed")])})
    text = ok(tools_for(spy).call("session_search", {"query": "alpha"}, caller()))
    assert "Session not-indexed \u2014 (title could not be read: SESSION_QUERY_SESSION_NOT_FOUND)" in text


def test_54_an_unauthorized_title_fails_the_whole_tool(world: SessionQuery) -> None:
    spy = Spy(world)
    spy.replace["read_title_snapshots"] = rejected(("a", ToolError("SESSION_QUERY_TOOL_UNAUTHORIZED", "internal detail")))
    result = tools_for(spy).call("session_event_read", {"session_id": "a", "seq": 1}, caller())
    assert err(result, "SESSION_QUERY_TOOL_UNAUTHORIZED") == f"Error: {UNAUTHORIZED_MESSAGE}"


# --------------------------------------------------------------------------- 55–57 cancellation and deadlines


class HostStop(Exception):
    code = "HOST_STOPPED"


def test_55_cancelling_target_authorization(world: SessionQuery) -> None:
    spy, controller, cleaned = Spy(world), AbortController(), []

    def abort(_args: tuple[Any, ...]) -> None:
        controller.abort(HostStop("the host stopped this call"))
        time.sleep(0.01)
        cleaned.append(True)

    spy.before["filter_sessions"] = abort
    result = tools_for(spy).call("session_event_search", {"session_id": "a", "query": "alpha"}, caller(), controller.signal)
    assert err(result, "HOST_STOPPED") == "Error: the host stopped this call"
    assert cleaned == [True] and spy.methods() == ["filter_sessions"]


def test_56_the_deadline_signal_reaches_the_service_and_times_out(world: SessionQuery) -> None:
    spy, upstream, cleaned = Spy(world), AbortController(), []

    def slow(args: tuple[Any, ...]) -> None:
        assert args[-1].wait(5)  # blocks until the deadline passes
        cleaned.append(True)

    spy.before["search_sessions"] = slow
    started = time.monotonic()
    result = tools_for(spy, searchTimeoutMs=50).call(
        "session_search", {"query": "alpha", "parent_session_ids": ["target"]}, caller(), upstream.signal)
    assert err(result, "TOOL_TIMEOUT") == "Error: session_search gave up after its 50 ms time limit"
    assert time.monotonic() - started < 4 and cleaned == [True]
    signals = [call.signal for call in spy.calls]
    assert [call.method for call in spy.calls] == ["filter_sessions", "search_sessions"]
    assert signals[0] is signals[1] and isinstance(signals[0], DeadlineSignal) and signals[0] is not upstream.signal
    assert not upstream.signal.aborted


def test_56_a_running_sqlite_statement_is_interrupted(world_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.tools.support import open_query

    interrupted: list[str] = []
    original = SqliteSearchBackend._query_sessions

    def slow_query(self: SqliteSearchBackend, conn: sqlite3.Connection, *args: Any) -> Any:
        try:  # a statement that would run for minutes
            conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n").fetchone()
        except sqlite3.OperationalError as exc:
            interrupted.append(str(exc))
            raise
        return original(self, conn, *args)

    monkeypatch.setattr(SqliteSearchBackend, "_query_sessions", slow_query)
    query = open_query(world_db)
    try:
        started = time.monotonic()
        result = tools_for(query, searchTimeoutMs=100).call("session_search", {"query": "alpha"}, caller())
        elapsed = time.monotonic() - started
        assert err(result, "TOOL_TIMEOUT")
        assert interrupted == ["interrupted"] and elapsed < 5
        # the engine is usable afterwards
        monkeypatch.setattr(SqliteSearchBackend, "_query_sessions", original)
        assert "Matching sessions" in ok(tools_for(query).call("session_search", {"query": "alpha"}, caller()))
    finally:
        query.close()


def test_57_cancellation_during_a_search_page(world: SessionQuery) -> None:
    spy, logger, controller = Spy(world), ListLogger(), AbortController()
    reason = SessionQueryError("SESSION_QUERY_ABORTED", "reason-57")

    def pages(args: tuple[Any, ...]) -> Any:
        if args[0].get("cursor") is None:
            return session_page([hit("a")], "c1")
        controller.abort(reason)
        return session_page([hit("b")])

    spy.replace["search_sessions"] = pages
    result = tools_for(spy, logger).call("session_search", {"query": "alpha"}, caller(), controller.signal)
    assert err(result, ABORTED) == "Error: reason-57"
    first, second = spy.of("search_sessions")
    # The search tools always run under their deadline: the signal is derived
    # from the caller's, the same object for every page, and carries its reason.
    assert first.signal is second.signal and first.signal.reason is reason
    assert logger.messages == [] and "read_title_snapshots" not in spy.methods()
