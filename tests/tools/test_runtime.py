"""Execution plumbing: deadline signals, the exclusive/parallel gate, MCP cancellation.

The reference schedules calls on a JS event loop; here calls run on threads,
so "exclusive" and "parallel" are checked with real concurrent threads.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio

from readmodel.core.cancel import AbortController
from readmodel.core.errors import SessionQueryError
from readmodel.query import SessionQuery
from readmodel.tools.errors import ToolTimeout
from readmodel.tools.mcpserver import ToolServer, result_payload, tool_descriptor, wire_text
from readmodel.tools.runtime import DeadlineSignal, ExecutionGate
from readmodel.tools import ToolResult
from tests.tools.support import Spy, caller, err, ok, tools_for


def test_deadline_signal_adopts_the_parent_reason_and_times_out() -> None:
    parent = AbortController()
    signal = DeadlineSignal(parent.signal, None, ToolTimeout("t", 1))
    assert not signal.aborted and signal.reason is None and not signal.wait(0.01)
    reason = SessionQueryError("SESSION_QUERY_ABORTED", "parent")
    parent.abort(reason)
    assert signal.aborted and signal.reason is reason
    timed = DeadlineSignal(None, 30, ToolTimeout("t", 30))
    assert timed.wait(2) and timed.reason.code == "TOOL_TIMEOUT"  # type: ignore[union-attr]
    timed.close()


def test_the_gate_runs_parallel_calls_together_and_exclusive_ones_alone() -> None:
    gate = ExecutionGate()
    active: list[str] = []
    overlaps: list[tuple[str, ...]] = []
    lock = threading.Lock()

    def run(name: str, exclusive: bool) -> None:
        with gate.enter(exclusive):
            with lock:
                active.append(name)
                overlaps.append(tuple(sorted(active)))
            time.sleep(0.05)
            with lock:
                active.remove(name)

    threads = [threading.Thread(target=run, args=(f"p{i}", False)) for i in range(3)]
    threads.append(threading.Thread(target=run, args=("x", True)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert any(len(seen) > 1 for seen in overlaps)  # parallel calls did overlap
    assert all(seen == ("x",) for seen in overlaps if "x" in seen)  # the exclusive one ran alone


def test_a_search_waits_for_running_exact_calls(world: SessionQuery) -> None:
    spy, order = Spy(world), []
    release = threading.Event()

    def hold(_args: tuple[Any, ...]) -> None:
        order.append("trace started")
        release.wait(5)
        order.append("trace finished")

    spy.before["trace_session"] = hold
    spy.before["search_sessions"] = lambda _args: order.append("search started")
    tools = tools_for(spy)
    trace = threading.Thread(target=tools.call, args=("session_trace", {"session_id": "target"}, caller()))
    trace.start()
    while not order:
        time.sleep(0.005)
    search = threading.Thread(target=tools.call, args=("session_search", {"query": "alpha"}, caller()))
    search.start()
    time.sleep(0.1)
    release.set()
    trace.join(5)
    search.join(5)
    assert order == ["trace started", "trace finished", "search started"]


def test_cancelling_an_mcp_request_aborts_the_execution(world: SessionQuery) -> None:
    spy, seen = Spy(world), []

    def wait_for_abort(args: tuple[Any, ...]) -> None:
        seen.append(args[-1].wait(5))

    spy.before["trace_session"] = wait_for_abort
    server = ToolServer(tools_for(spy), lambda: caller())

    async def main() -> None:
        with anyio.move_on_after(0.2):
            await server.call("session_trace", {"session_id": "target"})
        for _ in range(200):
            if seen:
                return
            await anyio.sleep(0.01)

    anyio.run(main)
    assert seen == [True]


def test_wire_forms() -> None:
    from readmodel.tools.host import build_definitions, validate_tool_config

    (first, *_rest) = build_definitions(validate_tool_config())
    descriptor = tool_descriptor(first)
    assert descriptor["annotations"]["readOnlyHint"] is True and descriptor["inputSchema"]["required"] == ["query"]
    assert result_payload(ToolResult("ok")) == {"content": [{"type": "text", "text": "ok"}], "isError": False}
    failure = result_payload(ToolResult.failure("CODE", "bad"))
    assert failure["isError"] and failure["_meta"] == {"sessionq/errorCode": "CODE"}
    assert wire_text("a\ud800b") == "a\ufffdb"


def test_a_caller_signal_aborted_before_the_call(world: SessionQuery) -> None:
    spy, controller = Spy(world), AbortController()
    controller.abort(SessionQueryError("SESSION_QUERY_ABORTED", "too late"))
    assert err(tools_for(spy).call("session_trace", {}, caller(), controller.signal), "SESSION_QUERY_ABORTED") == "Error: too late"
    assert err(tools_for(spy).call("session_search", {"query": "x"}, caller(), controller.signal), "SESSION_QUERY_ABORTED")
    assert spy.calls == []
    assert ok(tools_for(spy).call("session_trace", {}, caller()))
