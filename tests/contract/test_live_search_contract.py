"""Search's contract with live sessions, for every backend: the matching set is exactly FTS5's own
over the live-wins view, every page by cursor, and a live change makes cursors stale.

The live source holds a stored session's log cut in half (overlaying it), a
live-only copy of another under a new id, and a live-only session with words
no stored session has.  The oracle is a scratch in-memory FTS5 table of every
session's documents as the read interface shows them (``filterEvents``: a live
session's own documents, never its stored row's), queried with the literal
phrase: whatever a backend does with the overlay, the sessions and events it
returns over all pages must be exactly the ones that phrase matches.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from readmodel.core.errors import SessionQueryError
from readmodel.live import InMemoryLiveSource
from readmodel.query import SessionQuery
from tests import indexdb
from tests import logfactory as lf
from tests.backends import Backend
from tests.contract.test_search_contract import _all_pages, _phrase
from tests.corpus import ZSTD_ROOT, require_corpus

require_corpus()

_WORD = re.compile(r"[A-Za-z]{3,}")
_ONLY_LIVE = "quokka marmalade"  # words of the live-only session alone


def _live_only() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events = [lf.turn_start(0), lf.user(1, f"a {_ONLY_LIVE} question"), lf.turn_end(2)]
    return lf.header("live-only-session", 1_800_000_000_000, cwd="/work/live"), events


@pytest.fixture(scope="module")
def overlaid(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SessionQuery, InMemoryLiveSource, sqlite3.Connection, list[str], list[str]]]:
    db = backend.build(ZSTD_ROOT, backend.database(tmp_path_factory.mktemp("live-contract"), "index"))
    plain = SessionQuery.open(db)
    logs = []
    for record in plain.list_sessions():
        try:
            logs.append(plain.read_session(record.header["id"], redact=False))
        except SessionQueryError:
            continue
        if len(logs) == 2:
            break
    plain.close()
    live = InMemoryLiveSource()
    cut, copied = logs
    live.create(cut.session, cut.events[: max(1, len(cut.events) // 2)])
    live.create({**copied.session, "id": "live-copy"}, copied.events)
    live.create(*_live_only())
    query = SessionQuery.open(db, live=live)
    oracle = indexdb.connect(":memory:")
    oracle.execute("CREATE VIRTUAL TABLE docs USING fts5(text, session_id UNINDEXED, seq UNINDEXED, tokenize='unicode61')")
    texts: list[str] = []
    for record in query.list_sessions():
        try:
            documents = query.filter_events(record.header["id"], [])
        except SessionQueryError:
            continue  # not searchable (corrupt or unsupported)
        for document in documents:
            oracle.execute("INSERT INTO docs VALUES (?, ?, ?)", (document.text, document.session_id, document.seq))
            texts.append(document.text)
    yield query, live, oracle, texts, [cut.session["id"], "live-copy", "live-only-session"]
    query.close()
    oracle.close()


def _queries(texts: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    queries = [_ONLY_LIVE, "quokka"]
    for text in rng.sample(texts, min(count, len(texts))):
        words = _WORD.findall(text)
        if words:
            at = rng.randrange(len(words))
            queries.append(" ".join(words[at : at + rng.choice((1, 2))]))
    return queries


def test_cross_session_search_with_live_sessions_returns_exactly_the_matching_sessions(overlaid: Any) -> None:
    query, _, oracle, texts, live_ids = overlaid
    for text in _queries(texts, 30, seed=3):
        expected = {row[0] for row in oracle.execute("SELECT DISTINCT session_id FROM docs WHERE docs MATCH ?", (_phrase(text),))}
        request: dict[str, Any] = {"query": text, "limit": 3}
        hits = _all_pages(lambda cursor: query.search_sessions({**request, **({"cursor": cursor} if cursor else {})}), 3)
        found = [hit.header["id"] for hit in hits]
        assert len(found) == len(set(found)) and set(found) == expected, text
        for hit in hits:
            assert hit.live == (hit.header["id"] in live_ids), text
            assert hit.persisted == (hit.header["id"] not in live_ids[1:]), text
            matched = oracle.execute("SELECT 1 FROM docs WHERE docs MATCH ? AND session_id = ? AND seq = ?", (_phrase(text), hit.header["id"], hit.best_match.seq))
            assert matched.fetchone() is not None, (text, hit.header["id"])


def test_within_session_search_of_live_sessions_returns_exactly_the_matching_events(overlaid: Any) -> None:
    query, _, oracle, texts, live_ids = overlaid
    for text in _queries(texts, 30, seed=4):
        for session_id in live_ids:
            expected = {row[0] for row in oracle.execute("SELECT seq FROM docs WHERE docs MATCH ? AND session_id = ?", (_phrase(text), session_id))}
            request: dict[str, Any] = {"sessionId": session_id, "query": text, "limit": 2}
            hits = _all_pages(lambda cursor: query.search_events({**request, **({"cursor": cursor} if cursor else {})}), 2)
            assert sorted(hit.seq for hit in hits) == sorted(expected), (text, session_id)


@pytest.mark.parametrize("mode", ["phrase", "words", "substring"])
def test_every_mode_finds_the_live_only_session_and_filters_apply_to_it(overlaid: Any, mode: str) -> None:
    query = overlaid[0]
    found = query.search_sessions({"query": "quokka", "match": mode})
    assert [hit.header["id"] for hit in found.items] == ["live-only-session"]
    assert found.items[0].live and not found.items[0].persisted
    assert not query.search_sessions({"query": "quokka", "match": mode, "sessionFilters": [{"kind": "availability", "values": ["persisted"]}]}).items
    assert not query.search_sessions({"query": "quokka", "match": mode, "sessionFilters": [{"kind": "cwd", "values": ["/elsewhere"]}]}).items
    assert not query.search_sessions({"query": "quokka", "match": mode, "eventFilters": [{"kind": "type", "values": ["tool/result"]}]}).items
    within = query.search_events({"sessionId": "live-only-session", "query": "quokka", "match": mode})
    assert [hit.seq for hit in within.items] == [1] and "quokka" in within.items[0].snippet


def test_a_live_change_between_pages_makes_the_cursor_stale(overlaid: Any) -> None:
    query, live, _, _, _ = overlaid
    first = query.search_sessions({"query": "the", "limit": 1})
    second = query.search_sessions({"query": "the", "limit": 1, "cursor": first.next_cursor})
    assert second.next_cursor
    header, events = _live_only()
    live.create({**header, "id": "live-latecomer"}, events)
    try:
        with pytest.raises(SessionQueryError) as caught:
            query.search_sessions({"query": "the", "limit": 1, "cursor": second.next_cursor})
        assert caught.value.code == "SESSION_QUERY_STALE_CURSOR"
        assert {hit.header["id"] for hit in query.search_sessions({"query": "quokka"}).items} == {"live-only-session", "live-latecomer"}
    finally:
        live.remove("live-latecomer")
