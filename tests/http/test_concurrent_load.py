"""`sessionq serve` under concurrent load: exact answers, and the server survives.

The real console command (uvicorn, the HTTP thread pool) runs in a child
process over an index of the shared corpus, on a free loopback port.  32
clients then send a few thousand readSession / readSurface / listEvents calls
at once; shared zstd contexts used to answer some of them with false
``SESSION_QUERY_PERSISTENCE_FAILED`` corruption errors and then crash the
server (SIGSEGV).
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.cli.helpers import REPO
from tests.corpus import ZSTD_ROOT, require_corpus
from tests.http.test_uvicorn import free_port
from tests.query.concurrency import Tally, run_in_threads
from tests.query.support import build_index

CLIENTS = 32
REQUESTS_PER_CLIENT = 63
SESSIONS = 40  # of the corpus's 125: the expected answers are fetched one at a time first
METHODS = ("readSession", "readSurface", "listEvents")

Call = tuple[str, str]  # (method, session id)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The real ``sessionq serve`` over the corpus index; yields the process and its base URL."""
    require_corpus()
    base_dir = tmp_path_factory.mktemp("load")
    db = build_index(ZSTD_ROOT, base_dir / "index.db")
    port = free_port()
    command = [sys.executable, "-m", "indexer.cli", "serve", "--db", str(db), "--root", str(ZSTD_ROOT)]
    command += ["--attachments", str(base_dir / "attachments"), "--host", "127.0.0.1", "--port", str(port)]
    with open(base_dir / "server.log", "wb") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(process, base)
        yield process, base
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_serving(process: subprocess.Popen[bytes], base: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, f"sessionq serve exited with status {process.returncode}"
        try:
            if httpx.get(f"{base}/api/rpc/status", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("sessionq serve did not start")


def _call(client: httpx.Client, call: Call) -> tuple[int, bytes]:
    method, session_id = call
    response = client.post(f"/api/rpc/{method}", json={"sessionId": session_id})
    return response.status_code, response.content


def test_concurrent_clients_get_the_sequential_answers_and_the_server_survives(
    server: tuple[subprocess.Popen[bytes], str],
) -> None:
    process, base = server
    with httpx.Client(base_url=base, timeout=30) as client:
        listing = client.post("/api/rpc/listSessions", json={})
        assert listing.status_code == 200
        ids = random.Random(0).sample([record["header"]["id"] for record in listing.json()], SESSIONS)
        calls = [(method, session_id) for session_id in ids for method in METHODS]
        # The single-client answers, one request at a time.
        expected = {call: _call(client, call) for call in calls}
    assert sum(status == 200 for status, _ in expected.values()) > 0.9 * len(calls)

    tally = Tally()

    def client_loop(seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=base, timeout=30) as own:
            for _ in range(REQUESTS_PER_CLIENT):
                call = rng.choice(calls)
                try:
                    got = _call(own, call)
                except httpx.HTTPError as error:
                    got = (0, repr(error).encode())
                tally.check(str(call), got, expected[call])

    run_in_threads(client_loop, CLIENTS)
    assert process.poll() is None, f"sessionq serve died with status {process.returncode}"
    mismatched = len(tally.mismatches)
    assert mismatched == 0, f"{mismatched} of {tally.count} answers differ; first: {tally.mismatches[:3]}"
    assert tally.count == CLIENTS * REQUESTS_PER_CLIENT
