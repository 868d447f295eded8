"""The gram index as the substring seam's provider: a superset of the matches, and the slow path's answers."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from readmodel.core.jsvalues import JS_WHITESPACE
from readmodel.projection.filters import compile_text_filter
from readmodel.projection.grams import normalise_query as normalise_grams_query
from readmodel.search import gramsearch
from readmodel.search.requests import normalize_query
from readmodel.search.sqlite import sqlite_search
from tests.projection.test_grams import typed_variant
from tests.search.test_search_engine import build
from tests.search.test_search_modes import cached_documents, corpora, walk  # noqa: F401 - corpora: the fixture
from tests import indexdb

_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _query(data: st.DataObject, texts: list[str]) -> str:
    """A piece of a document as a user might type it: any length, across word and token
    boundaries, in other case-fold class members, with other whitespace runs."""
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    focus = data.draw(st.sampled_from(["any", "non-ascii", "punctuation"]))
    pool = texts
    if focus == "non-ascii":
        pool = [text for text in texts if not text.isascii()] or texts
    elif focus == "punctuation":
        pool = [text for text in texts if any(char in text for char in "->:+/.")] or texts
    text = rng.choice(pool)
    start = rng.randrange(len(text))
    piece = text[start : start + data.draw(st.integers(1, 24))]
    return typed_variant(piece, rng)


def _candidates(db: str, query: str, doc_range: tuple[int, int] | None = None) -> set[int] | None:
    conn = indexdb.connect(f"file:{db}?mode=ro", uri=True)
    try:
        answer = gramsearch.candidates(conn, query, doc_range)
        return None if answer is None else {row[0] for row in conn.execute(*answer)}
    finally:
        conn.close()


def _text_ids(db: str) -> dict[int, int]:
    """Each document's text id (schema 0018: the gram index's rows are texts)."""
    conn = indexdb.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(conn.execute('SELECT "docid", "text_id" FROM "document_rows"').fetchall())
    finally:
        conn.close()


def _hits(db: str, method: str, request: dict[str, Any]) -> list[tuple[Any, ...]]:
    call = sqlite_search(db)
    return [(hit.header["id"] if method == "sessions" else hit.seq, hit.best_match.seq if method == "sessions" else None, hit.best_match.snippet if method == "sessions" else hit.snippet) for hit in walk(call, method, request)]


@pytest.mark.parametrize("corpus", ["shared", "synthetic"])
@_SETTINGS
@given(data=st.data())
def test_candidates_hold_every_match_and_the_hits_are_the_slow_paths(
    corpora: dict[str, str], corpus: str, data: st.DataObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = corpora[corpus]
    rows = cached_documents(db)
    query = _query(data, [row[3] for row in rows if row[3].strip()])
    if not query.strip(JS_WHITESPACE):
        return
    normalised = normalize_query(query)
    pattern = compile_text_filter(normalised)
    text_of = _text_ids(db)
    matching = {text_of[docid] for _, docid, _, text in rows if pattern.search(text)}
    found = _candidates(db, normalised)
    if found is None:
        folded = normalise_grams_query(normalised)
        assert len(folded) == 1 and folded.isascii()  # one ASCII character once folded ("ſ" is "s"): no gram
        return
    assert matching <= found, sorted(matching - found)[:5]
    # Within one session the same texts (the caller keeps those the session's documents hold).
    assert _candidates(db, normalised, (1 << 32, 1 << 32 | 0xFFFFFFFF)) == found
    if len(normalised) == 1 and normalised.isascii() and normalised.isalnum():
        return  # refused by the substring mode
    limit = data.draw(st.integers(1, 12))
    request = {"query": query, "match": "substring", "limit": limit}
    fast = _hits(db, "sessions", request)
    with monkeypatch.context() as patch:
        patch.setattr(gramsearch, "candidates", lambda conn, query, doc_range: None)
        slow = _hits(db, "sessions", request)
        if fast:
            target = fast[0][0]
            slow_events = _hits(db, "events", {**request, "sessionId": target})
    assert fast == slow
    if fast:
        assert _hits(db, "events", {**request, "sessionId": target}) == slow_events


def test_a_gram_index_of_another_scheme_is_not_used_and_the_next_full_pass_rebuilds_it(tmp_path: Any) -> None:
    from tests.indexstate import index_state

    _, db, reconciler = build(tmp_path, {"a": ["数据库索引需要重建 tearDown"], "b": ["OutcomeUnknown -> C++"]})
    assert _candidates(db, "数据库") is not None
    conn = indexdb.connect(db)
    conn.execute("UPDATE index_meta SET grams = 'g0:unicode-1.0'")
    conn.commit()
    conn.close()
    assert _candidates(db, "数据库") is None  # verification of every document instead
    assert [hit[0] for hit in _hits(db, "sessions", {"query": "Down", "match": "substring"})] == ["a"]
    reconciler.reconcile()
    state = index_state(db)
    assert state["consistency"] == [] and _candidates(db, "数据库") is not None
    holders = {docid >> 32 for docid, text_id in _text_ids(db).items() if text_id in (_candidates(db, "->") or ())}
    assert holders == {2}


def test_long_queries_use_a_few_likely_rare_grams_in_query_order() -> None:
    grams = [f"{chr(97 + index % 26)}{chr(98 + index % 25)}" for index in range(40)] + ["库x", " e", "->"]
    chosen = gramsearch.choose_grams(grams)
    assert len(chosen) == gramsearch.MAX_GRAMS
    assert "库x" in chosen and "->" in chosen and " e" not in chosen
    assert chosen == [gram for gram in grams if gram in chosen]
    assert gramsearch.choose_grams(["ab", "bc"]) == ["ab", "bc"]
    assert gramsearch.match_expression("a") is None and gramsearch.match_expression("库") == "5e93"
    # FTS5 syntax in a query is data: the expression holds only hex words and its own operators.
    expression = gramsearch.match_expression('"OR" NEAR(a b) * ^x:y AND -')
    assert expression is not None and expression.startswith("((") and ") NOT l) OR (" in expression
    words = expression.replace("(", " ").replace(")", " ").split()
    assert all(word in ("NOT", "OR", "l") or int(word, 16) >= 0 and word == word.lower() for word in words)
    assert gramsearch.match_expression("ab") == "c200062"  # under three code points: bigrams only
