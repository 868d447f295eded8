"""Over a real socket (uvicorn): a mid-stream failure aborts the response body."""

from __future__ import annotations

import io
import socket
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn

from readmodel.http.app import create_app, server as make_server
from tests.http.conftest import Site
from tests.http.test_export import lineage
from tests.logfactory import header, user, write_log


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(site: Site, **options: Any) -> Iterator[str]:
    """The real app on uvicorn in a thread, on a free loopback port; yields its base URL."""
    port = free_port()
    app = create_app(str(site.db), root=str(site.root), attachments=str(site.attachments), port=port, **options)
    server = make_server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def served(site: Site) -> Iterator[tuple[Site, str]]:
    paths = lineage(site)
    paths["child-b"].unlink()
    with serving(site) as base:
        yield site, base


def test_mid_stream_failure_breaks_the_connection(served: tuple[Site, str]) -> None:
    _, base = served
    with httpx.Client(base_url=base) as client:
        ok = client.get("/api/session.export", params={"sessionId": "session-root"})
        assert ok.status_code == 200 and ok.content[:2] == b"PK"
        params = {"sessionId": "session-root", "includeDescendants": "true"}
        with pytest.raises(httpx.HTTPError), client.stream("GET", "/api/session.export", params=params) as response:
            assert response.status_code == 200
            b"".join(response.iter_bytes())


def test_late_checksum_failure_in_the_root_breaks_the_connection(site: Site) -> None:
    """A root frame whose checksum fails after the 200 was sent cuts the connection (no 500, no valid ZIP)."""
    path = write_log(site.root, header("s1"), [[user(0, "q" * 200_000)], [user(1, "last")]])
    site.index()
    data = bytearray(path.read_bytes())
    data[-2] ^= 0xFF  # content checksum of the last frame
    path.write_bytes(bytes(data))
    with serving(site) as base, httpx.Client(base_url=base) as client:
        received = bytearray()
        with pytest.raises(httpx.RemoteProtocolError), client.stream("GET", "/api/session.export", params={"sessionId": "s1"}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/zip"
            for piece in response.iter_bytes():
                received += piece
        with pytest.raises(zipfile.BadZipFile):
            zipfile.ZipFile(io.BytesIO(bytes(received))).testzip()
        # the server is still healthy afterwards
        assert client.head("/api/session.export", params={"sessionId": "s1"}).status_code == 200


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
