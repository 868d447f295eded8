"""The substring gram index per query: candidates, matches, lookup and verification time.

For each query of :data:`bench.search_modes.QUERY_KINDS` (those the substring
mode takes) and a few paths and emoji, over every stored document: how many
candidates the gram index gives (:func:`readmodel.search.gramsearch.candidates`),
how many of them match (the ``filterEvents`` text pattern), the time of the
candidate ``SELECT`` alone and of reading and verifying the candidates' texts,
against the slow path's reading and verifying every document (measured once
per query too).  Times are the best of ``--repeat``; counts are exact.  The
load average is recorded beside them.

Usage::

    python -m bench.substring_candidates DB [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
from typing import Any

from bench.common import emit, record, timed_ms
from bench.search_modes import QUERY_KINDS
from readmodel.projection.filters import compile_text_filter
from readmodel.search import gramsearch
from readmodel.search.requests import normalize_query
from readmodel.store import doctext

EXTRA: dict[str, list[str]] = {"path": ["/home/dev", "readmodel/search", "src/"], "emoji": ["🎉", "✅"]}


def _verify(conn: sqlite3.Connection, sql: str, args: list[Any], pattern: Any) -> int:
    search = pattern.search
    return sum(1 for (text,) in conn.execute(sql, args) if search(text) is not None)


def run(db: str, repeat: int = 3) -> dict[str, Any]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    doctext.install(conn)  # the documents view decodes its text with it (schema 0016)
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    try:
        for kind, queries in {**QUERY_KINDS, **EXTRA}.items():
            for raw in queries:
                query = normalize_query(raw)
                if len(query) == 1 and query.isascii() and query.isalnum():
                    continue  # the substring mode refuses it
                pattern = compile_text_filter(query)
                answer = gramsearch.candidates(conn, query, None)
                entry: dict[str, Any] = {"kind": kind, "query": raw, "grams": 0 if answer is None else len(answer[1][0].split())}
                if answer is None:
                    entry["candidates"] = None
                else:
                    sql, args = answer
                    lookups = [timed_ms(lambda: conn.execute(sql, args).fetchall()) for _ in range(repeat)]
                    entry["candidates"] = len(lookups[0][1])
                    entry["lookup_ms"] = round(min(ms for ms, _ in lookups), 2)
                    verify_sql = f'SELECT "text" FROM "documents" WHERE "docid" IN ({sql})'
                    fast = [timed_ms(lambda: _verify(conn, verify_sql, args, pattern)) for _ in range(repeat)]
                    entry["matches"] = fast[0][1]
                    entry["fast_ms"] = round(min(ms for ms, _ in fast), 2)
                slow = [timed_ms(lambda: _verify(conn, 'SELECT "text" FROM "documents"', [], pattern)) for _ in range(repeat)]
                entry["slow_matches"] = slow[0][1]
                entry["slow_ms"] = round(min(ms for ms, _ in slow), 2)
                rows.append(entry)
        documents = conn.execute('SELECT count(*) FROM "documents"').fetchone()[0]
    finally:
        conn.close()
    return record(
        "substring-candidates",
        index=db,
        documents=documents,
        repeat=repeat,
        load_before=[round(x, 2) for x in load_before],
        load_after=[round(x, 2) for x in os.getloadavg()],
        queries=rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Candidates and verification of the substring gram index per query")
    parser.add_argument("db")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    emit(run(args.db, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
