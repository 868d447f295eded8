"""Query edges: tokens past FTS5's size limit, and the bounds on query length.

* FTS5 keeps only the first 32,768 bytes of a longer token, in documents and
  queries alike, and the cut may fall inside a character: search answers such
  queries as FTS5 matching does (the reference's phrase semantics), through the
  Python API, the JSON-RPC dispatcher and the CLI, with and without the C
  accelerator — never with an internal error;
* a query longer than ``MAX_QUERY_CHARS`` code points (after normalisation) or
  with more than ``MAX_QUERY_TOKENS`` tokens is ``SESSION_QUERY_INVALID_QUERY``,
  refused at once (a 1 MB query in milliseconds);
* a long phrase whose first or last few tokens match nothing is never run over
  the index, and that shortcut never changes an answer.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from readmodel.search import accelerator as ftsaux
from readmodel.search import sqlite as search_module
from readmodel.core.errors import SessionQueryError
from readmodel.live import InMemoryLiveSource
from readmodel.query import SessionQuery
from readmodel.rpc import Dispatcher
from readmodel.search.requests import MAX_QUERY_CHARS, MAX_QUERY_TOKENS, match_expression
from readmodel.search.sqlite import PROBE_TOKENS
from readmodel.search.engine import SessionSearch
from readmodel.search.sqlite import sqlite_search
from tests.cli.helpers import json_out, sessionq
from tests.logfactory import header, turn_end, turn_start, user
from tests.search.test_search_engine import build, code_of, ids
from tests import indexdb

CJK = "一"  # 3 UTF-8 bytes: 32,768 is not a multiple, so FTS5's cut ends inside a character
WIDE = "\U00020000"  # 4 bytes: the cut falls between characters
LONG_DOCUMENTS = {
    "long": [CJK * 13_334 + " tail"],  # 40,002 bytes, cut to 32,768
    "cut": [CJK * 10_923],  # 32,769 bytes, cut to the same 32,768
    "exact": [CJK * 10_922 + " tail"],  # 32,766 bytes: a different, whole token
    "wide": [WIDE * 8_193],  # cut to 8,192 characters
    "plain": ["nothing long here"],
}
LONG_QUERIES = {
    CJK * 10_923: ["cut", "long"],
    CJK * 13_334: ["cut", "long"],
    CJK * 13_334 + " tail": ["long"],
    CJK * 10_922: ["exact"],
    CJK * 10_921: [],
    WIDE * 8_192: ["wide"],
}


@pytest.fixture(scope="module")
def long_token_index(tmp_path_factory: pytest.TempPathFactory) -> str:
    _, db, _ = build(tmp_path_factory.mktemp("long-tokens"), LONG_DOCUMENTS)
    return db


@pytest.fixture(params=[True, False], ids=["ftsaux", "pure-sql"])
def accelerated(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run a test with the C accelerator, then with its pure-SQL paths."""
    if request.param:
        if not ftsaux.available():
            pytest.skip("the C accelerator is not available")
    else:
        monkeypatch.setattr(search_module.ftsaux, "install", lambda conn: False)
    return bool(request.param)


def fts5_sessions(db: str, query: str) -> list[str]:
    """The sessions whose stored documents FTS5 itself matches with the query's phrase."""
    conn = indexdb.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            'SELECT DISTINCT s."id" FROM "texts_fts" f JOIN "document_rows" d ON d."text_id" = f."rowid" '
            'JOIN "sessions" s ON s."sid" = d."sid" WHERE "texts_fts" MATCH ? ORDER BY s."id"',
            (match_expression(query),),
        )
        return [row[0] for row in rows]
    finally:
        conn.close()


def test_tokens_past_the_fts5_limit_match_as_fts5_matches(long_token_index: str, accelerated: bool) -> None:
    search = sqlite_search(long_token_index)
    for query, expected in LONG_QUERIES.items():
        assert fts5_sessions(long_token_index, query) == expected  # the fixture is what it claims
        page = search.search_sessions({"query": query})
        assert sorted(ids(page)) == expected, len(query)
        assert all(hit.best_match.snippet for hit in page.items)
        for session_id in ("long", "exact"):
            events = search.search_events({"sessionId": session_id, "query": query})
            assert [hit.seq for hit in events.items] == ([1] if session_id in expected else [])
    search.close()


def test_both_span_counters_answer_long_tokens_alike(long_token_index: str) -> None:
    if not ftsaux.available():
        pytest.skip("the C accelerator is not available")
    fast, plain = sqlite_search(long_token_index), sqlite_search(long_token_index)
    plain.backend._connection()
    plain.backend._accelerated = False
    for query in LONG_QUERIES:
        assert msgspec.to_builtins(fast.search_sessions({"query": query})) == msgspec.to_builtins(plain.search_sessions({"query": query}))


def rpc(dispatcher: Dispatcher, method: str, params: dict[str, Any]) -> Any:
    response = dispatcher.handle_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
    assert response is not None
    return json.loads(response)


def test_the_rpc_dispatcher_answers_long_tokens(long_token_index: str, accelerated: bool) -> None:
    dispatcher = Dispatcher(SessionQuery.open(long_token_index))
    for query, expected in LONG_QUERIES.items():
        answer = rpc(dispatcher, "searchSessions", {"query": query})
        assert sorted(hit["header"]["id"] for hit in answer["result"]["items"]) == expected
    answer = rpc(dispatcher, "searchEvents", {"sessionId": "long", "query": CJK * 10_923})
    assert [hit["seq"] for hit in answer["result"]["items"]] == [1]


@pytest.mark.parametrize("ftsaux_env", ["1", "0"])
def test_the_cli_answers_long_tokens(long_token_index: str, ftsaux_env: str) -> None:
    result = sessionq("search", CJK * 10_923, "--match", "phrase", "--db", long_token_index, "--json", env={"SESSIONQ_FTSAUX": ftsaux_env})
    assert result.returncode == 0, result.stderr
    assert sorted(hit["header"]["id"] for hit in json_out(result)["items"]) == ["cut", "long"]


# --------------------------------------------------------------------------- length bounds


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> str:
    _, db, _ = build(
        tmp_path_factory.mktemp("query-bounds"),
        {"prose": ["the quick brown fox jumps over the lazy dog " * 20], "other": ["the the the the the"], "x": ["x"]},
    )
    return db


@pytest.mark.exclusive  # bounds a wall time within a second or two
def test_a_query_over_the_length_limit_is_refused_at_once(small_index: str, accelerated: bool) -> None:
    search = sqlite_search(small_index)
    huge = "the " * 250_000  # 1 MB
    started = time.perf_counter()
    for call in (lambda: search.search_sessions({"query": huge}), lambda: search.search_events({"sessionId": "prose", "query": huge})):
        with pytest.raises(SessionQueryError) as caught:
            call()
        assert caught.value.code == "SESSION_QUERY_INVALID_QUERY"
        assert caught.value.message == f"session-search query must be at most {MAX_QUERY_CHARS} characters"
    assert time.perf_counter() - started < 0.5
    dispatcher = Dispatcher(SessionQuery.open(small_index))
    started = time.perf_counter()
    error = rpc(dispatcher, "searchSessions", {"query": huge})["error"]
    assert time.perf_counter() - started < 0.5
    assert error["code"] == -32000 and error["data"]["code"] == "SESSION_QUERY_INVALID_QUERY"


def test_the_length_limit_counts_normalised_code_points(small_index: str) -> None:
    search = sqlite_search(small_index)
    assert ids(search.search_sessions({"query": "x" * MAX_QUERY_CHARS})) == []
    assert code_of(lambda: search.search_sessions({"query": "x" * (MAX_QUERY_CHARS + 1)})) == "SESSION_QUERY_INVALID_QUERY"
    padded = " \u3000\n" * MAX_QUERY_CHARS + "x" + "\t" * MAX_QUERY_CHARS  # collapses to "x"
    assert ids(search.search_sessions({"query": padded})) == ["x"]
    # The reference's own rules come first: a long query with NUL gets the NUL message.
    with pytest.raises(SessionQueryError, match="must not contain NUL"):
        search.search_sessions({"query": "\x00" + "x" * MAX_QUERY_CHARS})


def test_a_query_over_the_token_limit_is_refused(small_index: str, accelerated: bool) -> None:
    search = sqlite_search(small_index)
    at_limit = " ".join(["the"] * MAX_QUERY_TOKENS)
    assert ids(search.search_sessions({"query": at_limit})) == []
    assert ids(search.search_sessions({"query": " ".join(f"w{n}" for n in range(MAX_QUERY_TOKENS))})) == []
    for query in (at_limit + " the", "-".join(["a"] * (MAX_QUERY_TOKENS + 1))):
        for call in (lambda: search.search_sessions({"query": query}), lambda: search.search_events({"sessionId": "prose", "query": query})):
            with pytest.raises(SessionQueryError) as caught:
                call()
            assert caught.value.code == "SESSION_QUERY_INVALID_QUERY"
            assert caught.value.message == f"session-search query must have at most {MAX_QUERY_TOKENS} tokens"


def test_the_cli_refuses_an_overlong_query_with_a_json_error(small_index: str) -> None:
    result = sessionq("search", "x" * (MAX_QUERY_CHARS + 1), "--db", small_index, "--json")
    assert result.returncode == 2, result.stderr
    assert json_out(result)["error"]["code"] == "SESSION_QUERY_INVALID_QUERY" and "Traceback" not in result.stderr


# --------------------------------------------------------------------------- the long-phrase probe


def phrases_run(search: SessionSearch, call: Any, query: str) -> int:
    """How many statements ``call`` runs that bind the whole query's phrase."""
    seen: list[str] = []
    conn = search.backend._connection()
    conn.set_trace_callback(seen.append)
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    literal = "'" + match_expression(query).replace("'", "''") + "'"
    return sum(literal in statement for statement in seen)


def test_a_long_phrase_whose_ends_match_nothing_is_never_run(small_index: str, accelerated: bool) -> None:
    search = sqlite_search(small_index)
    for query in (" ".join(["the"] * (MAX_QUERY_TOKENS - 1) + ["dog"]), "the quick brown fox " + " ".join(["zzz"] * 60)):
        assert phrases_run(search, lambda: search.search_sessions({"query": query}), query) == 0
        assert phrases_run(search, lambda: search.search_events({"sessionId": "prose", "query": query}), query) == 0
        assert ids(search.search_sessions({"query": query})) == []
    # Both ends occur ("other" holds five "the" in a row), so the phrase itself decides.
    ends_present = " ".join(["the"] * 6)
    assert phrases_run(search, lambda: search.search_sessions({"query": ends_present}), ends_present) > 0
    assert ids(search.search_sessions({"query": ends_present})) == []
    assert ids(search.search_sessions({"query": "the the the the the"})) == ["other"]
    present = ("the quick brown fox jumps over the lazy dog " * 3).strip()
    assert ids(search.search_sessions({"query": present})) == ["prose"]


_VOCABULARY = ["the", "quick", "fox", "the quick", "fox the", "dog"]
_RNG = random.Random(20261201)
# Sessions of repetitive phrases, so long queries often match, or nearly match.
PROBE_SESSIONS = {f"s{n}": [" ".join(_RNG.choices(_VOCABULARY, k=_RNG.randint(2, 14))) for _ in range(3)] for n in range(12)}


def _texts() -> st.SearchStrategy[list[str]]:
    return st.lists(st.lists(st.sampled_from(_VOCABULARY), min_size=1, max_size=14).map(" ".join), min_size=1, max_size=4)


@st.composite
def _long_phrases(draw: st.DrawFn) -> str:
    """More than PROBE_TOKENS tokens: random words, or a stored document's run of tokens
    (which matches), possibly with one word changed (which often does not)."""
    if draw(st.booleans()):
        return " ".join(draw(st.lists(st.sampled_from(["the", "quick", "fox", "dog"]), min_size=PROBE_TOKENS + 1, max_size=16)))
    tokens = draw(st.sampled_from([text for texts in PROBE_SESSIONS.values() for text in texts if len(text.split()) > PROBE_TOKENS])).split()
    start = draw(st.integers(0, len(tokens) - PROBE_TOKENS - 1))
    words = tokens[start : draw(st.integers(start + PROBE_TOKENS + 1, len(tokens)))]
    if draw(st.booleans()):
        words[draw(st.integers(0, len(words) - 1))] = draw(st.sampled_from(["the", "dog"]))
    return " ".join(words)


@pytest.fixture(scope="module")
def probe_index(tmp_path_factory: pytest.TempPathFactory) -> str:
    _, db, _ = build(tmp_path_factory.mktemp("probe"), PROBE_SESSIONS)
    return db


def _live(texts: list[str]) -> InMemoryLiveSource:
    source = InMemoryLiveSource()
    events = [turn_start(0), *(user(i + 1, text) for i, text in enumerate(texts)), turn_end(len(texts) + 1)]
    source.create(header("s3", created_at=5), events)
    source.create(header("live-only", created_at=6), events)
    return source


@settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=_long_phrases(), live=_texts())
def test_the_probe_never_changes_an_answer(probe_index: str, query: str, live: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    source = _live(live)
    probed = sqlite_search(probe_index, live=source)
    with monkeypatch.context() as patch:
        patch.setattr(search_module, "PROBE_TOKENS", 10**6)
        unprobed = sqlite_search(probe_index, live=source)
        expected = [
            msgspec.to_builtins(unprobed.search_sessions({"query": query, "limit": 100})),
            *(msgspec.to_builtins(unprobed.search_events({"sessionId": sid, "query": query})) for sid in ("s1", "s3", "live-only")),
        ]
    answers = [
        msgspec.to_builtins(probed.search_sessions({"query": query, "limit": 100})),
        *(msgspec.to_builtins(probed.search_events({"sessionId": sid, "query": query})) for sid in ("s1", "s3", "live-only")),
    ]
    probed.close()
    unprobed.close()
    assert answers == expected


def test_lone_surrogates_in_a_query_search_as_replacement_characters(tmp_path: Path) -> None:
    """Documents hold U+FFFD where their text had a lone surrogate; a query does the same."""
    _, db, _ = build(tmp_path, {"marked": ["alpha\ufffdbeta gamma"], "plain": ["alpha beta"]})
    search = sqlite_search(db)
    assert [hit.best_match.snippet for hit in search.search_sessions({"query": "alpha\ud800beta"}).items] == ["alpha beta", "alpha\ufffdbeta gamma"]
    assert search.search_sessions({"query": "\udcff"}).items == []  # no token: matches nothing
    result = sessionq("search", "alpha" + os.fsdecode(b"\xff") + "beta", "--db", db, "--json")  # an undecodable argument byte
    assert result.returncode == 0, result.stderr
    assert [hit["header"]["id"] for hit in json_out(result)["items"]] == ["plain", "marked"]
