"""Forcing the reader down its slower decode paths, to compare them with the fast ones."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from indexer import reader as reader_module
from indexer import zstdframes
from indexer.records import LineScanner


@contextmanager
def decode_paths(monkeypatch: pytest.MonkeyPatch, *, fast: bool = True, in_memory: bool = True, prefetch: bool = False) -> Iterator[None]:
    """Within the block: without ``fast`` every region is decoded line by line;
    without ``in_memory`` every log is streamed instead of read whole, and with
    ``prefetch`` too its frames are decoded ahead on a thread (as a long log's are)."""
    with monkeypatch.context() as patch:
        if prefetch:
            patch.setattr(zstdframes, "PREFETCH_MIN_BYTES", 0)
        if not fast:
            patch.setattr(LineScanner, "_fast_lines", lambda self, region, line_count: 0)
        if not in_memory:
            patch.setattr(reader_module, "_IN_MEMORY_MAX", -1)
        yield
