"""JSON endpoints, OpenAPI, Host-header and token checks, the page."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from readmodel.http.app import create_app, error_status
from readmodel.query import SessionQuery
from readmodel.rpc import METHODS, Dispatcher
from tests.http.conftest import Site
from tests.logfactory import header, simple_turn, user, write_log


@pytest.fixture
def indexed(site: Site) -> Site:
    write_log(site.root, header("root", 1), [simple_turn(0, "alpha beta gamma")])
    write_log(site.root, header("kid", 2, parentSession="root", origin="subagent", delegationDepth=1), [simple_turn(0, "beta delta")])
    for i in range(5):
        write_log(site.root, header(f"extra{i}", 10 + i), [[user(0, f"beta number {i}")]])
    site.index()
    return site


CALLS = [
    ("listSessions", {}),
    ("filterSessions", {"filters": [{"kind": "parent", "values": ["root"]}]}),
    ("readSession", {"sessionId": "root"}),
    ("listEvents", {"sessionId": "root"}),
    ("filterEvents", {"sessionId": "root", "filters": [{"kind": "type", "values": ["user/message"]}]}),
    ("readSurface", {"sessionId": "root"}),
    ("readEvent", {"sessionId": "root", "seq": 1}),
    ("readEventRange", {"sessionId": "root", "startSeq": 2, "limit": 3}),
    ("traceSession", {"sessionId": "kid"}),
    ("traceEvent", {"sessionId": "root", "seq": 6}),
    ("readTitleSnapshots", {"sessionIds": ["root", "kid", "nope"]}),
    ("readTitle", {"sessionId": "root"}),
    ("searchSessions", {"query": "beta", "limit": 2}),
    ("searchEvents", {"sessionId": "root", "query": "alpha"}),
    ("status", {}),
    ("listWorkspaces", {}),
    ("listSessionSummaries", {"limit": 2}),
]


def test_every_method_is_covered() -> None:
    assert {name for name, _ in CALLS} == set(METHODS)


@pytest.mark.parametrize(("method", "params"), CALLS, ids=[c[0] for c in CALLS])
def test_rpc_endpoint_equals_sessionq_rpc(indexed: Site, method: str, params: dict) -> None:
    client = indexed.client()
    response = client.post(f"/api/rpc/{method}", content=json.dumps(params))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    engine = SessionQuery.open(str(indexed.db))
    try:
        line = Dispatcher(engine).handle({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    finally:
        engine.close()
    assert line is not None
    prefix = b'{"jsonrpc":"2.0","id":1,"result":'
    assert line.startswith(prefix)
    if method == "status":  # lag and timestamps move between calls
        assert json.loads(response.content).keys() == json.loads(line[len(prefix) : -1]).keys()
    else:
        assert response.content == line[len(prefix) : -1]


def _query(params: dict) -> dict[str, str]:
    return {name: value if isinstance(value, str) else json.dumps(value) for name, value in params.items()}


@pytest.mark.parametrize(("method", "params"), CALLS, ids=[c[0] for c in CALLS])
def test_convenience_get_equals_post(indexed: Site, method: str, params: dict) -> None:
    client = indexed.client()
    posted = client.post(f"/api/rpc/{method}", content=json.dumps(params))
    got = client.get(f"/api/rpc/{method}", params=_query(params))
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == "application/json"
    if method == "status":
        assert got.json().keys() == posted.json().keys()
    else:
        assert got.content == posted.content


def test_convenience_get_paging_and_errors(indexed: Site) -> None:
    client = indexed.client()
    first = client.get("/api/rpc/searchSessions", params={"query": "beta", "limit": "2"}).json()
    second = client.get("/api/rpc/searchSessions", params={"query": "beta", "limit": "2", "cursor": first["nextCursor"]}).json()
    posted = client.post("/api/rpc/searchSessions", json={"query": "beta", "limit": 2, "cursor": first["nextCursor"]}).json()
    assert second == posted and len(second["items"]) == 2
    # a string param is verbatim (a JSON-looking session id stays a string)
    missing = client.get("/api/rpc/readSession", params={"sessionId": '"root"'})
    assert missing.status_code == 404
    bad = client.get("/api/rpc/readEvent", params={"sessionId": "root", "seq": "one"})
    assert bad.status_code == 400 and bad.json()["error"] == {"code": "INVALID_PARAMS", "message": "Invalid params: seq must be a JSON value"}
    assert client.get("/api/rpc/readSession").json()["error"]["code"] == "INVALID_PARAMS"
    assert client.get("/api/rpc/nosuch").status_code == 404
    # unknown names are ignored; for repeated names the last value wins
    repeated = client.get("/api/rpc/readTitle?sessionId=nope&sessionId=root&extra=1")
    assert repeated.status_code == 200 and repeated.json()["session"]["id"] == "root"
    filtered = client.get("/api/rpc/filterEvents", params={"sessionId": "root", "filters": '[{"kind":"type","values":["user/message"]}]'})
    assert [e["type"] for e in filtered.json()] == ["user/message"]


def test_access_token_query_parameter_is_for_the_export_download_only(indexed: Site) -> None:
    """A token in a URL ends up in logs and histories: only the download link
    (which cannot carry a header) may use it; API calls need the Bearer header."""
    client = indexed.client(token="s3cret")
    assert client.get("/api/rpc/readTitle", params={"sessionId": "root"}).status_code == 401
    for name in ("access_token", "access%5Ftoken"):
        refused = client.get(f"/api/rpc/readTitle?sessionId=root&{name}=s3cret")
        assert refused.status_code == 401, name
        assert client.post(f"/api/rpc/status?{name}=s3cret").status_code == 401, name
    bearer = {"authorization": "Bearer s3cret"}
    ok = client.get("/api/rpc/readTitle", params={"sessionId": "root"}, headers=bearer)
    assert ok.status_code == 200 and ok.json()["session"]["id"] == "root"
    assert client.head("/api/session.export?sessionId=root&access_token=s3cret").status_code == 200
    assert client.get("/api/session.export?sessionId=root&access_token=wrong").status_code == 401


def test_empty_body_means_empty_params(indexed: Site) -> None:
    assert indexed.client().post("/api/rpc/listSessions").status_code == 200


def test_search_paging_by_cursor(indexed: Site) -> None:
    client = indexed.client()
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        params = {"query": "beta", "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.post("/api/rpc/searchSessions", json=params).json()
        seen += [item["header"]["id"] for item in page["items"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert sorted(seen) == sorted(["root", "kid", *(f"extra{i}" for i in range(5))])


@pytest.mark.parametrize(
    ("method", "params", "status", "code"),
    [
        ("readSession", {"sessionId": "nope"}, 404, "SESSION_QUERY_SESSION_NOT_FOUND"),
        ("readEvent", {"sessionId": "root", "seq": 999}, 404, "SESSION_QUERY_EVENT_NOT_FOUND"),
        ("filterSessions", {"filters": [{"kind": "bogus"}]}, 400, "SESSION_QUERY_INVALID_FILTER"),
        ("searchSessions", {"query": "beta", "limit": 0}, 400, "SESSION_QUERY_INVALID_LIMIT"),
        ("searchSessions", {"query": "beta", "cursor": "garbage"}, 400, "SESSION_QUERY_INVALID_CURSOR"),
        ("readSession", {}, 400, "INVALID_PARAMS"),
        ("nosuch", {}, 404, "METHOD_NOT_FOUND"),
    ],
)
def test_errors(indexed: Site, method: str, params: dict, status: int, code: str) -> None:
    response = indexed.client().post(f"/api/rpc/{method}", json=params)
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"]["code"] == code and isinstance(body["error"]["message"], str)


def test_bad_json_and_non_object(indexed: Site) -> None:
    client = indexed.client()
    assert client.post("/api/rpc/listSessions", content=b"{nope").status_code == 400
    assert client.post("/api/rpc/listSessions", content=b"[1]").json()["error"]["code"] == "INVALID_PARAMS"


def test_error_status_mapping() -> None:
    assert error_status("SESSION_QUERY_STALE_CURSOR") == 409
    assert error_status("SESSION_QUERY_PERSISTENCE_FAILED") == 500
    assert error_status("SESSION_QUERY_SEARCH_DISABLED") == 503


def test_openapi_lists_endpoints(indexed: Site) -> None:
    doc = indexed.client().get("/api/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    assert set(doc["paths"]["/api/session.export"]) == {"get", "head"}
    for method in METHODS:
        assert {"get", "post"} <= set(doc["paths"][f"/api/rpc/{method}"])
    get = doc["paths"]["/api/rpc/readEvent"]["get"]
    by_name = {p["name"]: p for p in get["parameters"]}
    assert by_name["sessionId"]["schema"] == {"type": "string"} and by_name["sessionId"]["required"]
    assert by_name["seq"]["content"]["application/json"]["schema"]["type"] == "integer"
    assert not by_name["before"]["required"]


# --------------------------------------------------------------------------- host and token


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "[::1]:8765", "localhost", "LOCALHOST:8765"])
def test_loopback_hosts_allowed(indexed: Site, host: str) -> None:
    response = indexed.client().post("/api/rpc/listSessions", headers={"host": host})
    assert response.status_code == 200


@pytest.mark.parametrize("host", ["evil.example:8765", "evil.example", "127.0.0.1:9999", "localhost.evil.example:8765", "", "[::1]x"])
def test_rebinding_hosts_rejected(indexed: Site, host: str) -> None:
    client = indexed.client()
    for call in (lambda: client.post("/api/rpc/listSessions", headers={"host": host}), lambda: client.get("/", headers={"host": host})):
        assert call().status_code == 421


def test_token_required(indexed: Site) -> None:
    client = indexed.client(token="s3cret")
    assert client.post("/api/rpc/listSessions").status_code == 401
    assert client.post("/api/rpc/listSessions", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/api/rpc/listSessions", headers={"authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/api/session.export?sessionId=root").status_code == 401
    assert client.get("/api/session.export?sessionId=root&access_token=s3cret").status_code == 200
    assert client.get("/").status_code == 200  # the page holds no data


def test_extra_allowed_host(indexed: Site) -> None:
    app = create_app(str(indexed.db), root=str(indexed.root), attachments=str(indexed.attachments), allowed_hosts=["box.lan"], token="t")
    client = TestClient(app, base_url="http://box.lan:8765")
    assert client.post("/api/rpc/listSessions", headers={"authorization": "Bearer t"}).status_code == 200
    assert client.post("/api/rpc/listSessions", headers={"authorization": "Bearer t", "host": "other"}).status_code == 421


def test_serve_refuses_non_loopback_without_token() -> None:
    from readmodel.cli.reads import serve_command

    result = CliRunner().invoke(serve_command, ["--host", "0.0.0.0", "--db", "/nonexistent.db"])
    assert result.exit_code != 0 and "--token" in result.output


def test_serve_is_registered() -> None:
    from readmodel.cli.reads import COMMANDS

    assert "serve" in {command.name for command in COMMANDS}


def test_page_and_static(indexed: Site) -> None:
    client = indexed.client()
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "app.js" in page.text
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/static/../http.py").status_code == 404


def test_export_command_writes_the_same_archive(indexed: Site, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from readmodel.cli.reads import export_command
    from tests.http.conftest import unzip

    out = tmp_path / "out.zip"
    args = ["root", "--include-descendants", "-o", str(out), "--db", str(indexed.db), "--root", str(indexed.root), "--attachments", str(indexed.attachments)]
    result = CliRunner().invoke(export_command, args)
    assert result.exit_code == 0, result.output
    over_http = indexed.client().get("/api/session.export?sessionId=root&includeDescendants=true").content
    assert unzip(out.read_bytes()) == unzip(over_http)
    missing = CliRunner().invoke(export_command, ["nope", "-o", str(tmp_path / "x.zip"), "--db", str(indexed.db)])
    assert missing.exit_code != 0 and "session not found" in missing.output
    assert not (tmp_path / "x.zip").exists()


def test_only_json_whitespace_counts_as_empty_body(indexed: Site) -> None:
    client = indexed.client()
    assert client.post("/api/rpc/status", content=b" \r\n\t").status_code == 200
    assert client.post("/api/rpc/status", content=b"\x0b").status_code == 400


def test_search_modes_over_get_and_post(indexed: Site) -> None:
    client = indexed.client()
    found = {}
    for mode, query in (("phrase", "bet"), ("words", "bet"), ("substring", "ETA NUM")):
        params = {"query": query, "match": mode, "limit": 20}
        posted = client.post("/api/rpc/searchSessions", json=params)
        got = client.get("/api/rpc/searchSessions", params=_query(params))
        assert posted.status_code == 200 and got.content == posted.content
        found[mode] = {item["header"]["id"] for item in posted.json()["items"]}
    assert found == {"phrase": set(), "words": {"root", "kid", *(f"extra{i}" for i in range(5))}, "substring": {f"extra{i}" for i in range(5)}}
    bad = client.get("/api/rpc/searchEvents", params={"sessionId": "root", "query": "alpha", "match": "regex"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "SESSION_QUERY_INVALID_QUERY"
    schema = client.get("/api/openapi.json").json()
    assert "searchSessions" in json.dumps(schema) and '"substring"' in json.dumps(schema)
