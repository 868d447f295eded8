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

Two people are measured, each on a fresh app over the same index:

* **at once** (``browse-keystroke``, the figure since the command exists): the first key
  is typed as soon as the workspace overview is on screen, and each query right after the
  previous one is erased — no pause anywhere, so the app never fetches ahead;
* **settled** (``browse-keystroke-settled``): typing starts once the app has fetched the
  one-character queries ahead (what it does while nobody types, a second or two after
  start-up; :mod:`readmodel.cli.browse.cache`), then goes on as above.  This is a
  person who looks at the screen before typing.

Each is also split into the keys that type (``typed_*``) and the backspaces that erase
(``erased_*``: prefixes already shown once, which the app keeps per index generation).
Every figure is still the time from a key to the screen showing *that* key's results.

With ``--paced MS``, a third typist presses a key every MS ms without waiting for results
(``browse-keystroke-paced``): stale searches are aborted, and a key counts until the screen
shows its results or a later key's.

One JSON object per result: ``browse-keystroke``, ``browse-keystroke-settled``,
``browse-engine`` and ``browse-startup`` (the time until the workspace overview is on
screen; ``settle_ms``: until the one-character queries are fetched ahead).

Usage::

    python -m bench.browse DB [--repeat 1]      # DB: a path, or postgresql://…
"""

from __future__ import annotations

import argparse
import asyncio
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
    """The sessions in the index (SQLite or PostgreSQL), through the engine."""
    with SessionQuery.open(db) as engine:
        return sum(workspace.session_count for workspace in engine.list_workspaces())


async def _until(condition: Any, timeout: float = 30.0) -> None:
    """Sleep in small steps until ``condition`` holds (no pilot waits: they poll the CPU for
    idleness, which would compete with the search thread for the GIL)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not show the results")
        await asyncio.sleep(0.005)


Sample = tuple[float, str]
"""A key's latency (ms) and whether it typed (``typed``) or erased (``erased``)."""


async def _keystrokes(db: str, repeat: int, settle: bool = False) -> tuple[list[Sample], float, float | None, float]:
    """Per-key latencies over ``QUERIES`` typed ``repeat`` times, the startup time, (when
    ``settle``) the time until the app had fetched ahead, waited for before the first key, and
    the process's CPU time per key while typing (every thread: less noisy than latencies on a
    loaded machine)."""
    engine = SessionQuery.open(db)
    app = BrowserApp(engine)
    samples: list[Sample] = []
    started = time.perf_counter()
    settled = None
    try:
        async with app.run_test(size=SIZE):
            await _until(lambda: app.shown_query == "")
            startup = (app.shown_at - started) * 1000
            if settle:
                prefetcher = getattr(app, "prefetcher", None)  # none before the app fetched ahead: a pause alike
                if prefetcher is None:
                    await asyncio.sleep(3.0)
                else:
                    await _until(prefetcher.done.is_set, timeout=120.0)
                settled = (time.perf_counter() - started) * 1000
            cpu = time.process_time()
            for _ in range(repeat):
                for query in QUERIES:
                    await _type(app, query, samples)
            cpu_per_key = (time.process_time() - cpu) * 1000 / len(samples)
    finally:
        engine.close()
    return samples, startup, settled, cpu_per_key


def _key(char: str) -> events.Key:
    """The event a terminal driver posts for a typed character (or ``backspace``)."""
    if char == "backspace":
        return events.Key("backspace", None)
    return events.Key("space" if char == " " else char, char)


async def _type(app: BrowserApp, query: str, samples: list[Sample]) -> None:
    """Type ``query`` key by key, then erase it, timing each key until its results are on screen."""
    keys = [(char, query[: index + 1]) for index, char in enumerate(query)]
    keys += [("backspace", query[:index]) for index in range(len(query) - 1, -1, -1)]
    for key, expected in keys:
        before = time.perf_counter()
        app.post_message(_key(key))
        await _until(lambda: app.shown_query == expected and app.shown_at > before)
        samples.append(((app.shown_at - before) * 1000, "erased" if key == "backspace" else "typed"))
        SLOWEST.append((samples[-1][0], expected))


def _figures(samples: list[Sample]) -> dict[str, Any]:
    """The summary of every key, then of the typing keys and of the erasing ones."""
    every = summary([ms for ms, _ in samples])
    typed = summary([ms for ms, kind in samples if kind == "typed"], prefix="typed_")
    erased = summary([ms for ms, kind in samples if kind == "erased"], prefix="erased_")
    return {**every, **typed, **erased}


async def _paced(db: str, interval: float) -> list[float]:
    """A typist who does not wait for results: every key ``interval`` seconds after the previous
    one (the queries typed and erased as above, once the overview is on screen).  A key's figure
    is the time until the screen shows the results of that key's query *or of a later key's* —
    what the person sees next; a key whose own results never appear (a later key's search
    overtook it) is not a free pass.  A display is attributed to the latest key, posted before
    it, whose query it shows (stale results are never displayed)."""
    engine = SessionQuery.open(db)
    app = BrowserApp(engine)
    keys: list[tuple[float, str]] = []  # (posted at, the query after that key)
    shown: list[tuple[float, str]] = []
    try:
        async with app.run_test(size=SIZE):
            await _until(lambda: app.shown_query == "")

            mark = app.mark_shown

            def marked(what: str) -> None:  # every display, with the app's own time for it (no polling)
                mark(what)
                app.call_after_refresh(lambda: shown.append((app.shown_at, what)))

            app.mark_shown = marked  # type: ignore[method-assign]
            for query in QUERIES:
                steps = [(char, query[: index + 1]) for index, char in enumerate(query)]
                steps += [("backspace", query[:index]) for index in range(len(query) - 1, -1, -1)]
                for key, expected in steps:
                    keys.append((time.perf_counter(), expected))
                    app.post_message(_key(key))
                    await asyncio.sleep(interval)
            await _until(lambda: bool(shown) and shown[-1][1] == "" and shown[-1][0] > keys[-1][0])
    finally:
        engine.close()
    owner = []  # the key index each display belongs to
    for at, what in shown:
        candidates = [index for index, (posted, expected) in enumerate(keys) if posted < at and expected == what]
        owner.append(max(candidates) if candidates else -1)
    samples = []
    for index, (posted, _) in enumerate(keys):
        later = [at for (at, _), key in zip(shown, owner) if key >= index and at > posted]
        samples.append((min(later) - posted) * 1000)
    return samples


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
    parser.add_argument("--paced", type=float, default=0, metavar="MS", help="also a typist pressing a key every MS ms without waiting (browse-keystroke-paced)")
    args = parser.parse_args()
    sessions = _sessions(args.db)
    # The page cache is warmed once (as bench.search runs on a warm machine); each measured
    # engine below is fresh, so every ranking is computed, not served from an engine's cache.
    _engine_only(args.db, 1)
    engine_samples = _engine_only(args.db, args.repeat)
    samples, startup, _, cpu = asyncio.run(_keystrokes(args.db, args.repeat))
    slowest = sorted(SLOWEST, reverse=True)[:10]
    SLOWEST.clear()
    settled_samples, _, settle, settled_cpu = asyncio.run(_keystrokes(args.db, args.repeat, settle=True))
    base = {"sessions": sessions, "terminal": f"{SIZE[0]}x{SIZE[1]}", "debounce_ms": DEBOUNCE_SECONDS * 1000}
    emit(record("browse-keystroke", **base, queries=len(QUERIES), cpu_ms_per_key=round(cpu, 2), **_figures(samples)))
    emit(record("browse-keystroke-settled", **base, queries=len(QUERIES), cpu_ms_per_key=round(settled_cpu, 2), **_figures(settled_samples)))
    emit(record("browse-engine", **base, **summary(engine_samples)))
    emit(record("browse-startup", **base, ms=round(startup, 1), settle_ms=round(settle or 0.0, 1)))
    if args.paced > 0:
        paced = asyncio.run(_paced(args.db, args.paced / 1000))
        emit(record("browse-keystroke-paced", **base, interval_ms=args.paced, **summary(paced)))
    note("slowest keystrokes (at once)", keys=[[round(ms, 1), prefix] for ms, prefix in slowest])
    note("slowest keystrokes (settled)", keys=[[round(ms, 1), prefix] for ms, prefix in sorted(SLOWEST, reverse=True)[:10]])


if __name__ == "__main__":
    main()
