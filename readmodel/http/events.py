"""``GET /api/events``: index generations as server-sent events (a sessionq extension).

One :class:`GenerationFeed` per app polls the index's global generation (one
indexed ``SELECT`` on ``index_meta``) every ``interval`` seconds in a single
background task shared by every subscriber, and only while somebody listens.
Each subscriber gets::

    retry: 2000
    event: generation
    data: {"generation": 41}

at once, then one ``generation`` event whenever the number moves (a burst of
commits between two polls is one event: a subscriber only ever needs the
latest), and a ``: heartbeat`` comment every ``heartbeat`` seconds so proxies
and the browser keep the stream open.  An unreadable index is announced as
``data: {"generation": null}`` (the page keeps what it shows).

Bounds: at most ``max_subscribers`` streams at once (503 beyond); a stream
ends after ``max_age`` seconds (the client reconnects) and at once when
:meth:`GenerationFeed.close` runs (server shutdown), so a graceful shutdown
never waits on an open page.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

EVENTS_PATH: Final = "/api/events"


@dataclass(frozen=True)
class FeedLimits:
    """How often the index is polled and how many streams may be open (seconds)."""

    interval: float = 0.25
    heartbeat: float = 15.0
    max_subscribers: int = 32
    max_age: float = 300.0


def read_generation(engine: Any) -> int | None:
    """The index's global generation (``None``: no persisted index, or it cannot be read)."""
    store = getattr(engine, "store", None)
    if store is None:
        return None
    with store.read() as txn:
        number = getattr(txn, "generation_number", None)  # a server index: its vector as one growing number
        return number() if number is not None else int(txn.generation()[1])


def frame(generation: int | None) -> bytes:
    """One ``generation`` event in the SSE wire format."""
    return b"event: generation\ndata: " + msgspec.json.encode({"generation": generation}) + b"\n\n"


class GenerationFeed:
    """The shared poller and its subscribers (all on the server's event loop)."""

    def __init__(self, get_engine: Callable[[], Any], limits: FeedLimits = FeedLimits()) -> None:
        self._get_engine = get_engine
        self.limits = limits
        self._subscribers: set[asyncio.Queue[Any]] = set()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.generation: int | None = None

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def close(self) -> None:
        """End every open stream (and refuse new ones): the server is shutting down."""
        self._closed = True
        for queue in self._subscribers:
            _offer(queue, _CLOSED)

    async def _poll(self) -> int | None:
        try:
            return await run_in_threadpool(lambda: read_generation(self._get_engine()))
        except Exception:  # noqa: BLE001 - a missing or broken index is announced as null
            return None

    async def _run(self) -> None:
        await asyncio.sleep(self.limits.interval)  # the first subscriber polled just now
        while self._subscribers and not self._closed:
            generation = await self._poll()
            if generation != self.generation:
                self.generation = generation
                for queue in self._subscribers:
                    _offer(queue, generation)
            await asyncio.sleep(self.limits.interval)
        self._task = None

    async def stream(self) -> AsyncIterator[bytes]:
        """One subscriber's events until it disconnects, ``max_age`` passes or the feed closes."""
        queue: asyncio.Queue[int | None | object] = asyncio.Queue(maxsize=1)
        self._subscribers.add(queue)
        try:
            starts = self._task is None  # the first subscriber starts the shared poller
            if starts:
                self._task = asyncio.get_running_loop().create_task(self._run())
            current = await self._poll()
            if starts:
                self.generation = current
            yield b"retry: 2000\n" + frame(current)
            loop = asyncio.get_running_loop()
            ends = loop.time() + self.limits.max_age
            while not self._closed:
                remaining = ends - loop.time()
                if remaining <= 0:
                    return
                try:
                    async with asyncio.timeout(min(self.limits.heartbeat, remaining)):
                        item = await queue.get()
                except TimeoutError:
                    yield b": heartbeat\n\n"
                    continue
                if item is _CLOSED:
                    return
                yield frame(item)  # type: ignore[arg-type]
        finally:
            self._subscribers.discard(queue)

    async def endpoint(self, request: Request) -> Response:
        if self._closed:
            return PlainTextResponse("shutting down", status_code=503)
        if len(self._subscribers) >= self.limits.max_subscribers:
            return PlainTextResponse("too many event streams", status_code=503, headers={"retry-after": "5"})
        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        return StreamingResponse(self.stream(), media_type="text/event-stream", headers=headers)


_CLOSED: Final = object()
"""Put in every queue by :meth:`GenerationFeed.close`: the stream ends."""


def _offer(queue: asyncio.Queue[Any], item: Any) -> None:
    """Put the latest generation (or the end), replacing one the subscriber
    has not read yet; an end already queued stays."""
    if queue.full():
        if queue._queue[0] is _CLOSED:  # type: ignore[attr-defined]
            return
        queue.get_nowait()
    queue.put_nowait(item)
