"""The words and substring search modes against brute force, and their rules (cursors, demotion, hostile queries)."""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from readmodel.core.errors import SessionQueryError
from readmodel.live import InMemoryLiveSource
from readmodel.projection.filters import compile_text_filter
from readmodel.query import SessionQuery
from readmodel.search import substring as substring_module
from readmodel.search.engine import SessionSearch
from readmodel.search.modes import people_match, words_expression
from readmodel.search.sqlite import sqlite_search
from tests.backends import SQLITE
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT, require_corpus
from tests.logfactory import header, user
from tests.search.test_search_engine import build, code_of
from tests import indexdb

_SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


# --------------------------------------------------------------------------- corpora


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    require_corpus()
    base = tmp_path_factory.mktemp("modes")
    return {"shared": SQLITE.build(ZSTD_ROOT, str(base / "shared.db")), "synthetic": SQLITE.build(SYNTHETIC_ROOT, str(base / "synthetic.db"))}


def documents(db: str) -> list[tuple[str, int, int, str]]:
    """``(session id, docid, seq, text)`` of every searchable stored document."""
    conn = indexdb.connect(f"file:{db}?mode=ro", uri=True)
    try:
        sql = 'SELECT s."id", d."docid", d."seq", d."text" FROM "documents" d JOIN "sessions" s ON s."sid" = d."sid" WHERE s."status" = \'ok\''
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


_DOCUMENTS: dict[str, list[tuple[str, int, int, str]]] = {}


def cached_documents(db: str) -> list[tuple[str, int, int, str]]:
    if db not in _DOCUMENTS:
        _DOCUMENTS[db] = documents(db)
    return _DOCUMENTS[db]


def walk(search: SessionSearch, method: str, request: dict[str, Any]) -> list[Any]:
    """Every hit of a search, following the cursors."""
    hits: list[Any] = []
    call = search.search_sessions if method == "sessions" else search.search_events
    page = call(request)
    while True:
        hits += page.items
        if not page.next_cursor:
            return hits
        page = call({**request, "cursor": page.next_cursor})


# --------------------------------------------------------------------------- words == FTS5 "a" "b" "c"*


class Scratch:
    """The same documents in an in-memory FTS5 table (unicode61), queried directly."""

    def __init__(self, rows: list[tuple[str, int, int, str]]) -> None:
        self.conn = indexdb.connect(":memory:")
        self.conn.execute("CREATE VIRTUAL TABLE docs USING fts5(text, session_id UNINDEXED, seq UNINDEXED, tokenize='unicode61')")
        self.conn.executemany("INSERT INTO docs (text, session_id, seq) VALUES (?, ?, ?)", [(text, sid, seq) for sid, _, seq, text in rows])
        self.conn.execute("CREATE VIRTUAL TABLE q USING fts5(text, tokenize='unicode61')")
        self.conn.execute("CREATE VIRTUAL TABLE qv USING fts5vocab(q, instance)")

    def tokens(self, text: str) -> list[str]:
        self.conn.execute("DELETE FROM q")
        self.conn.execute("INSERT INTO q (text) VALUES (?)", (text,))
        return [row[0] for row in self.conn.execute("SELECT term FROM qv ORDER BY offset")]

    def words(self, query: str, prefix: bool) -> set[tuple[str, int]]:
        tokens = self.tokens(query)
        expression = " ".join(f'"{token}"' for token in tokens) + ("*" if prefix else "")
        return set(self.conn.execute("SELECT session_id, seq FROM docs WHERE docs MATCH ?", (expression,)).fetchall())


_SCRATCH: dict[str, Scratch] = {}


def scratch(db: str) -> Scratch:
    if db not in _SCRATCH:
        _SCRATCH[db] = Scratch(cached_documents(db))
    return _SCRATCH[db]


@pytest.mark.parametrize("corpus", ["shared", "synthetic"])
@_SETTINGS
@given(data=st.data())
def test_words_hits_are_the_fts5_quoted_tokens_query_on_every_page(corpora: dict[str, str], corpus: str, data: st.DataObject) -> None:
    db = corpora[corpus]
    rows = cached_documents(db)
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    words = re.findall(r"\w+", rng.choice([row[3] for row in rows if re.search(r"\w", row[3])]))
    chosen = rng.sample(words, min(len(words), data.draw(st.integers(1, 3))))
    cut = data.draw(st.integers(1, 4))
    chosen[-1] = chosen[-1][: max(1, len(chosen[-1]) - cut)] if data.draw(st.booleans()) else chosen[-1]
    trailing = data.draw(st.sampled_from(["", " "]))
    query = " ".join(chosen) + trailing
    expected = scratch(db).words(query, prefix=trailing == "")
    limit = data.draw(st.integers(1, 9))
    search = sqlite_search(db)
    hits = walk(search, "sessions", {"query": query, "match": "words", "limit": limit})
    sessions = [hit.header["id"] for hit in hits]
    assert len(sessions) == len(set(sessions))
    assert set(sessions) == {sid for sid, _ in expected}
    assert all((hit.header["id"], hit.best_match.seq) in expected for hit in hits)
    if sessions:
        target = data.draw(st.sampled_from(sessions))
        events = walk(search, "events", {"sessionId": target, "query": query, "match": "words", "limit": limit})
        assert sorted(hit.seq for hit in events) == sorted(seq for sid, seq in expected if sid == target)


# --------------------------------------------------------------------------- substring == filterEvents' text clause


def _substring(data: st.DataObject, rows: list[tuple[str, int, int, str]]) -> str:
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    text = rng.choice([row[3] for row in rows if row[3].strip()])
    start = rng.randrange(len(text))
    piece = text[start : start + data.draw(st.integers(1, 14))]
    if data.draw(st.booleans()):
        piece = "".join(ch.swapcase() if rng.random() < 0.5 else ch for ch in piece)
    if not piece.strip() or (len(piece.strip()) == 1 and piece.strip().isascii() and piece.strip().isalnum()):
        piece = text.strip()[:6] or "--"
    return piece


@pytest.mark.parametrize("corpus", ["shared", "synthetic"])
@_SETTINGS
@given(data=st.data())
def test_substring_hits_are_the_documents_filter_events_text_clause_selects(corpora: dict[str, str], corpus: str, data: st.DataObject) -> None:
    db = corpora[corpus]
    rows = cached_documents(db)
    query = _substring(data, rows)
    try:
        pattern = compile_text_filter(query)
    except SessionQueryError:
        return
    expected = {(sid, seq) for sid, _, seq, text in rows if pattern.search(text)}
    if len(query.strip()) == 1 and query.strip().isascii() and query.strip().isalnum():
        return
    search = sqlite_search(db)
    limit = data.draw(st.integers(1, 12))
    hits = walk(search, "sessions", {"query": query, "match": "substring", "limit": limit})
    assert {hit.header["id"] for hit in hits} == {sid for sid, _ in expected}
    assert len(hits) == len({hit.header["id"] for hit in hits})
    if hits:
        target = data.draw(st.sampled_from(sorted({hit.header["id"] for hit in hits})))
        events = walk(search, "events", {"sessionId": target, "query": query, "match": "substring", "limit": limit})
        engine = SessionQuery.open(db)
        try:
            filtered = engine.filter_events(target, [{"kind": "text", "text": query}])
        finally:
            engine.close()
        assert sorted(hit.seq for hit in events) == sorted(document.seq for document in filtered)


@pytest.mark.parametrize("query", ["数据库", "日本語", "検索", "搜索结果", "库", "OutcomeUnknown", "Down", "->", "::", "C++"])
def test_substring_finds_cjk_identifier_fragments_and_punctuation(corpora: dict[str, str], query: str) -> None:
    db = corpora["synthetic"]
    pattern = compile_text_filter(query)
    expected = {sid for sid, _, _, text in cached_documents(db) if pattern.search(text)}
    assert expected, "the synthetic corpus holds every example of the issue"
    hits = walk(sqlite_search(db), "sessions", {"query": query, "match": "substring", "limit": 50})
    assert {hit.header["id"] for hit in hits} == expected
    for hit in hits[:5]:
        assert pattern.search(hit.best_match.snippet), "the snippet shows the match"


def test_a_candidate_provider_changes_no_answer(corpora: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The seam: any superset of the matching text ids (here: exact, and everything) gives the slow path's answer."""
    db = corpora["synthetic"]
    queries = ["数据库", "Down", "->", "tearDown", "the"]
    search = sqlite_search(db)
    slow = {query: [(h.header["id"], h.best_match.seq, h.best_match.snippet) for h in walk(search, "sessions", {"query": query, "match": "substring", "limit": 40})] for query in queries}
    import json

    def exact(conn: sqlite3.Connection, query: str, doc_range: tuple[int, int] | None) -> tuple[str, list[Any]]:
        pattern = compile_text_filter(query)
        texts = conn.execute('SELECT "docid", "text_id" FROM "document_rows"').fetchall()
        text_of = dict(texts)
        ids = sorted({text_of[docid] for _, docid, _, text in cached_documents(db) if pattern.search(text)})
        return "SELECT value FROM json_each(?)", [json.dumps(ids + [-5, 2**40])]

    for provider in (exact, lambda conn, query, doc_range: ('SELECT "id" FROM "texts"', [])):
        monkeypatch.setattr("readmodel.search.sqlitemodes.index_candidates", provider)
        fresh = sqlite_search(db)
        for query in queries:
            assert [(h.header["id"], h.best_match.seq, h.best_match.snippet) for h in walk(fresh, "sessions", {"query": query, "match": "substring", "limit": 40})] == slow[query]
    assert substring_module.index_candidates(indexdb.connect(":memory:"), "x y", None) is None


# --------------------------------------------------------------------------- rules


def test_match_values_and_short_substrings(tmp_path: Path) -> None:
    _, db, _ = build(tmp_path, {"s1": ["数据库索引需要重建 and a b c"]})
    search = sqlite_search(db)
    for bad in ("PHRASE", "regex", 1, True, ["words"]):
        assert code_of(lambda: search.search_sessions({"query": "x", "match": bad})) == "SESSION_QUERY_INVALID_QUERY"
    for short in ("a", "7", " b "):
        assert code_of(lambda: search.search_sessions({"query": short, "match": "substring"})) == "SESSION_QUERY_INVALID_QUERY"
    assert len(search.search_sessions({"query": "库", "match": "substring"}).items) == 1
    assert len(search.search_sessions({"query": "a", "match": "words"}).items) == 1
    # null is absent: the phrase mode, byte for byte.
    assert search.search_sessions({"query": "数据库", "match": None}) == search.search_sessions({"query": "数据库"})


def test_a_cursor_is_bound_to_its_mode(tmp_path: Path) -> None:
    _, db, _ = build(tmp_path, {f"s{i}": [f"needle number {i}"] for i in range(4)})
    search = sqlite_search(db)
    cursors = {}
    for mode in ("phrase", "words", "substring"):
        page = search.search_sessions({"query": "needle", "match": mode, "limit": 1})
        cursors[mode] = page.next_cursor
        assert page.next_cursor
    for mode, cursor in cursors.items():
        for other in {"phrase", "words", "substring"} - {mode}:
            request = {"query": "needle", "match": other, "limit": 1, "cursor": cursor}
            assert code_of(lambda: search.search_sessions(request)) == "SESSION_QUERY_INVALID_CURSOR"
    # A words query ending in whitespace (no prefix) is another request.
    request = {"query": "needle ", "match": "words", "limit": 1, "cursor": cursors["words"]}
    assert code_of(lambda: search.search_sessions(request)) == "SESSION_QUERY_INVALID_CURSOR"
    assert search.search_sessions({"query": "needle", "match": "words", "limit": 1, "cursor": cursors["words"]}).items


def test_words_prefix_order_and_quoted_phrases(tmp_path: Path) -> None:
    _, db, _ = build(tmp_path, {"a": ["the sandbox backend refused"], "b": ["backend of the sandboxing layer"], "c": ["sandbox and backend apart"]})
    search = sqlite_search(db)

    def found(query: str) -> set[str]:
        return {hit.header["id"] for hit in walk(search, "sessions", {"query": query, "match": "words"})}

    assert found("backend sandbox") == {"a", "b", "c"}  # any order, the last word a prefix
    assert found("backend sandbox ") == {"a", "c"}  # trailing whitespace: a whole word
    assert found("sandb") == {"a", "b", "c"}
    assert found('"sandbox backend"') == {"a"}
    assert found('refused "sandbox backend"') == {"a"}
    assert found('"sandbox and') == {"c"}  # an unclosed quote runs to the end, as a prefix


def test_fts5_syntax_is_data_in_words_expressions() -> None:
    def tokens(text: str) -> list[bytes]:
        return [word.lower().encode() for word in re.findall(r"\w+", text)]

    assert words_expression('NEAR(a b) OR c* "d e" -f', True, tokens)[0] == '"near" "a" "b" "or" "c" "d e" "f"*'
    assert words_expression('x "y z"', True, tokens)[0] == '"x" "y z"'  # a closed quote ends the query: no prefix
    assert words_expression("* ( ) :", True, tokens)[0] == ""


@pytest.mark.parametrize("mode", ["phrase", "words", "substring"])
def test_hostile_queries_give_a_result_or_a_clean_error(tmp_path: Path, mode: str) -> None:
    _, db, _ = build(tmp_path, {"s1": ['AND OR NOT "quoted" NEAR(x y) col:umn ^start a*b {x y} + - \ufffd text']})
    search = sqlite_search(db)
    hostile = [
        "AND", "OR", "NOT", "a AND b", "NEAR(x y)", "NEAR(x y, 2)", "col:umn", "^start", "a*", "*", "{x y}: z", "+", "-x",
        '"', '""', '"unbalanced', 'a"b"c', "(", ")", "\x00", "x\x00y", "\ud800", "a\udfffb", "\ufdd0", "x" * 100_000,
        "é" * 20_000, " ".join(["w"] * 200), "\u3000needle\u2028",
    ]
    for query in hostile:
        for where in ("sessions", "events"):
            request: dict[str, Any] = {"query": query, "match": mode}
            try:
                if where == "sessions":
                    search.search_sessions(request)
                else:
                    search.search_events({**request, "sessionId": "s1"})
            except SessionQueryError as error:
                assert error.code == "SESSION_QUERY_INVALID_QUERY", (query[:20], error)


def test_people_default_words_and_a_wholly_quoted_query_is_a_phrase() -> None:
    assert people_match("frame scanner") == ("words", "frame scanner")
    assert people_match('"frame scanner"') == ("phrase", "frame scanner")
    assert people_match(' "frame scanner" ') == ("phrase", "frame scanner")
    assert people_match('"frame" "scanner"') == ("words", '"frame" "scanner"')
    assert people_match('""') == ("words", '""')


# --------------------------------------------------------------------------- boilerplate demotion

_BOILERPLATE = "Runtime context: the sandbox policy is danger-full-access; sandbox escalation is never needed; sandbox."


@pytest.fixture
def demotion_index(tmp_path: Path) -> str:
    sessions = {
        "b1": [_BOILERPLATE, "unrelated chatter"],
        "b2": [_BOILERPLATE],
        "b3": [_BOILERPLATE, "more"],
        "mix": [_BOILERPLATE, "the sandbox denied my write"],
        "own": ["sandbox failure here, in a long message about something quite specific to this session"],
        "none": ["nothing to see"],
    }
    return build(tmp_path, sessions)[1]


@pytest.mark.parametrize("accelerated", [True, False])
@pytest.mark.parametrize("mode", ["words", "substring"])
def test_boilerplate_is_demoted_never_dropped(demotion_index: str, mode: str, accelerated: bool) -> None:
    search = sqlite_search(demotion_index)
    search.open()
    search.backend._accelerated = search.backend._accelerated and accelerated
    hits = walk(search, "sessions", {"query": "sandbox", "match": mode, "limit": 2})
    order = [hit.header["id"] for hit in hits]
    assert set(order) == {"b1", "b2", "b3", "mix", "own"}  # the matching set, nothing dropped
    assert set(order[:2]) == {"mix", "own"}  # session-specific matches first
    assert order[2:] == ["b1", "b2", "b3"]  # boilerplate-only sessions after, by the usual tie-breaks
    assert "denied" in hits[order.index("mix")].best_match.snippet  # the session's own text wins over more spans
    # The phrase mode stays the reference's: the boilerplate's three spans win.
    phrase = walk(search, "sessions", {"query": "sandbox", "limit": 10})
    assert phrase[0].best_match.snippet.startswith("Runtime context")
    # Scoped searches look the text up in the whole corpus: still boilerplate.
    scoped = walk(search, "sessions", {"query": "sandbox", "match": mode, "sessionFilters": [{"kind": "id", "values": ["b2", "mix"]}]})
    assert [hit.header["id"] for hit in scoped] == ["mix", "b2"]
    assert "denied" in scoped[0].best_match.snippet
    events = walk(search, "events", {"sessionId": "mix", "query": "sandbox", "match": mode})
    assert [hit.seq for hit in events] == [2, 1]


def test_live_sessions_in_the_new_modes(demotion_index: str) -> None:
    live = InMemoryLiveSource()
    live.create(header("live-1", created_at=9), [user(0, "a live sandbox note 数据库")])
    live.create(header("own"), [user(0, "now shadowed: nothing relevant")])
    search = sqlite_search(demotion_index, live=live)
    for mode in ("words", "substring"):
        found = {hit.header["id"]: hit.live for hit in walk(search, "sessions", {"query": "sandbox", "match": mode})}
        assert found == {"b1": False, "b2": False, "b3": False, "mix": False, "live-1": True}
        events = walk(search, "events", {"sessionId": "live-1", "query": "数据库" if mode == "substring" else "live", "match": mode})
        assert [hit.seq for hit in events] == [0]


@pytest.mark.parametrize("mode", ["words", "substring"])
def test_the_accelerator_changes_no_answer_in_the_new_modes(corpora: dict[str, str], mode: str) -> None:
    db = corpora["shared"]
    fast, plain = sqlite_search(db), sqlite_search(db)
    plain.open()
    plain.backend._accelerated = False

    def answer(search: SessionSearch, query: str) -> Iterator[tuple[Any, ...]]:
        for hit in walk(search, "sessions", {"query": query, "match": mode, "limit": 7}):
            yield hit.header["id"], hit.best_match.seq, hit.best_match.snippet

    for query in ("sandbox", "sandbox denied", "read-only mode", "escal", "file policy"):
        assert list(answer(fast, query)) == list(answer(plain, query))


_ASCII = st.text(alphabet=st.sampled_from("aAbBkKsStT \t\n\x0b\x0c\r-+>:.\u212a\u017f"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(query=_ASCII.filter(lambda q: q.strip(" \t\n\x0b\x0c\r") != ""), text=_ASCII)
def test_the_ascii_shortcut_finds_exactly_what_the_filter_pattern_finds(query: str, text: str) -> None:
    from readmodel.search.requests import normalize_query

    try:
        normalised = normalize_query(query)
    except SessionQueryError:
        return
    compiled = substring_module.Substring(normalised)
    exact = compile_text_filter(query)
    assert compiled.count(text) == len(exact.findall(text))
    found = exact.search(text)
    expected = text if found is None else text[: found.start()] + "\ufdd0" + found.group(0) + "\ufdd1" + text[found.end() :]
    assert compiled.mark_first(text) == expected


_MIXED = st.text(alphabet=st.sampled_from("aAbBiIkKsStT-+:.\u212a\u017f\u0130\u0131\u00e9\u00df\u03a3\u5e93 \n"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(query=st.text(alphabet=st.sampled_from("aAbBiIkKsStT-+:."), min_size=1, max_size=4), text=_MIXED)
def test_an_ascii_literal_counts_in_any_text_what_the_filter_pattern_finds(query: str, text: str) -> None:
    """One ASCII part (no whitespace) is counted on bytes (as SQL hands a text over, or
    encoded) and found by byte offset; non-ASCII texts (dotted I, Kelvin sign, long s, sharp s,
    sigma, CJK) give the exact pattern's count and first occurrence."""
    compiled, exact = substring_module.Substring(query), compile_text_filter(query)
    assert compiled.count(text) == compiled.count_utf8(text.encode()) == len(exact.findall(text))
    found = exact.search(text)
    expected = text if found is None else text[: found.start()] + "\ufdd0" + found.group(0) + "\ufdd1" + text[found.end() :]
    assert compiled.mark_first(text) == expected
