"""``sessionq browse`` per-keystroke latency: search and result rendering in the real app.

The Textual app (:class:`readmodel.cli.browse.app.BrowserApp`, default
debounce) runs headless (Textual's ``run_test``) over an existing index; each
query is typed one key at a time, each key posted as the event a terminal
driver posts, and for every key the figure is the time from just before the
key is posted to the moment the screen has refreshed
with that prefix's results (the app's ``shown_at``): debounce, the search in
its worker thread, building the rows (titles included) and repainting.  Keys
are typed one after another once the previous key's results are shown, so
every prefix is searched in full (a faster typist would have stale searches
aborted instead).  The queries are words, identifiers, phrases and CJK text
from :mod:`bench.search`, plus a query typed out and erased (backspace back to
the workspace listing).  A second figure, ``engine_*``, is the same prefixes
through ``search_rows`` alone (no app), which says how much of a keystroke is
the engine.  The page cache is warmed by one untimed pass first; every timed
engine is fresh, so each ranking is computed.  The slowest keys are noted on stderr.

One JSON object per result: ``browse-keystroke`` (every key), ``browse-engine`` and
``browse-startup`` (the time until the workspace overview is on screen).

Usage::

    python -m bench.browse DB [--repeat 1]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import time
from typing import Any

from textual import events

from bench.common import emit, note, record, summary, timed_ms
from readmodel.cli.browse.app import DEBOUNCE_SECONDS, BrowserApp
from readmodel.cli.browse.rows import search_rows
from readmodel.query import SessionQuery

QUERIES = ["error", "snapshot", "reconcile", "tool call", "HTTPRedirectHandler", "the file", "workspace", "数据库索引需要重建", "zzzqqqxx"]
SIZE = (120, 40)
SLOWEST: list[tuple[float, str]] = []


def _sessions(db: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute('SELECT count(*) FROM "sessions"').fetchone()[0])
    finally:
        conn.close()


async def _until(condition: Any, timeout: float = 30.0) -> None:
    """Sleep in small steps until ``condition`` holds (no pilot waits: they poll the CPU for
    idleness, which would compete with the search thread for the GIL)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not show the results")
        await asyncio.sleep(0.005)


async def _keystrokes(db: str, repeat: int) -> tuple[list[float], float]:
    """Per-key latencies (ms) over ``QUERIES`` typed ``repeat`` times, and the startup time."""
    engine = SessionQuery.open(db)
    app = BrowserApp(engine)
    samples: list[float] = []
    started = time.perf_counter()
    try:
        async with app.run_test(size=SIZE):
            await _until(lambda: app.shown_query == "")
            startup = (app.shown_at - started) * 1000
            for _ in range(repeat):
                for query in QUERIES:
                    await _type(app, query, samples)
    finally:
        engine.close()
    return samples, startup


def _key(char: str) -> events.Key:
    """The event a terminal driver posts for a typed character (or ``backspace``)."""
    if char == "backspace":
        return events.Key("backspace", None)
    return events.Key("space" if char == " " else char, char)


async def _type(app: BrowserApp, query: str, samples: list[float]) -> None:
    """Type ``query`` key by key, then erase it, timing each key until its results are on screen."""
    keys = [(char, query[: index + 1]) for index, char in enumerate(query)]
    keys += [("backspace", query[:index]) for index in range(len(query) - 1, -1, -1)]
    for key, expected in keys:
        before = time.perf_counter()
        app.post_message(_key(key))
        await _until(lambda: app.shown_query == expected and app.shown_at > before)
        samples.append((app.shown_at - before) * 1000)
        SLOWEST.append((samples[-1], expected))


def _prefixes() -> list[str]:
    return [query[:index] for query in QUERIES for index in range(1, len(query) + 1) if query[:index].strip()]


def _engine_only(db: str, repeat: int) -> list[float]:
    """``search_rows`` for every typed prefix on a fresh engine (its ranking cache empty)."""
    samples = []
    with SessionQuery.open(db) as engine:
        for _ in range(repeat):
            for prefix in _prefixes():
                samples.append(timed_ms(lambda: search_rows(engine, prefix))[0])
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    sessions = _sessions(args.db)
    # The page cache is warmed once (as bench.search runs on a warm machine); each measured
    # engine below is fresh, so every ranking is computed, not served from an engine's cache.
    _engine_only(args.db, 1)
    engine_samples = _engine_only(args.db, args.repeat)
    samples, startup = asyncio.run(_keystrokes(args.db, args.repeat))
    base = {"sessions": sessions, "terminal": f"{SIZE[0]}x{SIZE[1]}", "debounce_ms": DEBOUNCE_SECONDS * 1000}
    emit(record("browse-keystroke", **base, queries=len(QUERIES), **summary(samples)))
    emit(record("browse-engine", **base, **summary(engine_samples)))
    emit(record("browse-startup", **base, ms=round(startup, 1)))
    note("slowest keystrokes", keys=[[round(ms, 1), prefix] for ms, prefix in sorted(SLOWEST, reverse=True)[:10]])


if __name__ == "__main__":
    main()
