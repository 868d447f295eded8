"""Search latency over a large index: median and p95 over a fixed set of 50 queries.

The queries are of six kinds (common words, rare words and identifiers,
phrases, CJK and Korean, no-hit, FTS5 operators sent as data), each run in both
scopes:

* ``sessions``: cross-session search (``search_sessions``), over the whole index;
* ``sessions_workspace``: the same with a ``cwd`` session filter naming the
  workspace that holds most sessions, as every model tool search has;
* ``events``: within-session search (``search_events``) in the index's largest
  session, and, with ``--events-db``, ``events_long`` in the largest session of
  a second index (the single long log of ``bench.build --single-sizes``).

For each scope two figures: the **first page** (the ranking cache emptied
before each query, so the ranking is computed) and a **deep page**, page
``--depth`` (third by default), reached by following ``nextCursor`` as a paging
client does (later pages are cut from the per-request ranking cache).  A deep
page is only sampled for queries that have that many pages; ``*_deep_n`` says
how many did.  Default page size (20).

Usage::

    python -m bench.search DB [--events-db DB2] [--repeat 3] [--depth 3]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
from typing import Any

from bench.common import emit, percentile, record, timed_ms
from readmodel.search.engine import SessionSearch
from readmodel.search.sqlite import sqlite_search

QUERY_KINDS: dict[str, list[str]] = {
    "common": ["the", "a", "and", "to", "is", "file", "error", "test", "return", "read"],
    "rare": [
        "snapshot", "idempotent", "cordis_define", "ToolOutcomeUnknownError", "café",
        "workspace", "sandbox", "overflow", "reconcile", "HTTPRedirectHandler",
    ],
    "phrase": [
        "do not", "tool call", "the tool", "read only", "retry only if",
        "in the", "of the", "exit code", "current working directory", "the file",
    ],
    "cjk": [
        "数据库索引需要重建", "한국어", "색인에 포함됩니다", "部署到生产环境之前运行测试",
        "日本語のテキストも検索できるか確認する", "请检查配置文件中的路径", "会话", "한국어 문장도",
    ],
    "no-hit": ["zzzqqqxx", "nonexistentterm", "qwertyuiopasdf", "xyzzy plugh", "the zzzqqqxx", "日本語のテキスト"],
    "operators": ["OR", "NEAR(a b)", '"quoted"', "hello*", "-x", "("],
}
QUERIES = [query for queries in QUERY_KINDS.values() for query in queries]
KIND_OF = {query: kind for kind, queries in QUERY_KINDS.items() for query in queries}


def _one_row(db: str, sql: str) -> tuple[Any, ...]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchone()
    finally:
        conn.close()


def _largest_session(db: str) -> tuple[str, int]:
    return _one_row(db, 'SELECT "id", "event_count" FROM "sessions" ORDER BY "event_count" DESC LIMIT 1')


def _largest_workspace(db: str) -> tuple[str | None, int]:
    """The cwd holding most sessions (the model tools scope every search to one)."""
    return _one_row(db, 'SELECT "cwd", count(*) FROM "sessions" GROUP BY "cwd" ORDER BY 2 DESC LIMIT 1')


def _counts(db: str) -> tuple[int, int]:
    # Events from sessions.event_count, not count(*) of "events": runs of log-only events are one row each.
    return _one_row(db, 'SELECT count(*), coalesce(sum("event_count"), 0) FROM "sessions"')


def _scope(search: SessionSearch, call: Any, query: str, depth: int) -> tuple[float, float | None, int]:
    """``(first page ms, deep page ms or None, hits on the first page)``."""
    search.backend._ranked_rows.clear()
    first_ms, page = timed_ms(lambda: call({"query": query}))
    hits = len(page.items)
    deep_ms = None
    for _ in range(depth - 1):
        cursor = page.next_cursor
        if not isinstance(cursor, str):
            deep_ms = None
            break
        deep_ms, page = timed_ms(lambda cursor=cursor: call({"query": query, "cursor": cursor}))
    return first_ms, deep_ms, hits


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50_ms": round(statistics.median(values), 2), "p95_ms": round(percentile(values, 0.95), 2), "max_ms": round(max(values), 2)}


def run(db: str, repeat: int = 3, depth: int = 3, events_db: str | None = None) -> dict[str, Any]:
    assert len(QUERIES) == 50, len(QUERIES)
    sessions, events = _counts(db)
    scopes: list[tuple[str, SessionSearch, Any, dict[str, Any]]] = []
    search = sqlite_search(db)
    scopes.append(("sessions", search, search.search_sessions, {"sessions": sessions, "events": events}))
    workspace, workspace_sessions = _largest_workspace(db)
    scoped = [{"kind": "cwd", "values": [workspace]}]
    scopes.append(("sessions_workspace", search, lambda r: search.search_sessions({**r, "sessionFilters": scoped}), {"sessions": workspace_sessions}))
    big, big_events = _largest_session(db)
    scopes.append(("events", search, lambda r: search.search_events({"sessionId": big, **r}), {"session_events": big_events}))
    long_search = None
    if events_db:
        long_search = sqlite_search(events_db)
        long_id, long_events = _largest_session(events_db)
        scopes.append(("events_long", long_search, lambda r: long_search.search_events({"sessionId": long_id, **r}), {"session_events": long_events}))
    samples: dict[str, dict[str, list[tuple[str, float]]]] = {name: {"first": [], "deep": []} for name, *_ in scopes}
    hits: dict[str, dict[str, int]] = {name: {} for name, *_ in scopes}
    try:
        for _ in range(repeat):
            for query in QUERIES:
                for name, engine, call, _info in scopes:
                    first_ms, deep_ms, found = _scope(engine, call, query, depth)
                    samples[name]["first"].append((query, first_ms))
                    if deep_ms is not None:
                        samples[name]["deep"].append((query, deep_ms))
                    hits[name][query] = found
    finally:
        search.close()
        if long_search is not None:
            long_search.close()
    out = record("search-latency", index=db, sessions=sessions, events=events, queries=len(QUERIES), repeat=repeat, depth=depth, page_size=20)
    for name, _engine, _call, info in scopes:
        for key, value in info.items():
            if name != "sessions":
                out[f"{name}_{key}"] = value
        for page in ("first", "deep"):
            values = [ms for _q, ms in samples[name][page]]
            stats = _stats(values)
            out[f"{name}_{page}_n"] = stats["n"] // repeat if repeat else 0
            if stats["n"]:
                out[f"{name}_{page}_p50_ms"] = stats["p50_ms"]
                out[f"{name}_{page}_p95_ms"] = stats["p95_ms"]
                out[f"{name}_{page}_max_ms"] = stats["max_ms"]
        by_kind: dict[str, Any] = {}
        for kind, queries in QUERY_KINDS.items():
            first = [ms for q, ms in samples[name]["first"] if KIND_OF[q] == kind]
            entry = {"first": _stats(first), "queries_with_hits": sum(1 for q in queries if hits[name].get(q))}
            deep = [ms for q, ms in samples[name]["deep"] if KIND_OF[q] == kind]
            if deep:
                entry["deep"] = _stats(deep)
            by_kind[kind] = entry
        out[f"{name}_by_kind"] = by_kind
        slowest = sorted(samples[name]["first"], key=lambda s: -s[1])[:3]
        out[f"{name}_slowest_first"] = [[q, round(ms, 1)] for q, ms in slowest]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Search latency over 50 fixed queries, both scopes")
    parser.add_argument("db")
    parser.add_argument("--events-db", help="a second index whose largest session (a long log) is searched within")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--depth", type=int, default=3, help="the deep page measured (following nextCursor)")
    args = parser.parse_args(argv)
    emit(run(args.db, args.repeat, max(2, args.depth), args.events_db))
    return 0


if __name__ == "__main__":
    sys.exit(main())
