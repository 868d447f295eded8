"""A large export read slowly keeps server memory bounded (export-spec §9.4)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest

from readmodel.export.archive import Exporter
from tests.http.conftest import Site
from tests.logfactory import header, tool_call, tool_result, user, write_log

MB = 1 << 20


def big_log(site: Site, megabytes: int) -> Path:
    batches = [[user(0, "start")]]
    seq = 1
    for i in range(megabytes):
        output = os.urandom(MB // 2).hex()  # 1 MB of incompressible-ish text per tool output
        batches.append([tool_call(seq, f"c{i}"), tool_result(seq + 1, f"c{i}", output + " 😀")])
        seq += 2
    return write_log(site.root, header("big"), batches)


async def drive(app: Any, path: str, query: str, out: Path, delay: float) -> dict[str, Any]:
    sent: list[dict[str, Any]] = []
    chunks = 0
    largest = 0

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)  # the client never disconnects
        return {"type": "http.disconnect"}

    with out.open("wb") as sink:

        async def send(message: dict[str, Any]) -> None:
            nonlocal chunks, largest
            if message["type"] == "http.response.body":
                body = message.get("body", b"")
                sink.write(body)
                chunks += 1
                largest = max(largest, len(body))
                await asyncio.sleep(delay)  # a slow reader: the next chunk waits for us
            else:
                sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "headers": [(b"host", b"127.0.0.1:8765")],
            "client": ("127.0.0.1", 5555),
            "server": ("127.0.0.1", 8765),
        }
        await app(scope, receive, send)
    return {"start": sent[0], "chunks": chunks, "largest": largest}


@pytest.mark.slow
def test_large_export_with_slow_reader_has_bounded_memory(site: Site, tmp_path: Path) -> None:
    started = time.monotonic()
    path = big_log(site, 64)
    site.index()
    from tests.http.test_export import log_text

    expected = hashlib.sha256(log_text(path).encode()).hexdigest()
    plaintext = len(log_text(path).encode())
    assert plaintext > 60 * MB
    client = site.client()
    exporter: Exporter = client.app.state.exporter
    out = tmp_path / "export.zip"
    tracemalloc.start()
    try:
        result = asyncio.run(drive(client.app, "/api/session.export", "sessionId=big", out, 0.0005))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result["start"]["status"] == 200
    assert result["chunks"] > 100
    # No pushed chunk exceeds one compressed slice plus the deflate window slack,
    # and the whole server side never holds more than a few MB (the log is >60 MB).
    assert result["largest"] < 512 * 1024
    assert exporter.last_sink is not None and exporter.last_sink.peak < 512 * 1024
    assert peak < 16 * MB, peak
    digest = hashlib.sha256()
    with zipfile.ZipFile(out) as archive, archive.open("session.jsonl") as entry:
        while piece := entry.read(MB):
            digest.update(piece)
    assert digest.hexdigest() == expected
    assert time.monotonic() - started < 120
