"""The PostgreSQL read side answers exactly as SQLite: every search mode, page and cursor; snapshots.

The golden conformance and contract suites already run on PostgreSQL
(tests/backends.py); the search modes beyond the reference's phrase are a
sessionq extension without golden answers, so here each answer from
PostgreSQL is compared with the SQLite index it was copied from, page by
page, over queries drawn from the corpus and the hard cases (prefixes, one
and two letters, CJK, punctuation, boilerplate, nothing).
"""

from __future__ import annotations

import itertools
import random
import re
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest

from readmodel.core.errors import SessionQueryError
from readmodel.query import SessionQuery
from readmodel.store.pgreader import PostgresIndexStore
from tests.backends import POSTGRES
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT, require_corpus

require_corpus()

EDGE_QUERIES = ["the", "do not", "pol", "sandbox pol", '"current working" dir', "é", "the ", "fi", "co", "x", ".py", "路径", "def ", "-", "zzzqqq"]
MODES = ("phrase", "words", "substring")
SESSION_FILTERS: list[Any] = [
    None,
    [{"kind": "created-at", "from": 1790000000000}],
    [{"kind": "cwd", "values": [None, "/home/dev/docs-site"]}, {"kind": "availability", "values": ["persisted"]}],
]
EVENT_FILTERS: list[Any] = [None, [{"kind": "type", "values": ["tool/result", "user/message"]}], [{"kind": "surface", "values": ["current"]}]]


@pytest.fixture(scope="module", params=[False, True], ids=["real", "synthetic"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = SYNTHETIC_ROOT if request.param else ZSTD_ROOT
    url = POSTGRES.build(root, POSTGRES.database(tmp_path_factory.mktemp("read-side"), "index"))
    sqlite_db = POSTGRES.sqlite_twin(url)  # the real indexer's SQLite index it was copied from
    pairs = (SessionQuery.open(sqlite_db), SessionQuery.open(url))
    yield sqlite_db, url, pairs
    for query in pairs:
        query.close()


def _walk(call: Any, request: dict[str, Any]) -> list[Any]:
    """Every page of a search, following its cursors (or the error it raised)."""
    pages: list[Any] = []
    cursor = None
    while True:
        try:
            page = call({**request, **({"cursor": cursor} if cursor else {})})
        except SessionQueryError as exc:
            return [*pages, (exc.code, exc.message)]
        cursor = page.next_cursor
        shown = msgspec.to_builtins(page)
        shown.pop("nextCursor", None)  # signed per index generation: compared by where it leads
        pages.append(shown)
        if not cursor:
            return pages


def _corpus_queries(db: str, count: int) -> list[str]:
    """Words and word pairs drawn from the documents (seeded)."""
    with sqlite3.connect(db) as conn:
        texts = [row[0] for row in conn.execute('SELECT "text" FROM "documents" ORDER BY "docid"')]
    rng = random.Random(18)
    queries = []
    for text in rng.sample(texts, min(count, len(texts))):
        words = re.findall(r"[A-Za-z]{2,}", text)
        if words:
            start = rng.randrange(len(words))
            queries.append(" ".join(words[start : start + rng.choice((1, 2))]))
    return queries


def test_every_mode_page_and_cursor_of_cross_session_search_equals_sqlite(pair: Any) -> None:
    sqlite_db, _, (sqlite_query, pg_query) = pair
    compared = 0
    for text, mode, filters in itertools.product(EDGE_QUERIES[:12] + _corpus_queries(sqlite_db, 4), MODES, SESSION_FILTERS):
        request: dict[str, Any] = {"query": text, "limit": 4, "match": mode, **({"sessionFilters": filters} if filters else {})}
        expected = _walk(sqlite_query.search_sessions, request)
        assert _walk(pg_query.search_sessions, request) == expected, request
        compared += len(expected)
    assert compared > 200


def test_every_mode_page_and_cursor_of_within_session_search_equals_sqlite(pair: Any) -> None:
    sqlite_db, _, (sqlite_query, pg_query) = pair
    sessions = [record.header["id"] for record in sqlite_query.list_sessions()][:3]
    for session_id, text, mode, filters in itertools.product(sessions, EDGE_QUERIES[:8] + _corpus_queries(sqlite_db, 3), MODES, EVENT_FILTERS):
        request: dict[str, Any] = {"sessionId": session_id, "query": text, "limit": 3, "match": mode, **({"filters": filters} if filters else {})}
        assert _walk(pg_query.search_events, request) == _walk(sqlite_query.search_events, request), request


def test_a_cursor_goes_stale_when_any_source_commits(pair: Any) -> None:
    _, url, (_, pg_query) = pair
    first = pg_query.search_sessions({"query": "the", "limit": 1})
    assert first.next_cursor
    with psycopg.connect(url) as conn:
        (source,) = conn.execute('SELECT "source" FROM "sources" ORDER BY "source" LIMIT 1').fetchone()
        conn.execute('UPDATE "sources" SET "generation" = "generation" + 1 WHERE "source" = %s', (source,))
    try:
        with pytest.raises(SessionQueryError) as caught:
            pg_query.search_sessions({"query": "the", "limit": 1, "cursor": first.next_cursor})
        assert caught.value.code == "SESSION_QUERY_STALE_CURSOR"
    finally:
        with psycopg.connect(url) as conn:
            conn.execute('UPDATE "sources" SET "generation" = "generation" - 1 WHERE "source" = %s', (source,))


def test_one_answer_reads_one_snapshot_while_a_source_commits(pair: Any) -> None:
    _, url, _ = pair
    store = PostgresIndexStore.open(url)
    try:
        with store.read() as reader:
            before = reader.generation()
            headers = reader.list_headers()
            with psycopg.connect(url) as conn:  # another source's writer commits meanwhile
                conn.execute('INSERT INTO "sources" ("source", "first_seen_at", "generation") VALUES (%s, 0, 1)', ("other-host",))
            assert reader.generation() == before and reader.list_headers() == headers
        with store.read() as reader:
            assert reader.generation() != before and "other-host:1" in reader.generation()[1]
    finally:
        with psycopg.connect(url) as conn:
            conn.execute('DELETE FROM "sources" WHERE "source" = %s', ("other-host",))
        store.close()


def test_a_pg_index_at_another_revision_is_refused_in_one_line(postgres_url: str, tmp_path: Path) -> None:
    from readmodel.store.postgres import upgrade

    upgrade(postgres_url)
    with psycopg.connect(postgres_url) as conn:
        conn.execute('UPDATE "alembic_version" SET "version_num" = %s', ("0013",))
    with pytest.raises(SessionQueryError) as caught:
        SessionQuery.open(postgres_url)
    assert caught.value.code == "SESSION_QUERY_INDEX_FAILED" and "sessionq db upgrade" in caught.value.message


def test_an_abort_cancels_the_running_statement_on_the_server(postgres_url: str) -> None:
    import threading
    import time

    from readmodel.core.cancel import AbortController
    from readmodel.search.postgres import _cancelling

    controller = AbortController()
    threading.Timer(0.05, controller.abort).start()
    started = time.monotonic()
    with psycopg.connect(postgres_url) as conn, pytest.raises(SessionQueryError) as caught:
        with _cancelling(conn, controller.signal):
            conn.execute("SELECT pg_sleep(30)")
    assert caught.value.code == "SESSION_QUERY_ABORTED" and time.monotonic() - started < 10
