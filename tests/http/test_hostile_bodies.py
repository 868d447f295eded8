"""``/api/rpc/<method>`` under hostile bodies and query strings.

Every answer to client input is JSON with a documented status (200, or a
4xx error body ``{"error": {"code", "message"}}``): never a 500, never a
traceback.  Deep nesting is refused as a parse error before anything walks
it; lone surrogate escapes decode to U+FFFD.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote_from_bytes

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from readmodel.http.app import Limits, create_app
from readmodel.rpc import MAX_DEPTH, METHODS
from tests.rpc.support import huge_numbers, json_values, known_params, nested, two_session_index

CLIENT_STATUSES = {200, 400, 404, 409, 413}


@pytest.fixture(scope="module")
def index_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_session_index(tmp_path_factory.mktemp("http-hostile"))


def api_client(db: Path, limits: Limits | None = None) -> TestClient:
    app = create_app(str(db), port=8765, limits=limits or Limits())
    return TestClient(app, base_url="http://127.0.0.1:8765")


@pytest.fixture(scope="module")
def client(index_db: Path) -> Iterator[TestClient]:
    with api_client(index_db) as test_client:
        yield test_client


def assert_documented(response: Any) -> Any:
    """A JSON answer with a client-error-or-success status; its decoded body."""
    assert response.status_code in CLIENT_STATUSES, (response.status_code, response.text[:300])
    assert response.headers["content-type"] == "application/json"
    body = json.loads(response.content)
    if response.status_code != 200:
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
        assert type(body["error"]["code"]) is str and type(body["error"]["message"]) is str
    return body


method_names = st.sampled_from(sorted(METHODS))


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.binary(max_size=300))
    if kind == 1:
        return json.dumps(draw(json_values)).encode()
    if kind == 2:
        return draw(nested(draw(st.integers(1, 2000))))
    if kind == 3:
        return b'{"limit":' + draw(huge_numbers) + b',"sessionId":"root","query":"beta"}'
    return json.dumps(draw(known_params)).encode()


@given(method=method_names, body=bodies())
@example(method="searchSessions", body=b"[" * 1000 + b"]" * 1000)
@example(method="status", body=b'{"a":' * 100_000)
@example(method="searchSessions", body=rb'{"query":"a\ud800b"}')
@example(method="readEvent", body=b'{"sessionId":"root","seq":"1"}')
def test_any_body_gets_a_documented_json_answer(client: TestClient, method: str, body: bytes) -> None:
    assert_documented(client.post(f"/api/rpc/{method}", content=body))


param_names = st.sampled_from(["sessionId", "sessionIds", "seq", "limit", "query", "filters", "cursor"])
# Values as raw bytes: JSON texts (lone surrogates written raw too) or anything at all.
param_values = st.binary(max_size=40) | json_values.map(lambda value: json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def query_string(params: dict[str, bytes]) -> str:
    return "&".join(f"{name}={quote_from_bytes(value)}" for name, value in params.items())


@given(method=method_names, params=st.dictionaries(param_names, param_values, max_size=4))
@example(method="filterEvents", params={"sessionId": b"root", "filters": b"[" * 3000})
@example(method="readTitleSnapshots", params={"sessionIds": b'["\\ud800"]'})
def test_any_query_string_gets_a_documented_json_answer(client: TestClient, method: str, params: dict[str, bytes]) -> None:
    assert_documented(client.get(f"/api/rpc/{method}?{query_string(params)}"))


def test_deeply_nested_body_is_a_400_parse_error(client: TestClient) -> None:
    for body in (b"[" * 1000 + b"]" * 1000, b'{"query":' + b"[" * 5000 + b"]" * 5000 + b"}"):
        response = client.post("/api/rpc/searchSessions", content=body)
        assert response.status_code == 400, response.text[:200]
        error = response.json()["error"]
        assert error["code"] == "PARSE_ERROR" and str(MAX_DEPTH) in error["message"]
    within = client.post("/api/rpc/searchSessions", content=b'{"query":"beta","sessionFilters":' + b"[" * 40 + b"]" * 40 + b"}")
    assert within.status_code == 400 and within.json()["error"]["code"] == "SESSION_QUERY_INVALID_FILTER"


def test_deeply_nested_query_parameter_is_a_400(client: TestClient) -> None:
    response = client.get("/api/rpc/filterEvents", params={"sessionId": "root", "filters": "[" * 1000 + "]" * 1000})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "INVALID_PARAMS" and str(MAX_DEPTH) in error["message"]


def test_lone_surrogate_escapes_are_answered(client: TestClient) -> None:
    search = client.post("/api/rpc/searchSessions", content=rb'{"query":"be\ud800ta"}')
    assert search.status_code == 200 and "items" in search.json()
    title = client.post("/api/rpc/readTitle", content=rb'{"sessionId":"ro\udc00ot"}')
    assert title.status_code == 404 and "ro\ufffdot" in title.json()["error"]["message"]
    snapshots = client.get("/api/rpc/readTitleSnapshots", params={"sessionIds": r'["root","\ud83d"]'})
    assert snapshots.status_code == 200
    assert [item["sessionId"] for item in snapshots.json()] == ["root", "\ufffd"]


def test_body_over_the_limit_is_413(index_db: Path) -> None:
    client = api_client(index_db, Limits(max_body=1000))
    assert client.post("/api/rpc/status", content=b" " * 1000).status_code == 200
    for body in (b" " * 1001, iter([b" " * 600, b" " * 600])):  # declared length, then chunked
        response = client.post("/api/rpc/status", content=body)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
        assert response.headers["connection"] == "close"
