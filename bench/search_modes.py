"""Search latency per mode (phrase, words, substring) and scope: first page, ranking computed.

Scopes: ``sessions`` (every session), ``sessions_workspace`` (a ``cwd`` filter
naming the workspace with most sessions, as the model tools search) and
``events`` (within the index's largest session).  The queries
(:data:`QUERY_KINDS`) are the issue's: 1–2 character CJK, identifier fragments,
punctuation, two-letter prefixes (words mode's search as you type), common
words, and its hand-checked examples.  Every query runs in every mode; a query
a mode refuses (a lone ASCII letter in substring mode) counts as an error, not
a sample.  The ranking cache is emptied before each call, so every figure
includes ranking.  The load average is recorded beside the figures.

Usage::

    python -m bench.search_modes DB [--repeat 2] [--python-ranking]

``--python-ranking`` ranks words and substring matches in Python (the slow
path, :class:`readmodel.search.modes.Ranking`) instead of SQLite
(:mod:`readmodel.search.sqlranking`): the before/after of the same index.
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

from bench.common import emit, percentile, record, timed_ms
from bench.search import _counts, _largest_session, _largest_workspace
from readmodel.core.errors import SessionQueryError
from readmodel.search.sqlite import sqlite_search

MODES = ("phrase", "words", "substring")
QUERY_KINDS: dict[str, list[str]] = {
    "cjk-short": ["库", "会话", "日志", "検索", "数据"],
    "identifier": ["OutcomeUnknown", "Down", "tearDown", "Error", "cordis"],
    "punctuation": ["->", "::", "C++", "--", "()"],
    "prefix-2": ["sa", "re", "co", "te", "fi"],
    "common": ["the", "file", "error", "test", "read"],
    "examples": ["fix the failing test", "backend sandbox", "sandb", "数据库", "日本語", "搜索结果"],
}
QUERIES = [(kind, query) for kind, queries in QUERY_KINDS.items() for query in queries]


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50_ms": round(statistics.median(values), 2), "p95_ms": round(percentile(values, 0.95), 2), "max_ms": round(max(values), 2)}


def run(db: str, repeat: int = 2, python_ranking: bool = False) -> dict[str, Any]:
    sessions, events = _counts(db)
    search = sqlite_search(db)
    search.open()
    search.backend._sql_ranking = not python_ranking
    workspace, workspace_sessions = _largest_workspace(db)
    big, big_events = _largest_session(db)
    scoped = [{"kind": "cwd", "values": [workspace]}]
    scopes = {
        "sessions": lambda request: search.search_sessions(request),
        "sessions_workspace": lambda request: search.search_sessions({**request, "sessionFilters": scoped}),
        "events": lambda request: search.search_events({"sessionId": big, **request}),
    }
    samples: dict[tuple[str, str], list[tuple[str, str, float]]] = {(m, s): [] for m in MODES for s in scopes}
    hits: dict[tuple[str, str], dict[str, int]] = {(m, s): {} for m in MODES for s in scopes}
    errors: dict[str, list[str]] = {m: [] for m in MODES}
    load_before = os.getloadavg()
    try:
        for _ in range(repeat):
            for kind, query in QUERIES:
                for mode in MODES:
                    for scope, call in scopes.items():
                        search.backend._ranked_rows.clear()
                        try:
                            ms, page = timed_ms(lambda: call({"query": query, "match": mode}))
                        except SessionQueryError as error:
                            if query not in errors[mode]:
                                errors[mode].append(f"{query}: {error.code}")
                            continue
                        samples[(mode, scope)].append((kind, query, ms))
                        hits[(mode, scope)][query] = len(page.items)
    finally:
        search.close()
    out = record(
        "search-modes-latency",
        index=db,
        sessions=sessions,
        events=events,
        workspace_sessions=workspace_sessions,
        session_events=big_events,
        queries=len(QUERIES),
        repeat=repeat,
        ranking="python" if python_ranking else "sql",
        page_size=20,
        load_before=[round(x, 2) for x in load_before],
        load_after=[round(x, 2) for x in os.getloadavg()],
    )
    for (mode, scope), values in samples.items():
        name = f"{mode}_{scope}"
        stats = _stats([ms for _k, _q, ms in values])
        out[f"{name}_p50_ms"] = stats.get("p50_ms")
        out[f"{name}_p95_ms"] = stats.get("p95_ms")
        out[f"{name}_by_kind"] = {
            kind: {**_stats([ms for k, _q, ms in values if k == kind]), "queries_with_hits": sum(1 for q in queries if hits[(mode, scope)].get(q))}
            for kind, queries in QUERY_KINDS.items()
        }
        out[f"{name}_slowest"] = [[q, round(ms, 1)] for _k, q, ms in sorted(values, key=lambda v: -v[2])[:3]]
    out["refused"] = errors
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Search latency per mode and scope over the issue's query set")
    parser.add_argument("db")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--python-ranking", action="store_true", help="rank words and substring matches in Python (the slow path)")
    args = parser.parse_args(argv)
    emit(run(args.db, args.repeat, args.python_ranking))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
