"""Every exact read of the golden answers, through ``sessionq rpc`` in a real subprocess.

Both corpora (``corpus/zstd-root`` and ``corpus/synthetic/zstd-root``) are
indexed once per test session into a temporary database; then one ``rpc``
process per corpus answers every request the golden files pin (all reads of
every session, every traced event, the five readEvent windows, the non-search
error cases) and the answers are compared exactly.

The one designed difference (synthetic/README.md): synthetic crash-closer tool
results carry sessionq's own wording, so those events and documents are
compared without their text, and the text is checked to be ours.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from indexer.repair import is_closer_text
from tests.corpus import REPO, SYNTHETIC_ROOT, ZSTD_ROOT, golden, golden_by_session, require_corpus
from tests.backends import Backend

require_corpus()

CLOSER_ID_PREFIX = "interrupted-tool-result-"
READ_METHODS = ("readSession", "listEvents", "readSurface", "traceSession", "readTitle")


def event_hash(event: dict[str, Any]) -> str:
    text = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def is_closer(event: dict[str, Any]) -> bool:
    if event.get("type") != "tool/result":
        return False
    message_id = event["data"]["message"]["id"]
    return type(message_id) is str and message_id.startswith(CLOSER_ID_PREFIX)


def closer_text(event: dict[str, Any]) -> str:
    return event["data"]["message"]["content"][0]["content"][0]["text"]


def without_closer_text(event: dict[str, Any]) -> dict[str, Any]:
    """A copy of a closer event with its result text blanked (our wording differs by design)."""
    copy = json.loads(json.dumps(event))
    copy["data"]["message"]["content"][0]["content"][0]["text"] = "<closer text>"
    return copy


class Answers:
    """All answers of one ``rpc`` run, looked up by method and params."""

    def __init__(self, db: str, requests: list[tuple[str, dict[str, Any]]]) -> None:
        lines = [
            json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
            for n, (method, params) in enumerate(requests)
        ]
        lines.insert(len(lines) // 2, "this line is not JSON")  # the loop must go on
        process = subprocess.run(
            [sys.executable, "-m", "indexer.cli", "rpc", "--db", str(db)],
            input=("\n".join(lines) + "\n").encode(),
            capture_output=True,
            cwd=REPO,
            timeout=600,
        )
        assert process.returncode == 0, process.stderr.decode()
        responses = [json.loads(line) for line in process.stdout.splitlines()]
        assert len(responses) == len(requests) + 1
        assert [r["id"] for r in responses if r["id"] is not None] == list(range(len(requests)))
        parse_errors = [r for r in responses if r["id"] is None]
        assert [r["error"]["code"] for r in parse_errors] == [-32700]
        self.by_request = {
            (method, json.dumps(params, sort_keys=True)): response
            for (method, params), response in zip(requests, [r for r in responses if r["id"] is not None])
        }

    def response(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.by_request[(method, json.dumps(params, sort_keys=True))]

    def result(self, method: str, params: dict[str, Any]) -> Any:
        response = self.response(method, params)
        assert "result" in response, (method, params, response.get("error"))
        return response["result"]


def _error_request(case: dict[str, Any], first: str) -> dict[str, Any]:
    return {key: (first if value == "<first listed session>" else value) for key, value in case["request"].items()}


def _non_search_errors(synthetic: bool) -> list[dict[str, Any]]:
    return [case for case in golden("errors", synthetic)["cases"] if not case["operation"].startswith("search")]


def _requests(synthetic: bool) -> list[tuple[str, dict[str, Any]]]:
    requests: list[tuple[str, dict[str, Any]]] = [("listSessions", {})]
    for entry in golden("list-sessions", synthetic)["sessions"]:
        session_id = entry["header"]["id"]
        requests += [(method, {"sessionId": session_id}) for method in READ_METHODS]
        requests.append(("filterEvents", {"sessionId": session_id, "filters": []}))
    for entry in golden("read-event", synthetic)["sessions"]:
        requests += [("readEvent", {"sessionId": entry["sessionId"], **read["request"]}) for read in entry["reads"]]
    for entry in golden("trace-event", synthetic)["sessions"]:
        requests += [("traceEvent", {"sessionId": entry["sessionId"], "seq": trace["seq"]}) for trace in entry["traces"]]
    first = golden("errors", synthetic)["firstListedSession"]
    requests += [(case["operation"], _error_request(case, first)) for case in _non_search_errors(synthetic)]
    unique = {(method, json.dumps(params, sort_keys=True)): (method, params) for method, params in requests}
    return list(unique.values())


@pytest.fixture(scope="session", params=[False, True], ids=["real", "synthetic"])
def answers(backend: Backend, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[bool, Answers]:
    synthetic: bool = request.param
    db = backend.build(SYNTHETIC_ROOT if synthetic else ZSTD_ROOT, backend.database(tmp_path_factory.mktemp("conformance"), "index"))
    return synthetic, Answers(db, _requests(synthetic))


def test_list_sessions(answers: tuple[bool, Answers]) -> None:
    synthetic, rpc = answers
    expected = golden("list-sessions", synthetic)
    result = rpc.result("listSessions", {})
    assert len(result) == expected["count"]
    assert result == expected["sessions"]


def test_read_session(answers: tuple[bool, Answers]) -> None:
    synthetic, rpc = answers
    hashes = golden_by_session("read-session-hashes", synthetic)
    closers = 0
    for entry in golden("read-session", synthetic)["sessions"]:
        session_id = entry["sessionId"]
        result = rpc.result("readSession", {"sessionId": session_id})
        events = result["events"]
        assert result["session"] == entry["header"], session_id
        assert len(events) == entry["eventCount"] and events[-1]["seq"] == entry["lastSeq"], session_id
        assert dict(Counter(e["type"] for e in events)) == entry["types"], session_id
        expected = hashes[session_id]["events"]
        for event, (seq, etype, digest) in zip(events, expected, strict=True):
            assert (event["seq"], event["type"]) == (seq, etype)
            if event_hash(event) == digest:
                continue
            assert synthetic and is_closer(event) and is_closer_text(closer_text(event)), (session_id, seq)
            closers += 1
    assert closers > 0 if synthetic else closers == 0


def test_list_events(answers: tuple[bool, Answers]) -> None:
    synthetic, rpc = answers
    for entry in golden("list-events", synthetic)["sessions"]:
        session_id = entry["sessionId"]
        result = rpc.result("listEvents", {"sessionId": session_id})
        assert all(record["sessionId"] == session_id and list(record) == ["sessionId", "seq", "type", "time", "surface"] for record in result)
        assert [[r["seq"], r["type"], r["time"], r["surface"]] for r in result] == entry["events"], session_id


def test_read_surface(answers: tuple[bool, Answers]) -> None:
    synthetic, rpc = answers
    headers = {entry["header"]["id"]: entry["header"] for entry in golden("list-sessions", synthetic)["sessions"]}
    for entry in golden("read-surface", synthetic)["sessions"]:
        session_id = entry["sessionId"]
        result = rpc.result("readSurface", {"sessionId": session_id})
        assert result["session"] == headers[session_id]
        assert result["capturedThroughSeq"] == entry["capturedThroughSeq"]
        assert [e["seq"] for e in result["events"]] == entry["surfaceSeqs"], session_id
        assert [e["type"] for e in result["events"]] == entry["surfaceTypes"], session_id


def test_filter_events(answers: tuple[bool, Answers]) -> None:
    synthetic, rpc = answers
    closers = 0
    for entry in golden("filter-events", synthetic)["sessions"]:
        session_id = entry["sessionId"]
        result = rpc.result("filterEvents", {"sessionId": session_id, "filters": []})
        assert len(result) == len(entry["documents"]), session_id
        events = rpc.result("readSession", {"sessionId": session_id})["events"]
        for document, want in zip(result, entry["documents"]):
            assert document["sessionId"] == session_id
            assert document["time"] == events[document["seq"]]["time"]
            got = {key: document[key] for key in ("seq", "type", "surface", "text")}
            if got == want:
                continue
            # Only a synthetic crash closer's text may differ, and it must be ours.
            event = events[document["seq"]]
            assert synthetic and is_closer(event), (session_id, document["seq"])
            assert {k: v for k, v in got.items() if k != "text"} == {k: v for k, v in want.items() if k != "text"}
            assert is_closer_text(closer_text(event)) and document["text"].startswith(closer_text(event))
            closers += 1
    assert closers > 0 if synthetic else closers == 0


def test_read_event(answers: tuple[bool, Answers]) -> None:
    synthetic, rpc = answers
    count = 0
    for entry in golden("read-event", synthetic)["sessions"]:
        session_id = entry["sessionId"]
        for read in entry["reads"]:
            result = rpc.result("readEvent", {"sessionId": session_id, **read["request"]})
            assert (result["startSeq"], result["endSeq"]) == (read["startSeq"], read["endSeq"]), (session_id, read["request"])
            assert [e["seq"] for e in result["events"]] == read["eventSeqs"]
            assert result["events"][read["request"]["seq"] - read["startSeq"]] == result["target"]
            target = result["target"]
            if synthetic and is_closer(target):
                assert is_closer_text(closer_text(target))
                assert without_closer_text(target) == without_closer_text(read["target"])
            else:
                assert target == read["target"], (session_id, read["request"])
            count += 1
    assert count == 5 * len(golden("read-event", synthetic)["sessions"])


def _short(record: dict[str, Any]) -> dict[str, Any]:
    return {"id": record["header"]["id"], "live": record["live"], "persisted": record["persisted"]}


def _short_node(node: dict[str, Any]) -> dict[str, Any]:
    return {**_short(node["session"]), "descendants": [_short_node(child) for child in node["descendants"]]}


def test_trace_session(answers: tuple[bool, Answers]) -> None:
    synthetic, rpc = answers
    for entry in golden("trace-session", synthetic)["sessions"]:
        result = rpc.result("traceSession", {"sessionId": entry["sessionId"]})
        got: dict[str, Any] = {
            "target": _short(result["target"]),
            "ancestors": [_short(record) for record in result["ancestors"]],
            "descendants": [_short_node(node) for node in result["descendants"]],
            "complete": result["complete"],
        }
        if "root" in result:
            got["root"] = _short(result["root"])
        if "unresolvedParentId" in result:
            got["unresolvedParentId"] = result["unresolvedParentId"]
        assert list(result)[:4] == ["target", "ancestors", "descendants", "complete"]
        assert got == entry["trace"], entry["sessionId"]


def test_trace_event(answers: tuple[bool, Answers]) -> None:
    synthetic, rpc = answers
    headers = {entry["header"]["id"]: entry["header"] for entry in golden("list-sessions", synthetic)["sessions"]}
    checked = 0
    for entry in golden("trace-event", synthetic)["sessions"]:
        session_id = entry["sessionId"]
        for trace in entry["traces"]:
            result = rpc.result("traceEvent", {"sessionId": session_id, "seq": trace["seq"]})
            assert result["session"] == headers[session_id]
            target = result["target"]
            assert target["sessionId"] == session_id
            got: dict[str, Any] = {"seq": trace["seq"], "target": [target["seq"], target["type"], target["time"], target["surface"]]}
            if "replacedBy" in result:
                got["replacedBy"] = result["replacedBy"]
            for key in ("replacementChain", "replacedEventSeqs", "sourceEventSeqs", "derivedEventSeqs"):
                got[key] = result[key]
            assert got == trace, (session_id, trace["seq"])
            checked += 1
    assert checked == sum(len(entry["traces"]) for entry in golden("trace-event", synthetic)["sessions"])


def test_read_title(answers: tuple[bool, Answers]) -> None:
    synthetic, rpc = answers
    headers = {entry["header"]["id"]: entry["header"] for entry in golden("list-sessions", synthetic)["sessions"]}
    for entry in golden("read-title", synthetic)["sessions"]:
        result = rpc.result("readTitle", {"sessionId": entry["sessionId"]})
        assert result["session"] == headers[entry["sessionId"]]
        assert result.get("title") == entry["title"], entry["sessionId"]


def test_error_cases(answers: tuple[bool, Answers]) -> None:
    synthetic, rpc = answers
    first = golden("errors", synthetic)["firstListedSession"]
    cases = _non_search_errors(synthetic)
    assert cases
    for case in cases:
        response = rpc.response(case["operation"], _error_request(case, first))
        if case["outcome"] == "accepted":
            assert "result" in response, case
            continue
        assert response["error"]["code"] == -32000
        assert response["error"]["data"] == {"code": case["code"]}, case
        assert response["error"]["message"] == case["message"], case
