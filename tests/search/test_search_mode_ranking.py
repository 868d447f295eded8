"""The words and substring rankings computed by SQLite (readmodel.search.sqlranking) are the
Python ranking's (readmodel.search.modes.Ranking), page for page, in every scope."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from readmodel.live import InMemoryLiveSource
from readmodel.search import sqlranking
from readmodel.search.engine import SessionSearch
from readmodel.search.modes import words_expression
from readmodel.search.snippets import END_MARK, START_MARK, make_snippet
from readmodel.search.sqlite import sqlite_search
from tests.logfactory import header, turn_end, turn_start, user
from tests.search.test_search_engine import build
from tests.search.test_search_modes import _SETTINGS, _substring, cached_documents, corpora, walk
from tests import indexdb

__all__ = ["corpora"]  # the module-scoped fixture, shared with the mode tests


def _searches(db: str, **options: Any) -> tuple[SessionSearch, SessionSearch]:
    """``(sql, python)``: the same index ranked by SQLite and by the Python oracle."""
    fast, slow = sqlite_search(db, **options), sqlite_search(db, **options)
    fast.open()
    slow.open()
    slow.backend._sql_ranking = False
    assert fast.backend._texts
    return fast, slow


def _words_query(data: st.DataObject, rows: list[tuple[str, int, int, str]]) -> str:
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    words = re.findall(r"\w+", rng.choice([row[3] for row in rows if re.search(r"\w", row[3])]))
    chosen = rng.sample(words, min(len(words), data.draw(st.integers(1, 2))))
    if data.draw(st.booleans()):
        chosen[-1] = chosen[-1][:2]  # a short prefix: thousands of matches, boilerplate among them
    return " ".join(chosen) + data.draw(st.sampled_from(["", " "]))


def _answer(search: SessionSearch, method: str, request: dict[str, Any]) -> list[tuple[Any, ...]]:
    hits = walk(search, method, request)
    if method == "events":
        return [(hit.seq, hit.snippet) for hit in hits]
    return [(hit.header["id"], hit.best_match.seq, hit.best_match.snippet) for hit in hits]


def _sessions(db: str) -> list[tuple[str, str]]:
    conn = indexdb.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute('SELECT "id", "cwd" FROM "sessions" WHERE "status" = \'ok\' ORDER BY "id"').fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("corpus", ["shared", "synthetic"])
@_SETTINGS
@given(data=st.data())
def test_the_sql_ranking_is_the_python_ranking_on_every_page(corpora: dict[str, str], corpus: str, data: st.DataObject) -> None:
    db = corpora[corpus]
    rows = cached_documents(db)
    mode = data.draw(st.sampled_from(["words", "substring"]))
    query = _words_query(data, rows) if mode == "words" else _substring(data, rows)
    if mode == "substring" and len(query.strip()) == 1 and query.strip().isascii() and query.strip().isalnum():
        return
    fast, slow = _searches(db)
    assert sqlranking.applies(fast.backend, mode) or mode == "words" and not fast.backend._accelerated
    request: dict[str, Any] = {"query": query, "match": mode, "limit": data.draw(st.integers(1, 9))}
    sessions = _sessions(db)
    scope = data.draw(st.sampled_from(["all", "workspace", "session"]))
    method = "sessions"
    if scope == "workspace":
        cwd = data.draw(st.sampled_from(sorted({cwd for _, cwd in sessions if cwd})))
        request["sessionFilters"] = [{"kind": "cwd", "values": [cwd]}]
    elif scope == "session":
        method = "events"
        request["sessionId"] = data.draw(st.sampled_from([session_id for session_id, _ in sessions]))
    if data.draw(st.booleans()):  # event filters: the fast path then joins the documents' columns
        types = data.draw(st.lists(st.sampled_from(_types(db)), min_size=1, max_size=2, unique=True))
        request["filters" if method == "events" else "eventFilters"] = [{"kind": "type", "values": types}]
    answer = _answer(fast, method, request)
    assert answer == _answer(slow, method, request)
    if mode == "words":
        _assert_whole_document_snippets(db, answer, request, method)


def _types(db: str) -> list[str]:
    conn = indexdb.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute('SELECT DISTINCT "type" FROM "documents" ORDER BY 1')]
    finally:
        conn.close()


def _assert_whole_document_snippets(db: str, answer: list[tuple[Any, ...]], request: dict[str, Any], method: str) -> None:
    """Every words hit's snippet is the one of its whole document's ``highlight()`` (an oracle
    independent of both rankings, which share the page's snippet code)."""
    search = sqlite_search(db)
    search.open()
    backend = search.backend
    conn = backend._connection()
    try:
        expression, _ = words_expression(request["query"], not request["query"][-1:].isspace(), lambda text: backend._terms(conn, text))
        for hit in answer:
            session_id, seq, snippet = (request["sessionId"], *hit) if method == "events" else hit
            sql = (
                'SELECT highlight("texts_fts", 0, ?, ?) FROM "texts_fts" JOIN "document_rows" d ON d."text_id" = "texts_fts"."rowid" '
                'JOIN "sessions" s ON s."sid" = d."sid" WHERE "texts_fts" MATCH ? AND s."id" = ? AND d."seq" = ?'
            )
            marked = conn.execute(sql, (START_MARK, END_MARK, expression, session_id, seq)).fetchone()[0]
            assert snippet == make_snippet(marked, backend.config.snippet_chars)
    finally:
        search.close()


_BOILERPLATE = "Runtime context: sandbox policy; the sandbox is read-only."


@pytest.mark.parametrize("mode", ["words", "substring"])
def test_the_sql_ranking_demotes_shared_texts_by_every_session_of_the_index(tmp_path: Path, mode: str) -> None:
    """Boilerplate held by three sessions, a text held by two (not boilerplate), error sessions
    not counted, ties on strength, length and time: both rankings agree, scoped or not."""
    sessions = {
        "a": [_BOILERPLATE, "sandbox twice: sandbox"],
        "b": [_BOILERPLATE, "pasted sandbox note"],
        "c": ["pasted sandbox note", _BOILERPLATE],
        "d": ["my own sandbox"],
        "e": ["your own sandbox"],
        "f": [_BOILERPLATE[::-1] + " sandbox"],
        "g": [_BOILERPLATE],
    }
    db = build(tmp_path, sessions)[1]
    fast, slow = _searches(db)
    everyone = {"query": "sandbox", "match": mode, "limit": 2}
    answer = _answer(fast, "sessions", everyone)
    assert answer == _answer(slow, "sessions", everyone)
    assert [session_id for session_id, _, _ in answer][-1] == "g"  # only boilerplate: last
    for chosen in (["a", "b"], ["c", "g"], ["g"]):
        scoped = {"query": "sandbox", "match": mode, "limit": 1, "sessionFilters": [{"kind": "id", "values": chosen}]}
        assert _answer(fast, "sessions", scoped) == _answer(slow, "sessions", scoped)
    for session_id in sessions:
        request = {"query": "sandbox", "match": mode, "limit": 1, "sessionId": session_id}
        assert _answer(fast, "events", request) == _answer(slow, "events", request)


def test_a_live_overlay_is_ranked_by_the_python_path(tmp_path: Path) -> None:
    """Live documents are not in texts: with any live session the Python ranking runs."""
    db = build(tmp_path, {"a": [_BOILERPLATE], "b": [_BOILERPLATE], "c": ["sandbox"]})[1]
    live = InMemoryLiveSource()
    live.create(header("live-1", created_at=9), [user(0, _BOILERPLATE)])
    search = sqlite_search(db, live=live)
    hits = walk(search, "sessions", {"query": "sandbox", "match": "words"})
    assert not sqlranking.applies(search.backend, "words")
    assert [hit.header["id"] for hit in hits][0] == "c"
    assert {hit.header["id"] for hit in hits} == {"a", "b", "c", "live-1"}


def _live_log(texts: list[str]) -> list[dict[str, Any]]:
    return [turn_start(0), *(user(1 + index, text) for index, text in enumerate(texts)), turn_end(1 + len(texts))]


_SPECIFIC = "a longer note of our own that mentions the sandbox only once, nothing else"


@pytest.mark.parametrize("scope", ["events", "filtered"])
def test_a_scoped_search_counts_a_live_holder_toward_boilerplate(tmp_path: Path, scope: str) -> None:
    """Two stored sessions and one live one hold the text: boilerplate, though fewer than three
    stored documents have its length (the length shortcut counts the live ones too)."""
    db = build(tmp_path, {"a": [_BOILERPLATE, _SPECIFIC], "b": [_BOILERPLATE]})[1]
    live = InMemoryLiveSource()
    live.create(header("live-1", created_at=9), _live_log([_BOILERPLATE]))
    search = sqlite_search(db, live=live)
    if scope == "events":
        first = walk(search, "events", {"sessionId": "a", "query": "sandbox", "match": "words"})[0].seq
    else:
        first = walk(search, "sessions", {"query": "sandbox", "match": "words", "sessionFilters": [{"kind": "id", "values": ["a"]}]})[0].best_match.seq
    assert first == 2  # the specific note before the stronger boilerplate
    live.remove("live-1")
    search.backend._ranked_rows.clear()  # a within-session ranking of a stored session is cached across live changes
    if scope == "events":
        assert walk(search, "events", {"sessionId": "a", "query": "sandbox", "match": "words"})[0].seq == 1
    else:
        assert walk(search, "sessions", {"query": "sandbox", "match": "words", "sessionFilters": [{"kind": "id", "values": ["a"]}]})[0].best_match.seq == 1


def test_a_scoped_search_does_not_count_the_stored_row_a_live_session_overlays(tmp_path: Path) -> None:
    """Three stored sessions hold the text, but a live session overlays one of them without it:
    two holders in the search corpus, so specific (as an unscoped search counts)."""
    db = build(tmp_path, {"a": [_BOILERPLATE, _SPECIFIC], "b": [_BOILERPLATE], "c": [_BOILERPLATE]})[1]
    live = InMemoryLiveSource()
    live.create(header("c", created_at=1), _live_log(["something else entirely"]))
    search = sqlite_search(db, live=live)
    assert walk(search, "events", {"sessionId": "a", "query": "sandbox", "match": "words"})[0].seq == 1
    assert walk(search, "sessions", {"query": "sandbox", "match": "words"})[0].header["id"] in {"a", "b"}


@pytest.mark.parametrize("judged_ahead", [1, 4])
def test_sessions_behind_one_session_s_many_strong_matches_are_all_ranked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judged_ahead: int) -> None:
    """A session whose 70 strongest matches lead the ranking does not hide the sessions after
    it, scoped or not, however few texts are judged per statement."""
    sessions = {"heavy": [f"sandbox sandbox sandbox note {index}" for index in range(70)]}
    sessions.update({f"light-{index:02}": [f"one sandbox here {index}", "sandbox"] for index in range(12)})
    db = build(tmp_path, sessions)[1]
    monkeypatch.setattr(sqlranking, "_JUDGED_AHEAD", judged_ahead)
    fast, slow = _searches(db)
    for mode in ("words", "substring"):
        for limit in (1, 5, 13):
            for filters in ([], [{"kind": "id", "values": sorted(sessions)}]):
                request = {"query": "sandbox", "match": mode, "limit": limit, "sessionFilters": filters}
                answer = _answer(fast, "sessions", request)
                assert answer == _answer(slow, "sessions", request)
                order = [session_id for session_id, _, _ in answer]
                assert order[0] == "heavy" and sorted(order) == sorted(sessions)


@pytest.mark.parametrize("mode", ["words", "substring"])
def test_a_session_not_ok_is_neither_a_hit_nor_a_holder(tmp_path: Path, mode: str) -> None:
    """A stored session whose status is not ok keeps its documents in the index: the fast path
    then checks eligibility per match, returns none of its documents and does not count it
    among a text's holders (the boilerplate text below is held by two ok sessions only)."""
    db = build(tmp_path, {"a": [_BOILERPLATE, "x"], "b": [_BOILERPLATE], "c": [_BOILERPLATE], "d": ["a long sandbox text of d's own"]})[1]
    conn = indexdb.connect(db)
    with conn:
        conn.execute("UPDATE \"sessions\" SET \"status\" = 'error' WHERE \"id\" = 'c'")
    conn.close()
    fast, slow = _searches(db)
    for request in ({"query": "sandbox", "match": mode}, {"query": "sandbox", "match": mode, "sessionFilters": [{"kind": "id", "values": ["a", "c", "d"]}]}):
        answer = _answer(fast, "sessions", request)
        assert answer == _answer(slow, "sessions", request)
        assert "c" not in [session_id for session_id, _, _ in answer]
    # Not boilerplate (two ok holders): the shorter text ranks first.
    assert [session_id for session_id, _, _ in _answer(fast, "sessions", {"query": "sandbox", "match": mode})][:1] in (["a"], ["b"])
