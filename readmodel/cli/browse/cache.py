"""First pages of searches kept per index generation, and the short queries fetched ahead.

A query's first letter is the slowest keystroke: ``e`` or ``s`` matches most
of the index and ranks tens of thousands of texts (50–70 ms at 13,673
sessions), yet it is also the query people type most often, once per query.
So the browser keeps the rows it showed per query (:class:`PageCache`), valid
while the search scope's generation
(:meth:`readmodel.query.SessionQuery.search_generation`: stored and live
sessions, on SQLite and PostgreSQL alike) is the one they were found at, and
fetches the one-character queries ahead while nobody types (:func:`prefetch`).

Contract: a cached page is shown only at the generation it was found at, so
a session indexed after a query was cached shows up the next time that query
is typed; the cache holds at most :data:`CACHE_SIZE` pages (least recently
used dropped first) and only one generation's pages at a time.

Imports: the browser's rows (:mod:`.rows`) and :mod:`readmodel.core.cancel`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Final

from readmodel.cli.browse.rows import Row, search_rows
from readmodel.core.cancel import AbortSignal

CACHE_SIZE: Final = 256
"""Pages kept (about 20 rows each: a few MB at most)."""
PREFETCHED: Final = "abcdefghijklmnopqrstuvwxyz0123456789"
"""The one-character queries fetched ahead, in this order (a first letter is typed as a letter or digit)."""
PREFETCH_EVERY: Final = 30.0
"""Seconds between two prefetches that compute anything: an index that changes all the time (an
indexer appending) does not keep a core busy recomputing 36 rankings whenever people pause."""


class PageCache:
    """Rows shown per query, at one generation; thread-safe (workers read and fill it)."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._generation: str | None = None
        self._pages: OrderedDict[str, list[Row]] = OrderedDict()
        self.hits = 0

    def get(self, query: str, generation: str) -> list[Row] | None:
        """The rows found for ``query`` at ``generation``, if kept."""
        with self._lock:
            if generation != self._generation:
                return None
            rows = self._pages.get(query)
            if rows is not None:
                self._pages.move_to_end(query)
                self.hits += 1
            return rows

    def put(self, query: str, generation: str, rows: list[Row]) -> None:
        """Keep ``rows`` for ``query``; pages of another generation are dropped (they may be stale)."""
        with self._lock:
            if generation != self._generation:
                self._pages.clear()
                self._generation = generation
            self._pages[query] = rows
            self._pages.move_to_end(query)
            while len(self._pages) > self.size:
                self._pages.popitem(last=False)

    def has(self, query: str, generation: str) -> bool:
        """Whether a page of ``query`` at ``generation`` is kept (not counted as a hit)."""
        with self._lock:
            return generation == self._generation and query in self._pages

    def __len__(self) -> int:
        with self._lock:
            return len(self._pages)


def cached_search_rows(engine: Any, cache: PageCache, query: str, signal: AbortSignal | None = None) -> list[Row]:
    """:func:`~readmodel.cli.browse.rows.search_rows` through ``cache``: the generation is read
    first, so a page is never kept under a generation older than the data it shows would allow
    (at worst it is kept under an older one, and not found again)."""
    generation = engine.search_generation(signal)
    rows = cache.get(query, generation)
    if rows is None:
        rows = search_rows(engine, query, signal)
        cache.put(query, generation, rows)
    return rows


class Prefetcher:
    """Fetches :data:`PREFETCHED` into a cache, at most once per :data:`PREFETCH_EVERY` seconds of work."""

    def __init__(self, cache: PageCache, queries: str = PREFETCHED, every: float = PREFETCH_EVERY) -> None:
        self.cache = cache
        self.queries = queries
        self.every = every
        self._computed_at = -float("inf")
        self.done = threading.Event()  # set once every query is cached at some generation

    def run(self, engine: Any, signal: AbortSignal) -> None:
        """Cache each query not cached at the current generation; stops when ``signal`` aborts
        (it raises the signal's reason) or when the last run that computed is too recent."""
        for query in self.queries:
            generation = engine.search_generation(signal)
            if self.cache.has(query, generation):
                continue
            if time.monotonic() - self._computed_at < self.every and self.done.is_set():
                return  # the index moved since the last prefetch: the keystrokes themselves refill
            self.cache.put(query, generation, search_rows(engine, query, signal))
        self._computed_at = time.monotonic()
        self.done.set()
