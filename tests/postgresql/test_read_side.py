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
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from readmodel.core.errors import SessionQueryError
from readmodel.query import SessionQuery
from readmodel.store.pgreader import PostgresIndexStore
from tests.backends import POSTGRES
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT, require_corpus
from tests import indexdb

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
    with indexdb.connect(db) as conn:
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


def test_migrations_0014_and_0020_build_the_search_rows_of_an_existing_index(pair: Any, postgres_url: str) -> None:
    from readmodel.store.postgres import upgrade
    from tests.pgcopy import copy_index

    sqlite_db, built, (sqlite_query, _) = pair
    copy_index(sqlite_db, postgres_url, revision="0013")  # documents, but no search tables yet
    upgrade(postgres_url)  # 0014 computes terms, postings and gram keys from the stored documents, 0020 the per-text rows
    tables = ("terms", "postings", "document_gram_keys", "search_texts", "text_postings", "text_grams", "text_documents")
    order = {
        "terms": '"term"',
        "postings": '"term", "docid"',
        "document_gram_keys": '"docid"',
        "search_texts": '"hash"',
        "text_postings": '"term", "hash"',
        "text_grams": '"gram", "hash"',
        "text_documents": '"docid"',
    }

    def rows(url: str, table: str) -> list[Any]:
        with psycopg.connect(url) as conn:
            found = conn.execute(f'SELECT * FROM "{table}" ORDER BY {order[table]}').fetchall()
        return [tuple(sorted(value) if table == "document_gram_keys" and isinstance(value, list) else value for value in row) for row in found]

    for table in tables:
        assert rows(postgres_url, table) == rows(built, table), table
    with SessionQuery.open(postgres_url) as upgraded:
        request = {"query": "the", "limit": 5, "match": "words"}
        assert _walk(upgraded.search_sessions, request) == _walk(sqlite_query.search_sessions, request)


# -- the texts-first ranking (readmodel.search.pgtexts) against the per-document path and SQLite ---


@pytest.fixture(scope="module")
def three(pair: Any) -> Any:
    """SQLite, PostgreSQL texts first, PostgreSQL per document: three searches over one index."""
    from readmodel.search.postgres import postgres_search
    from readmodel.search.sqlite import sqlite_search

    sqlite_db, url, (sqlite_query, _) = pair
    store = PostgresIndexStore.open(url)
    fast, slow = postgres_search(store), postgres_search(store)
    slow.backend.texts_first = False
    with indexdb.connect(sqlite_db) as conn:
        texts = [row[0] for row in conn.execute('SELECT "text" FROM "documents" ORDER BY "docid"') if row[0].strip()]
    sessions = [record.header["id"] for record in sqlite_query.list_sessions()]
    lite = sqlite_search(sqlite_db)
    yield lite, fast, slow, texts, sessions
    lite.close()
    store.close()


@st.composite
def _searches(draw: Any, texts: list[str], sessions: list[str]) -> tuple[str, dict[str, Any]]:
    text = draw(st.sampled_from(texts))
    start = draw(st.integers(0, max(0, len(text) - 1)))
    query = text[start : start + draw(st.integers(1, 14))]
    if draw(st.booleans()):
        query = query.upper() if draw(st.booleans()) else query.strip() + draw(st.sampled_from(["", " ", '"', " the"]))
    request: dict[str, Any] = {"query": query, "match": draw(st.sampled_from(MODES)), "limit": draw(st.sampled_from([1, 3, 25]))}
    scope = draw(st.sampled_from(["sessions", "filtered", "events"]))
    if scope == "filtered":
        request["sessionFilters"] = draw(st.sampled_from(SESSION_FILTERS[1:]))
    if scope == "events":
        request["sessionId"] = draw(st.sampled_from(sessions))
        if draw(st.booleans()):
            request["filters"] = draw(st.sampled_from(EVENT_FILTERS[1:]))
    return ("search_events" if scope == "events" else "search_sessions"), request


def _pages(search: Any, method: str, request: dict[str, Any]) -> list[Any]:
    search.backend._ranked_rows.clear() if hasattr(search.backend, "_ranked_rows") else search.backend._ranked.clear()
    return _walk(getattr(search, method), request)[:4]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_texts_first_ranking_equals_the_per_document_path_and_sqlite(three: Any, data: Any) -> None:
    lite, fast, slow, texts, sessions = three
    method, request = data.draw(_searches(texts, sessions))
    expected = _pages(lite, method, request)
    assert _pages(fast, method, request) == expected, request
    assert _pages(slow, method, request) == expected, request
