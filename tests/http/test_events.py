"""``GET /api/events``: index generations as server-sent events, over a real uvicorn server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from readmodel.http.events import FeedLimits
from tests.http.conftest import Site
from tests.http.test_uvicorn import serving
from tests.logfactory import assistant, header, user, write_log


def generations(lines: Iterator[str]) -> Iterator[int | None]:
    """The ``generation`` numbers of an SSE stream, in order."""
    event = None
    for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == "generation":
            import json

            yield json.loads(line[6:])["generation"]


@pytest.fixture
def indexed(site: Site) -> Site:
    write_log(site.root, header("first", 1_790_000_000_000, cwd="/w"), [[user(0, "hello")]])
    site.index()
    return site


@pytest.mark.exclusive  # bounds a wall time within a second or two
def test_a_reconcile_is_announced_as_a_new_generation_within_a_second(indexed: Site) -> None:
    with serving(indexed) as base, httpx.Client(base_url=base, timeout=5) as client:
        with client.stream("GET", "/api/events") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            stream = generations(response.iter_lines())
            first = next(stream)
            assert isinstance(first, int)
            write_log(indexed.root, header("second", 1_790_000_100_000, cwd="/w"), [[user(0, "again"), assistant(1, "yes")]])
            started = time.monotonic()
            indexed.index()
            second = next(stream)
            assert second is not None and second > first
            assert time.monotonic() - started < 1.0 + 0.5  # the reconcile itself, then one 250 ms poll


def test_streams_beyond_the_bound_are_refused_and_shutdown_ends_open_streams(indexed: Site) -> None:
    limits = FeedLimits(max_subscribers=2, heartbeat=0.2)
    seen: list[str] = []
    with serving(indexed, feed_limits=limits) as base:
        clients = [httpx.Client(base_url=base, timeout=5) for _ in range(3)]
        streams = [clients[i].stream("GET", "/api/events") for i in range(2)]
        responses = [s.__enter__() for s in streams]
        lines = [r.iter_lines() for r in responses]
        for it in lines:
            assert next(it).startswith("retry:")
        refused = clients[2].get("/api/events")
        assert refused.status_code == 503
        # heartbeats keep an idle stream alive
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and ": heartbeat" not in seen:
            seen.append(next(lines[0]))
        assert ": heartbeat" in seen

        def drain() -> None:
            for _ in lines[1]:
                pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        started = time.monotonic()
    # leaving `serving` shut the server down: the open stream ended, quickly
    reader.join(5)
    assert not reader.is_alive()
    assert time.monotonic() - started < 3
    for s in streams:
        s.__exit__(None, None, None)
    for c in clients:
        c.close()


def test_the_stream_is_guarded_like_every_api_route(indexed: Site) -> None:
    client = indexed.client(token="t0k")
    assert client.get("/api/events").status_code == 401
    assert client.get("/api/events", headers={"host": "evil.example"}).status_code == 421
