"""Search's contract, for every backend: the matching set is exactly FTS5's own.

The oracle is a scratch in-memory FTS5 table holding every readable session's
documents (read through the backend's read interface) and queried with the
same literal phrase: whatever a backend prunes, caches or accelerates, the
sessions and events it returns over all pages must be exactly the documents
that phrase matches, each session once, each page within its limit.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from readmodel.query import SessionQuery
from tests.backends import Backend
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT, require_corpus
from tests import indexdb

require_corpus()

_WORD = re.compile(r"[A-Za-z]{3,}|[\u4e00-\u9fff]+")


@pytest.fixture(scope="module", params=[False, True], ids=["real", "synthetic"])
def corpus(backend: Backend, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SessionQuery, sqlite3.Connection, list[str]]]:
    root = SYNTHETIC_ROOT if request.param else ZSTD_ROOT
    db = backend.build(root, backend.database(tmp_path_factory.mktemp("search-contract"), "index"))
    source = backend.open_source(db)
    oracle = indexdb.connect(":memory:")
    oracle.execute("CREATE VIRTUAL TABLE docs USING fts5(text, session_id UNINDEXED, seq UNINDEXED, tokenize='unicode61')")
    texts: list[str] = []
    with source.read() as reader:
        for header in reader.list_headers():
            row = reader.lookup(header["id"])
            assert row is not None
            if row.status != "ok":
                continue
            for seq, _, _, _, text in reader.documents(row.sid):
                oracle.execute("INSERT INTO docs VALUES (?, ?, ?)", (text, header["id"], seq))
                texts.append(text)
    source.close()
    query = SessionQuery.open(db)
    yield query, oracle, texts
    query.close()
    oracle.close()


def _queries(texts: list[str], count: int, seed: int) -> list[str]:
    """Single words and two-word phrases drawn from the documents themselves."""
    rng = random.Random(seed)
    queries = []
    for text in rng.sample(texts, min(count, len(texts))):
        words = _WORD.findall(text)
        if not words:
            continue
        at = rng.randrange(len(words))
        queries.append(" ".join(words[at : at + rng.choice((1, 2))]))
    return [*queries, "no-such-word-anywhere"]


def _phrase(query: str) -> str:
    return '"' + query.replace('"', '""') + '"'


def _all_pages(fetch: Any, limit: int) -> list[Any]:
    items: list[Any] = []
    cursor = None
    while True:
        page = fetch(cursor)
        assert len(page.items) <= limit
        items.extend(page.items)
        if not page.next_cursor:
            return items
        cursor = page.next_cursor


def test_cross_session_search_returns_exactly_the_matching_sessions(corpus: tuple[SessionQuery, sqlite3.Connection, list[str]]) -> None:
    query, oracle, texts = corpus
    for text in _queries(texts, 40, seed=1):
        expected = {row[0] for row in oracle.execute("SELECT DISTINCT session_id FROM docs WHERE docs MATCH ?", (_phrase(text),))}
        request: dict[str, Any] = {"query": text, "limit": 7}
        hits = _all_pages(lambda cursor: query.search_sessions({**request, **({"cursor": cursor} if cursor else {})}), 7)
        found = [hit.header["id"] for hit in hits]
        assert len(found) == len(set(found)), text
        assert set(found) == expected, text
        for hit in hits:
            best = hit.best_match
            matched = oracle.execute(
                "SELECT 1 FROM docs WHERE docs MATCH ? AND session_id = ? AND seq = ?", (_phrase(text), best.session_id, best.seq)
            ).fetchone()
            assert matched is not None, (text, best.session_id, best.seq)


def test_within_session_search_returns_exactly_the_matching_events(corpus: tuple[SessionQuery, sqlite3.Connection, list[str]]) -> None:
    query, oracle, texts = corpus
    for text in _queries(texts, 25, seed=2):
        sessions = [row[0] for row in oracle.execute("SELECT DISTINCT session_id FROM docs WHERE docs MATCH ? LIMIT 3", (_phrase(text),))]
        for session_id in sessions:
            expected = {row[0] for row in oracle.execute("SELECT seq FROM docs WHERE docs MATCH ? AND session_id = ?", (_phrase(text), session_id))}
            request: dict[str, Any] = {"sessionId": session_id, "query": text, "limit": 5}
            hits = _all_pages(lambda cursor: query.search_events({**request, **({"cursor": cursor} if cursor else {})}), 5)
            seqs = [hit.seq for hit in hits]
            assert len(seqs) == len(set(seqs))
            assert set(seqs) == expected, (text, session_id)
