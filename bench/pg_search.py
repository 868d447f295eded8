"""Search latency on PostgreSQL against SQLite, same index, same minutes (issue 18, the read side).

The SQLite index ``DB`` (built by the real indexer) is copied into a
database of a throwaway PostgreSQL cluster (tests/pgcopy.py: every relational
table, terms and postings from the Tokenizer, gram keys), then
:mod:`bench.search_modes`' query set runs in every mode and scope on both
backends, the two backends alternating query by query so that both see the
same load.  The ranking caches are emptied before each call: every figure
includes ranking, snippets and one transaction.  Also reported: the answers
agree (first page, every query), the copy's time, and the PostgreSQL
relation sizes.

Usage::

    python -m bench.pg_search DB [--repeat 2] [--url postgresql://…] [--per-document]

Without ``--url`` a throwaway cluster is started (and stopped afterwards).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import msgspec
import psycopg

from bench.common import emit, record, timed_ms
from bench.search import _counts, _largest_session, _largest_workspace
from bench.search_modes import MODES, QUERIES, _stats
from readmodel.core.errors import SessionQueryError
from readmodel.search.postgres import postgres_search
from readmodel.search.sqlite import sqlite_search
from readmodel.store.pgreader import PostgresIndexStore


def run(db: str, url: str | None, repeat: int, per_document: bool = False) -> dict[str, Any]:
    from tests.pgcopy import copy_index
    from tests.postgres import start_cluster

    server = None
    if url is None:
        server = start_cluster()
        url = server.database()
    try:
        started = time.perf_counter()
        copy_index(db, url)
        copy_seconds = time.perf_counter() - started
        _vacuum(url)
        return _measure(db, url, repeat, copy_seconds, per_document)
    finally:
        if server is not None:
            server.stop()


def _vacuum(url: str) -> None:
    """Set the copied tables' visibility maps, as autovacuum does for an index the indexer has
    written over time: right after a bulk copy nothing is marked all-visible, so every index-only
    scan (the search's posting and gram walks) also reads the heap, which a live index does not."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")


def _measure(db: str, url: str, repeat: int, copy_seconds: float, per_document: bool = False) -> dict[str, Any]:
    sessions, events = _counts(db)
    workspace, workspace_sessions = _largest_workspace(db)
    big, big_events = _largest_session(db)
    store = PostgresIndexStore.open(url)
    backends = {"sqlite": sqlite_search(db), "postgresql": postgres_search(store)}
    if per_document:  # the ranking before texts first (migration 0020), as a third backend
        backends["pg_per_document"] = postgres_search(store)
        backends["pg_per_document"].backend.texts_first = False
    for search in backends.values():
        search.open()
    scoped = [{"kind": "cwd", "values": [workspace]}]
    samples: dict[tuple[str, str, str], list[float]] = {}
    disagreements: list[str] = []
    load_before = os.getloadavg()
    for _ in range(repeat):
        for _kind, query in QUERIES:
            for mode in MODES:
                for scope in ("sessions", "sessions_workspace", "events"):
                    pages = {}
                    for name, search in backends.items():
                        _clear(search)
                        request: dict[str, Any] = {"query": query, "match": mode}
                        if scope == "sessions_workspace":
                            request["sessionFilters"] = scoped
                        call = search.search_events if scope == "events" else search.search_sessions
                        if scope == "events":
                            request["sessionId"] = big
                        try:
                            ms, page = timed_ms(lambda: call(request))
                        except SessionQueryError as error:
                            pages[name] = error.code
                            continue
                        samples.setdefault((name, mode, scope), []).append(ms)
                        shown = msgspec.to_builtins(page)
                        shown.pop("nextCursor", None)
                        pages[name] = shown
                    for name in pages:
                        tag = f"{mode}/{scope}/{query}" + ("" if name == "postgresql" else f" ({name})")
                        if name != "sqlite" and pages[name] != pages["sqlite"] and tag not in disagreements:
                            disagreements.append(tag)
    for search in backends.values():
        search.close()
    store.close()
    out = record(
        "pg-search-latency",
        index=db,
        sessions=sessions,
        events=events,
        workspace_sessions=workspace_sessions,
        session_events=big_events,
        queries=len(QUERIES),
        repeat=repeat,
        copy_seconds=round(copy_seconds, 1),
        load_before=[round(x, 2) for x in load_before],
        load_after=[round(x, 2) for x in os.getloadavg()],
        disagreements=disagreements,
        postgres_sizes=_sizes(url),
    )
    for (name, mode, scope), values in sorted(samples.items()):
        stats = _stats(values)
        out[f"{name}_{mode}_{scope}"] = {key: stats.get(key) for key in ("n", "p50_ms", "p95_ms", "max_ms")}
    for mode in MODES:
        for scope in ("sessions", "sessions_workspace", "events"):
            pg, lite = out.get(f"postgresql_{mode}_{scope}"), out.get(f"sqlite_{mode}_{scope}")
            if pg and lite and lite.get("p95_ms"):
                out[f"p95_ratio_{mode}_{scope}"] = round(pg["p95_ms"] / lite["p95_ms"], 2)
    return out


def _clear(search: Any) -> None:
    backend = search.backend
    cache = backend._ranked_rows if hasattr(backend, "_ranked_rows") else backend._ranked
    cache.clear()


def _sizes(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace ORDER BY 2 DESC"
        ).fetchall()
    return {name: size for name, size in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Search latency on PostgreSQL against SQLite over the same index")
    parser.add_argument("db", help="a SQLite index built by the real indexer")
    parser.add_argument("--url", help="an empty PostgreSQL database to copy into (default: a throwaway cluster)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--per-document", action="store_true", help="also time the per-document ranking (before texts first)")
    args = parser.parse_args(argv)
    emit(run(args.db, args.url, args.repeat, args.per_document))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
