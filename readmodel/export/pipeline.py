"""The export's stages over threads: read-ahead of an entry's pieces, deflate in segments.

Decoding zstd (``zstandard``), deflating and computing CRC-32 (ISA-L or zlib)
all release the GIL, so on two cores they overlap with each other and with
the Python work between them (the image scan, the UTF-8 check):

* :class:`Readahead` runs an entry's piece iterator (the zstd decode and the
  UTF-8 pass-through) on a thread of its own, a couple of pieces ahead of the
  consumer;
* :class:`SegmentDeflater` cuts the entry into segments of :data:`SEGMENT`
  bytes and deflates them on a shared pool.  Each segment is a deflate
  stream of its own, primed with the 32 KiB before it as its dictionary (so
  back-references reach across the cut and the archive is as small as one
  continuous stream gives) and ended with a sync flush, which leaves it
  byte-aligned and not final.  Concatenated in order and closed by one final
  empty block, the segments are one valid raw deflate stream, which any
  inflater reads as such.

Memory stays bounded: the read-ahead holds :data:`READAHEAD` pieces (each at
most 1 MiB, see :data:`readmodel.export.frames.GROUP_PLAINTEXT`), the
deflater :data:`DEPTH` segments and their output.
"""

from __future__ import annotations

import os
import queue
import threading
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import Any, Final

try:  # ISA-L deflate (the ``isal`` package) for the fast levels; zlib when absent
    from isal import isal_zlib as _isal_zlib
except ImportError:  # pragma: no cover - isal is a dependency; kept optional for odd platforms
    _isal_zlib = None

SEGMENT: Final = 256 << 10
"""Plaintext deflated as one independent segment (one hand-over of output each)."""
WINDOW: Final = 32 << 10
"""Deflate's window: the dictionary that primes each segment."""
DEPTH: Final = 4
"""Segments of one entry in flight on the pool at most."""
READAHEAD: Final = 2
"""Pieces the read-ahead thread holds ready at most."""

_crc32 = _isal_zlib.crc32 if _isal_zlib is not None else zlib.crc32
# With ISA-L, each segment's CRC-32 is computed on the pool and combined in order
# (a call that gives up the GIL on the consumer's thread costs up to a switch
# interval to get it back from a busy thread); zlib has no combine in Python.
_crc32_combine = getattr(_isal_zlib, "crc32_combine", None)


def codec(level: int) -> ModuleType:
    """The deflate implementation for ``level``: ISA-L at 1–3 (several times faster
    than zlib at a similar ratio, and plain raw deflate), zlib at 0 and 4–9 or
    when ``isal`` is not installed."""
    if _isal_zlib is not None and 1 <= level <= 3:
        return _isal_zlib
    return zlib


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def shared_pool() -> ThreadPoolExecutor:
    """One pool for every export of the process, one thread per core (2–8):
    concurrent exports share the cores instead of each starting its own threads."""
    global _pool
    with _pool_lock:
        if _pool is None:
            workers = min(8, max(2, os.cpu_count() or 2))
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sessionq-deflate")
        return _pool


def _deflate_segment(module: Any, level: int, data: memoryview | bytes, window: memoryview | bytes) -> tuple[bytes, int | None, int]:
    """One segment as raw deflate ending in a sync flush (byte-aligned, not final),
    its CRC-32 (``None`` when it cannot be combined: the consumer computes it) and length."""
    if window:
        compressor = module.compressobj(level, module.DEFLATED, -15, module.DEF_MEM_LEVEL, module.Z_DEFAULT_STRATEGY, window)
    else:
        compressor = module.compressobj(level, module.DEFLATED, -15)
    deflated = compressor.compress(data) + compressor.flush(module.Z_SYNC_FLUSH)
    return deflated, (_crc32(data) if _crc32_combine is not None else None), len(data)


class SegmentDeflater:
    """Raw deflate of one entry, segment by segment on the shared pool, output in order.

    :meth:`write` and :meth:`finish` give the deflate bytes that are ready (in
    order; ``write`` waits for the oldest segment only when :data:`DEPTH` are in
    flight).  :attr:`crc`, :attr:`size` and :attr:`compressed` describe the
    entry once :meth:`finish` is exhausted.  :meth:`cancel` drops the segments
    not yet started (the running ones finish on their own).
    """

    def __init__(self, level: int, segment: int = SEGMENT, depth: int = DEPTH) -> None:
        self._module = codec(level)
        self._level = level
        self._segment = segment
        self._depth = depth
        self._pool = shared_pool()
        self._inflight: deque[Future[tuple[bytes, int | None, int]]] = deque()
        self._pending: list[memoryview] = []
        self._pending_size = 0
        self._window: memoryview | bytes = b""
        self.crc = 0
        self.size = 0
        self.compressed = 0

    def write(self, data: bytes) -> Iterator[bytes]:
        """Adds ``data`` to the entry; yields the deflate bytes ready meanwhile."""
        if not data:
            return
        if _crc32_combine is None:
            self.crc = _crc32(data, self.crc)
        self.size += len(data)
        view = memoryview(data)
        if self._pending:
            take = view[: self._segment - self._pending_size]
            self._pending.append(take)
            self._pending_size += len(take)
            view = view[len(take) :]
            if self._pending_size < self._segment:
                return
            yield from self._submit(b"".join(self._pending))
            self._pending, self._pending_size = [], 0
        while len(view) >= self._segment:
            yield from self._submit(view[: self._segment])
            view = view[self._segment :]
        if view:
            self._pending, self._pending_size = [view], len(view)

    def finish(self) -> Iterator[bytes]:
        """The rest of the entry's deflate bytes, ending with the final block."""
        if self._pending:
            yield from self._submit(b"".join(self._pending))
            self._pending, self._pending_size = [], 0
        while self._inflight:
            yield self._settled(self._inflight.popleft().result())
        final = self._module.compressobj(self._level, self._module.DEFLATED, -15).flush()
        self.compressed += len(final)
        yield final

    def cancel(self) -> None:
        while self._inflight:
            self._inflight.popleft().cancel()
        self._pending, self._pending_size = [], 0

    def _submit(self, data: memoryview | bytes) -> Iterator[bytes]:
        window = self._window
        self._window = data[-WINDOW:]
        self._inflight.append(self._pool.submit(_deflate_segment, self._module, self._level, data, window))
        while self._inflight and (len(self._inflight) > self._depth or self._inflight[0].done()):
            yield self._settled(self._inflight.popleft().result())

    def _settled(self, result: tuple[bytes, int | None, int]) -> bytes:
        """A segment's deflate bytes, its CRC-32 and size counted in (segments settle in order)."""
        data, crc, length = result
        if crc is not None and _crc32_combine is not None:
            self.crc = _crc32_combine(self.crc, crc, length)
        self.compressed += len(data)
        return data


_ITEM: Final = 0
_END: Final = 1
_ERROR: Final = 2


class Readahead:
    """Iterates ``source`` on a thread of its own, at most ``depth`` items ahead.

    Items, the end and an exception come out in the order the source gave
    them (an exception is raised here, in the consumer).  :meth:`close` (also
    at the end of iteration) stops the thread, which closes ``source`` on its
    own thread, and waits for it: after ``close`` the source is closed.
    """

    def __init__(self, source: Iterable[bytes], depth: int = READAHEAD) -> None:
        self._source = source
        self._queue: queue.Queue[tuple[int, Any]] = queue.Queue(depth)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._run, name="sessionq-readahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for item in self._source:
                if not self._put((_ITEM, item)):
                    return
            self._put((_END, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            self._put((_ERROR, exc))
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                close()

    def _put(self, entry: tuple[int, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self._done:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == _ITEM:
            return value  # type: ignore[no-any-return]
        self.close()
        if kind == _ERROR:
            raise value
        raise StopIteration

    def close(self) -> None:
        self._done = True
        self._stop.set()
        while self._thread.is_alive():
            try:  # free a producer blocked on a full queue
                self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(0.01)
