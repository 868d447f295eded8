"""Hostile lines through a real ``sessionq rpc`` process: each is answered and
the stream goes on (interface.md: one response line per request line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from readmodel.rpc import MAX_DEPTH
from tests.cli.helpers import REPO


def run_rpc(db: Path, lines: list[bytes]) -> tuple[int, list[dict], bytes]:
    """Feed ``lines`` to ``sessionq rpc``; its exit status, response lines and stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "indexer.cli", "rpc", "--db", str(db)],
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        check=False,
        cwd=REPO,
        timeout=60,
    )
    return result.returncode, [json.loads(line) for line in result.stdout.splitlines()], result.stderr


def status_request(request_id: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "status"}).encode()


def test_deeply_nested_line_is_a_parse_error_and_the_next_line_is_answered(index_db: Path) -> None:
    deep_params = b'{"jsonrpc":"2.0","id":2,"method":"searchSessions","params":{"query":' + b"[" * 5000 + b"]" * 5000 + b"}}"
    lines = [b"[" * 1000 + b"]" * 1000, deep_params, b"{" * 100_000, status_request(3)]
    code, responses, stderr = run_rpc(index_db, lines)
    assert code == 0 and b"Traceback" not in stderr, stderr.decode(errors="replace")
    assert len(responses) == 4
    for response in responses[:3]:
        assert response["id"] is None
        assert response["error"]["code"] == -32700
        assert str(MAX_DEPTH) in response["error"]["message"]
    assert responses[3]["id"] == 3 and responses[3]["result"]["sessions"] == 2


def test_lone_surrogate_escapes_are_answered_as_replacement_characters(index_db: Path) -> None:
    search = rb'{"jsonrpc":"2.0","id":"q\ud800","method":"searchSessions","params":{"query":"be\udc00ta"}}'
    title = rb'{"jsonrpc":"2.0","id":5,"method":"readTitle","params":{"sessionId":"ro\ud83dot"}}'
    code, responses, _ = run_rpc(index_db, [search, title, status_request(6)])
    assert code == 0
    assert responses[0]["id"] == "q\ufffd" and "result" in responses[0]
    assert responses[1]["id"] == 5
    assert responses[1]["error"]["data"]["code"] == "SESSION_QUERY_SESSION_NOT_FOUND"
    assert "ro\ufffdot" in responses[1]["error"]["message"]
    assert responses[2]["id"] == 6
