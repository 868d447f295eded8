"""First pages of searches kept per index generation, and the short queries fetched ahead.

A query's first letter is the slowest keystroke: ``e`` or ``s`` matches most
of the index and ranks tens of thousands of texts (50–70 ms at 13,673
sessions), yet it is also the query people type most often, once per query.
So the browser keeps the page it showed per query (:class:`PageCache`), valid
while the search scope's generation
(:meth:`readmodel.query.SessionQuery.search_generation`: stored and live
sessions, on SQLite and PostgreSQL alike) is the one they were found at, and
fetches the one-character queries ahead while nobody types (:class:`Prefetcher`).

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

from readmodel.cli.browse.rows import Found, Row, find, found_rows
from readmodel.core.cancel import AbortSignal

CACHE_SIZE: Final = 256
"""Pages kept (20 hits each with their summaries: a few MB at most)."""
PREFETCHED: Final = "abcdefghijklmnopqrstuvwxyz0123456789"
"""The one-character queries fetched ahead, in this order (a first letter is typed as a letter or digit)."""
PREFETCH_EVERY: Final = 30.0
"""Seconds between two prefetches that compute anything: an index that changes all the time (an
indexer appending) does not keep a core busy recomputing 36 rankings whenever people pause."""


def page_key(query: str) -> str:
    """The key of ``query``'s page: ASCII letters in lower case, since the index folds their case
    as it tokenises (``H`` finds what ``h`` finds, so the ``h`` fetched ahead serves it); any
    other text as typed (Unicode folding rules differ from the tokeniser's at the edges)."""
    return query.lower() if query.isascii() else query


class PageCache:
    """First pages (:class:`~readmodel.cli.browse.rows.Found`) per query, at one generation;
    thread-safe (workers read and fill it).  Rows are made from a page each time it is shown,
    so their ages stay true however long the page is kept."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._generation: str | None = None
        self._pages: OrderedDict[str, Found] = OrderedDict()
        self.hits = 0

    def get(self, query: str, generation: str) -> Found | None:
        """The page found for ``query`` at ``generation``, if kept."""
        key = page_key(query)
        with self._lock:
            if generation != self._generation:
                return None
            found = self._pages.get(key)
            if found is not None:
                self._pages.move_to_end(key)
                self.hits += 1
            return found

    def put(self, query: str, generation: str, found: Found) -> None:
        """Keep ``found`` for ``query``; pages of another generation are dropped (they may be stale)."""
        key = page_key(query)
        with self._lock:
            if generation != self._generation:
                self._pages.clear()
                self._generation = generation
            self._pages[key] = found
            self._pages.move_to_end(key)
            while len(self._pages) > self.size:
                self._pages.popitem(last=False)

    def has(self, query: str, generation: str) -> bool:
        """Whether a page of ``query`` at ``generation`` is kept (not counted as a hit)."""
        with self._lock:
            return generation == self._generation and page_key(query) in self._pages

    def __len__(self) -> int:
        with self._lock:
            return len(self._pages)


def cached_search_rows(engine: Any, cache: PageCache, query: str, signal: AbortSignal | None = None) -> list[Row]:
    """:func:`~readmodel.cli.browse.rows.search_rows` through ``cache``.  The generation is read
    before searching, so a page is never kept under a generation newer than its data (at worst
    under an older one, where it is not found again)."""
    generation = engine.search_generation(signal)
    found = cache.get(query, generation)
    if found is None:
        found = find(engine, query, signal)
        cache.put(query, generation, found)
    return found_rows(found, query)


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
            self.cache.put(query, generation, find(engine, query, signal))
        self._computed_at = time.monotonic()
        self.done.set()
