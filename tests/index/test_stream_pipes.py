"""The pipes a streamed log crosses are widened to a mebibyte where the system allows.

A long log's stages write hundreds of MB through their pipes in messages of
about a megabyte; at Linux's default 64 KiB each message was sixteen writes
and as many wake-ups of the reader.  Pinned here: both pipes of a split
stream and the single worker's pipe to the writer get the larger capacity,
and a refusal (a user over its pipe quota) leaves a working pipe as it was.
"""

from __future__ import annotations

import fcntl
from concurrent.futures import Future
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pytest

from indexer import preparation
from indexer.layout import Compression
from indexer.preparation import PIPE_BYTES, PrepTask, stream_pipe, widen
from indexer.sessionstream import SessionStream

DEFAULT_PIPE_BYTES = 64 * 1024


def capacity(connection: Any) -> int:
    return fcntl.fcntl(connection.fileno(), fcntl.F_GETPIPE_SZ)


class IdlePool:
    """A pool that takes tasks and runs none (the pipes are made before anything runs)."""

    def __init__(self) -> None:
        self.submitted: list[tuple[Any, ...]] = []

    def submit(self, function: Any, *args: Any) -> Future[None]:
        self.submitted.append((function, *args))
        return Future()


def task(tmp_path: Path) -> PrepTask:
    return PrepTask(str(tmp_path / "log.jsonl"), 1, {"id": "s"}, True, 0)


def test_a_stream_pipe_holds_a_mebibyte_and_carries_bytes() -> None:
    receive, send = stream_pipe(get_context("fork"))
    assert capacity(send) == capacity(receive) == PIPE_BYTES
    send.send_bytes(b"x" * (PIPE_BYTES - 64))  # fits without a reader: the capacity is real
    assert receive.recv_bytes() == b"x" * (PIPE_BYTES - 64)


@pytest.mark.parametrize("split", [False, True], ids=["one-worker", "split"])
def test_every_pipe_of_a_streamed_log_is_a_stream_pipe(tmp_path: Path, split: bool) -> None:
    pool = IdlePool()
    stream = SessionStream(task(tmp_path), Compression.NONE, str(tmp_path), pool, split=split)  # type: ignore[arg-type]
    try:
        assert capacity(stream._receive) == PIPE_BYTES  # the writer's end
        if split:
            between = [arg for call in pool.submitted for arg in call if hasattr(arg, "fileno")]
            stages = [end for end in between if end is not stream._send]
            assert len(stages) == 2 and all(capacity(end) == PIPE_BYTES for end in stages)
    finally:
        stream.close()


def test_a_refused_widening_leaves_a_working_pipe_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    real = fcntl.fcntl

    def refuse(fd: int, command: int, *args: Any) -> Any:
        if command == fcntl.F_SETPIPE_SZ:
            raise PermissionError(1, "Operation not permitted")
        return real(fd, command, *args)

    monkeypatch.setattr(preparation.fcntl, "fcntl", refuse)
    receive, send = stream_pipe(get_context("fork"))
    assert capacity(send) == DEFAULT_PIPE_BYTES
    send.send_bytes(b"still a pipe")
    assert receive.recv_bytes() == b"still a pipe"


def test_widening_what_is_not_a_pipe_is_refused_quietly(tmp_path: Path) -> None:
    with open(tmp_path / "file", "wb") as fh:
        assert widen(fh.fileno()) is False
