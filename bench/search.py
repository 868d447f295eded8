"""Search latency over a large index: median and p95 over a fixed query set.

First pages are timed with the ranking cache emptied; deep pages follow
cursors on the same engine, as a paging client does.  Queries cover common words, rare words, phrases, CJK, code identifiers and
no-hit queries, for both scopes (cross-session and within one session), first
page and a deep page (the third, following cursors).

Usage::

    python -m bench.search DB [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time
from typing import Any

from readmodel.search import SessionSearch

QUERIES = [
    # common words
    "the", "a", "and", "to", "is", "file", "error", "test", "function", "return",
    # rare words and identifiers
    "snapshot", "reconcile", "idempotent", "cordis_define", "BRAID", "mantissa", "HTTPRedirectHandler", "ToolOutcomeUnknownError",
    "EXIT_NONZERO", "workspace",
    # phrases
    "do not", "tool call", "the tool", "read only", "retry only if", "in the", "of the", "stack size", "exit code", "no such file",
    # CJK and other scripts, symbols
    "日本", "設計", "会话", "한국어", "café", "—", "→", "€",
    # no hits
    "zzzqqqxx", "nonexistentterm", "qwertyuiopasdf", "xyzzy plugh",
    # operators as data and odd input
    "OR", "NEAR(a b)", '"quoted"', "col:term", "hello*", "-x", "(", "^hello",
]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _timed(call: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return (time.perf_counter() - start) * 1000, result


def run(db: str, repeat: int) -> dict[str, Any]:
    assert len(QUERIES) == 50
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    events = conn.execute('SELECT count(*) FROM "events"').fetchone()[0]
    big = conn.execute('SELECT "id" FROM "sessions" ORDER BY "event_count" DESC LIMIT 1').fetchone()[0]
    conn.close()
    search = SessionSearch(db)
    samples: dict[str, list[float]] = {"sessions_first": [], "sessions_deep": [], "events_first": [], "events_deep": []}
    for _ in range(repeat):
        for query in QUERIES:
            # First pages are measured without the ranking cache; deep pages
            # (two cursors on) show what the cache gives a paging client.
            search._ranked_rows.clear()
            ms, page = _timed(lambda: search.search_sessions({"query": query}))
            samples["sessions_first"].append(ms)
            for _ in range(2):
                if page.next_cursor is not None and isinstance(page.next_cursor, str):
                    ms, page = _timed(lambda: search.search_sessions({"query": query, "cursor": page.next_cursor}))
            samples["sessions_deep"].append(ms)
            search._ranked_rows.clear()
            ms, page = _timed(lambda: search.search_events({"sessionId": big, "query": query}))
            samples["events_first"].append(ms)
            for _ in range(2):
                if isinstance(page.next_cursor, str):
                    ms, page = _timed(lambda: search.search_events({"sessionId": big, "query": query, "cursor": page.next_cursor}))
            samples["events_deep"].append(ms)
    out: dict[str, Any] = {"benchmark": "search-latency", "events": events, "queries": len(QUERIES), "repeat": repeat}
    for name, values in samples.items():
        out[f"{name}_p50_ms"] = round(statistics.median(values), 1)
        out[f"{name}_p95_ms"] = round(_percentile(values, 0.95), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Search latency")
    parser.add_argument("db")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.db, args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
