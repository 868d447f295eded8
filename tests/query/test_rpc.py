"""The JSON-RPC dispatcher, without a subprocess (interface.md ``sessionq rpc``)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from readmodel.live import InMemoryLiveSource
from readmodel.query import SessionQuery
from readmodel.rpc import Dispatcher, serve
from tests.logfactory import header as log_header
from tests.projection.builders import title as title_event
from tests.projection.surface_builders import user
from tests.query.support import Corpus


@pytest.fixture
def dispatcher(corpus: Corpus) -> Dispatcher:
    corpus.write(log_header("s1", 1), [user(0, "hello"), title_event(1, "Hello")])
    corpus.index()
    return Dispatcher(corpus.query())


def call(dispatcher: Dispatcher, method: str, params: Any = None, request_id: Any = 1) -> Any:
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        request["params"] = params
    response = dispatcher.handle_line(json.dumps(request))
    assert response is not None
    return json.loads(response)


def test_every_read_method_answers(dispatcher: Dispatcher) -> None:
    results = {
        "listSessions": call(dispatcher, "listSessions"),
        "filterSessions": call(dispatcher, "filterSessions", {"filters": [{"kind": "id", "values": ["s1"]}]}),
        "readSession": call(dispatcher, "readSession", {"sessionId": "s1"}),
        "listEvents": call(dispatcher, "listEvents", {"sessionId": "s1"}),
        "filterEvents": call(dispatcher, "filterEvents", {"sessionId": "s1", "filters": []}),
        "readSurface": call(dispatcher, "readSurface", {"sessionId": "s1"}),
        "readEvent": call(dispatcher, "readEvent", {"sessionId": "s1", "seq": 1, "before": 1}),
        "traceSession": call(dispatcher, "traceSession", {"sessionId": "s1"}),
        "traceEvent": call(dispatcher, "traceEvent", {"sessionId": "s1", "seq": 0}),
        "readTitleSnapshots": call(dispatcher, "readTitleSnapshots", {"sessionIds": ["s1", "nope"]}),
        "readTitle": call(dispatcher, "readTitle", {"sessionId": "s1"}),
        "status": call(dispatcher, "status", {}),
    }
    for method, response in results.items():
        assert response["jsonrpc"] == "2.0" and response["id"] == 1 and "result" in response, method
    assert results["listSessions"]["result"][0]["header"]["id"] == "s1"
    assert [e["seq"] for e in results["readSession"]["result"]["events"]] == [0, 1]
    assert results["filterEvents"]["result"] == [
        {"sessionId": "s1", "seq": 0, "type": "user/message", "time": 0, "surface": "current", "text": "hello"}
    ]
    assert results["readEvent"]["result"]["startSeq"] == 0
    assert results["traceSession"]["result"]["complete"] is True
    assert results["readTitle"]["result"]["title"]["title"] == "Hello"
    first, second = results["readTitleSnapshots"]["result"]
    assert first["status"] == "fulfilled" and second == {
        "sessionId": "nope",
        "status": "rejected",
        "reason": {"code": "SESSION_QUERY_SESSION_NOT_FOUND", "message": 'session "nope" not found'},
    }
    assert results["status"]["result"]["sessions"] == 1


def test_query_errors_carry_the_code(dispatcher: Dispatcher) -> None:
    response = call(dispatcher, "readSession", {"sessionId": "missing"}, request_id="abc")
    assert response == {
        "jsonrpc": "2.0",
        "id": "abc",
        "error": {"code": -32000, "message": 'session "missing" not found', "data": {"code": "SESSION_QUERY_SESSION_NOT_FOUND"}},
    }
    bad_filters = call(dispatcher, "filterEvents", {"sessionId": "s1", "filters": "x"})
    assert bad_filters["error"]["data"]["code"] == "SESSION_QUERY_INVALID_FILTER"
    missing_filters = call(dispatcher, "filterSessions", {})
    assert missing_filters["error"]["message"] == "session filters must be an array"


def test_protocol_errors_and_the_loop_continues(dispatcher: Dispatcher) -> None:
    lines = [
        "{not json",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "noSuchMethod", "params": {"query": "x"}}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "readSession", "params": {"sessionId": 5}}),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "readSession", "params": ["s1"]}),
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "readTitleSnapshots", "params": {"sessionIds": "s1"}}),
        json.dumps({"jsonrpc": "2.0", "id": 6, "method": "readEvent", "params": {"sessionId": "s1"}}),
        json.dumps({"jsonrpc": "1.0", "id": 7, "method": "listSessions"}),
        json.dumps([1]),
        "",
        json.dumps({"jsonrpc": "2.0", "method": "listSessions"}),  # a notification: no response
        json.dumps({"jsonrpc": "2.0", "id": 8, "method": "listEvents", "params": {"sessionId": "s1"}}),
    ]
    out = io.BytesIO()
    assert serve(dispatcher, io.BytesIO("\n".join(lines).encode() + b"\n"), out) == 0
    responses = [json.loads(line) for line in out.getvalue().splitlines()]
    codes = [r.get("error", {}).get("code") if isinstance(r, dict) else "batch" for r in responses]
    assert codes == [-32700, -32601, -32602, -32602, -32602, -32602, -32600, "batch", None]
    assert responses[0]["id"] is None
    assert responses[7] == [{"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}]
    assert responses[8]["id"] == 8 and len(responses[8]["result"]) == 2


def test_batches_and_extra_methods(dispatcher: Dispatcher) -> None:
    batch = [{"jsonrpc": "2.0", "id": n, "method": "listEvents", "params": {"sessionId": "s1"}} for n in (1, 2)]
    answer = json.loads(dispatcher.handle_line(json.dumps(batch)) or b"")
    assert [a["id"] for a in answer] == [1, 2]
    dispatcher.register("searchSessions", lambda engine, params: b'{"items":[]}')
    assert call(dispatcher, "searchSessions", {"query": "x"})["result"] == {"items": []}


def test_uncoded_reference_failures_and_lazy_opening(live: InMemoryLiveSource, tmp_path) -> None:  # type: ignore[no-untyped-def]
    live.create({"version": 0, "id": "gap", "createdAt": 0}, [user(1, "x")])
    replay = call(Dispatcher(SessionQuery(None, live)), "readSession", {"sessionId": "gap"})["error"]
    assert replay["code"] == -32000 and replay["data"] == {"name": "ReplayError"}
    assert "seed event at index 0 has seq 1" in replay["message"]
    # An index that does not exist yet: every call reports it, the loop goes on.
    lazy = Dispatcher(lambda: SessionQuery.open(str(tmp_path / "later.db")))
    first = call(lazy, "listSessions")["error"]
    assert first["data"] == {"code": "SESSION_QUERY_INDEX_FAILED"}
    assert call(lazy, "listSessions")["error"]["data"] == {"code": "SESSION_QUERY_INDEX_FAILED"}
