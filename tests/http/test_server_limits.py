"""``sessionq serve`` in a real subprocess under hostile clients (loopback only).

Pins the server's resource bounds: a body over ``--max-body`` answers 413
without the server ever holding it (its peak RSS stays flat), a stalled body
or request head is cut after ``--read-timeout``, ``--max-connections`` bounds
concurrent connections, and ``?access_token=`` values never reach the access
log.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.helpers import REPO
from tests.http.conftest import Site
from tests.http.test_uvicorn import free_port
from tests.logfactory import header, simple_turn, write_log

TOKEN = "s3cret-token-value"
READ_TIMEOUT = 1.0
MAX_CONNECTIONS = 8
MB = 1 << 20


class Server:
    """One ``sessionq serve`` process and its captured output."""

    def __init__(self, site: Site, log: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        args = ["serve", "--db", str(site.db), "--root", str(site.root), "--attachments", str(site.attachments)]
        args += ["--port", str(self.port), "--token", TOKEN, "--read-timeout", str(READ_TIMEOUT)]
        args += ["--max-connections", str(MAX_CONNECTIONS)]
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "indexer.cli", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self._wait_until_up()

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()
            try:
                if httpx.get(self.base + "/", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise AssertionError("sessionq serve did not come up: " + self.log.read_text())

    def peak_rss(self) -> int:
        """The server's peak resident set size so far (VmHWM), in bytes."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def head(self, method: str, path: str, *extra: str) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}", f"Authorization: Bearer {TOKEN}", *extra]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def stop(self) -> str:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    site = Site(tmp_path_factory.mktemp("served"))
    write_log(site.root, header("root", 1), [simple_turn(0, "alpha beta")])
    site.index()
    running = Server(site, site.root.parent / "server.log")
    try:
        yield running
    finally:
        running.stop()


def read_response(sock: socket.socket, within: float) -> tuple[bytes, bool]:
    """Everything the server sends within ``within`` seconds, and whether it then closed."""
    sock.settimeout(0.2)
    received = b""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            piece = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return received, True
        if not piece:
            return received, True
        received += piece
    return received, False


def trickle_until_closed(sock: socket.socket, byte: bytes, rounds: int = 40) -> bool:
    """Send ``byte`` every 0.2 s (at most ``rounds`` times); whether the server closed."""
    for _ in range(rounds):
        try:
            sock.sendall(byte)
        except (BrokenPipeError, ConnectionResetError):
            return True
        if read_response(sock, 0.2)[1]:
            return True
    return False


def status_of(response: bytes) -> int:
    assert response.startswith(b"HTTP/1.1 "), response[:200]
    return int(response.split(b" ", 2)[1])


def test_declared_oversized_body_is_refused_unread(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(server.head("POST", "/api/rpc/status", f"Content-Length: {100 * MB}"))
        response, closed = read_response(sock, 5)
    assert status_of(response) == 413 and closed
    assert b'"code":"PAYLOAD_TOO_LARGE"' in response


def test_chunked_body_over_the_limit_is_413_and_never_held(server: Server) -> None:
    assert httpx.post(server.base + "/api/rpc/status", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    before = server.peak_rss()
    chunk = b"%x\r\n%s\r\n" % (MB, b" " * MB)
    with server.connect() as sock:
        sock.sendall(server.head("POST", "/api/rpc/status", "Transfer-Encoding: chunked"))
        replies: list[tuple[bytes, bool]] = []
        reader = threading.Thread(target=lambda: replies.append(read_response(sock, 15)))
        reader.start()
        sent = 0
        try:
            for _ in range(64):  # 64 MiB unless the server cuts us off first
                sock.sendall(chunk)
                sent += MB
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        reader.join(20)
    (response, closed), = replies
    assert status_of(response) == 413 and closed, response[:300]
    assert b'"code":"PAYLOAD_TOO_LARGE"' in response
    assert sent < 64 * MB
    growth = server.peak_rss() - before
    assert growth < 16 * MB, f"the server's peak RSS grew by {growth / MB:.1f} MiB"


def test_stalled_body_is_cut_after_the_read_timeout(server: Server) -> None:
    started = time.monotonic()
    with server.connect() as sock:
        sock.sendall(server.head("POST", "/api/rpc/status", "Content-Length: 100") + b'{"')  # 98 bytes never come
        response, closed = read_response(sock, READ_TIMEOUT + 5)
    assert status_of(response) == 408 and closed
    assert b'"code":"REQUEST_TIMEOUT"' in response
    assert time.monotonic() - started < READ_TIMEOUT + 3


def test_trickled_request_head_is_cut_after_the_read_timeout(server: Server) -> None:
    started = time.monotonic()
    with server.connect() as sock:
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n".encode())
        closed = trickle_until_closed(sock, b"X")  # never a complete head
    assert closed and time.monotonic() - started < READ_TIMEOUT + 3


def test_idle_connection_is_closed_after_the_read_timeout(server: Server) -> None:
    with server.connect() as sock:
        response, closed = read_response(sock, READ_TIMEOUT + 3)
    assert closed and response == b""


def test_false_content_length_on_an_answered_request_is_cut(server: Server) -> None:
    """A GET does not read its body: after the answer the connection must not
    stay open on a body that trickles in forever."""
    started = time.monotonic()
    with server.connect() as sock:
        sock.sendall(server.head("GET", "/api/rpc/status", "Content-Length: 1000000"))
        response, closed = read_response(sock, READ_TIMEOUT / 3)
        assert status_of(response) == 200 and not closed
        closed = trickle_until_closed(sock, b"x")
    assert closed and time.monotonic() - started < READ_TIMEOUT + 4


def test_connections_beyond_the_limit_get_503(server: Server) -> None:
    idle = [server.connect() for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.2)  # let the server accept them all
        assert httpx.get(server.base + "/").status_code == 503
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 5
    while httpx.get(server.base + "/").status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert httpx.get(server.base + "/").status_code == 200


def test_access_token_never_reaches_the_access_log(server: Server) -> None:
    export = httpx.get(server.base + "/api/session.export", params={"sessionId": "root", "access_token": TOKEN})
    assert export.status_code == 200 and export.content[:2] == b"PK"
    for name in ("access_token", "access%5Ftoken", "access_toke%6E"):
        refused = httpx.get(f"{server.base}/api/rpc/status?{name}={TOKEN}&x=1")
        assert refused.status_code == 401, name
    time.sleep(0.2)
    log = server.log.read_text(errors="replace")
    assert "GET /api/session.export?sessionId=root&access_token=*** HTTP/1.1" in log
    assert "access%5Ftoken=***&x=1" in log
    assert TOKEN not in log
