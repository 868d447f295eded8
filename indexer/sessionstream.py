"""The writer's end of one streamed log (see :mod:`indexer.streaming`)."""

from __future__ import annotations

import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from readmodel.store.blocks import active_dictionary

from .layout import Compression
from .preparation import PrepTask, collector_paused, pipe_context, stream_pipe
from .splitstream import submit_split
from . import streaming


class SessionStream:
    """The writer's end of one streamed log (see :func:`~indexer.streaming.stream_session`).

    With ``split`` the log is read by one worker and projected by another
    (:mod:`indexer.splitstream`; ``pool`` needs two workers); the messages are the same.
    """

    def __init__(self, task: PrepTask, compression: Compression, root: str, pool: ProcessPoolExecutor, split: bool = False) -> None:
        self.task = task
        self.wait_seconds = 0.0  # time spent waiting for the worker's messages
        context = pipe_context()
        self._receive, send = stream_pipe(context)
        # The writer's ends are kept open until the worker has answered: the pool pickles
        # them after submit returns.
        self._send = send
        if split:
            self._futures, self._inner = submit_split(pool, task, compression.value, root, send, streaming.STREAM_CHUNK_ROWS, active_dictionary(), context)
        else:
            self._futures = [pool.submit(streaming.stream_session, task, compression.value, root, send, streaming.STREAM_CHUNK_ROWS, active_dictionary())]
            self._inner = []

    def messages(self) -> Any:
        """The worker's messages in order; raises :class:`StreamBroken` if it died without a last word."""
        answering = self._futures[-1]
        while True:
            started = time.perf_counter()
            ready = self._receive.poll(0.2)
            self.wait_seconds += time.perf_counter() - started
            if ready:
                try:
                    with collector_paused():  # unpickling a chunk makes no cycles (see collector_paused)
                        message = self._receive.recv()
                except (EOFError, OSError) as exc:
                    raise StreamBroken(f"{type(exc).__name__}: {exc}") from None
                self._close_inner()  # the stages' arguments are pickled: they see each other's ends now
                yield message
                if message[0] != "calls":
                    return
            elif self._futures[-1].done() and not self._receive.poll(0):
                error = answering.exception()
                raise StreamBroken(f"{type(error).__name__}: {error}" if error else "the worker ended without an answer")
            elif (error := _failed(self._futures[:-1])) is not None:
                raise StreamBroken(f"its reading worker failed: {error}")

    def close(self) -> None:
        """Stop listening (a worker still sending gets a broken pipe and ends its task)."""
        self._receive.close()
        self._send.close()
        self._close_inner()

    def _close_inner(self) -> None:
        for end in self._inner:
            end.close()
        self._inner = []


def _failed(futures: list[Future[Any]]) -> str | None:
    """How the first of ``futures`` that ended with an exception failed, if one did."""
    for future in futures:
        if future.done():
            error = future.exception() if not future.cancelled() else None
            if future.cancelled() or error is not None:
                return f"{type(error).__name__}: {error}" if error is not None else "cancelled"
    return None


class StreamBroken(Exception):
    """A streamed log's worker ended without its last message."""
