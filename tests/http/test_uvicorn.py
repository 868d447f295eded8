"""Over a real socket (uvicorn): a mid-stream failure aborts the response body."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from readmodel.http import create_app
from tests.http.conftest import Site
from tests.http.test_export import lineage


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(site: Site) -> Iterator[tuple[Site, str]]:
    paths = lineage(site)
    paths["child-b"].unlink()
    port = free_port()
    app = create_app(str(site.db), root=str(site.root), attachments=str(site.attachments), port=port)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield site, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def test_mid_stream_failure_breaks_the_connection(served: tuple[Site, str]) -> None:
    _, base = served
    with httpx.Client(base_url=base) as client:
        ok = client.get("/api/session.export", params={"sessionId": "session-root"})
        assert ok.status_code == 200 and ok.content[:2] == b"PK"
        params = {"sessionId": "session-root", "includeDescendants": "true"}
        with pytest.raises(httpx.HTTPError), client.stream("GET", "/api/session.export", params=params) as response:
            assert response.status_code == 200
            b"".join(response.iter_bytes())


def test_real_server_rejects_foreign_host(served: tuple[Site, str]) -> None:
    _, base = served
    response = httpx.post(base + "/api/rpc/listSessions", headers={"host": "attacker.example"})
    assert response.status_code == 421


def test_head_over_a_real_socket(served: tuple[Site, str]) -> None:
    _, base = served
    response = httpx.head(base + "/api/session.export", params={"sessionId": "session-root", "includeDescendants": "true"})
    assert response.status_code == 200 and response.content == b""
    assert response.headers["content-type"] == "application/zip"
    assert response.headers["content-disposition"] == 'attachment; filename="dsh-session-session-root.zip"'
    assert httpx.head(base + "/api/session.export", params={"sessionId": "absent"}).status_code == 404
