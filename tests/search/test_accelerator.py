"""The C accelerator (``readmodel.search.accelerator``) answers exactly as the paths it replaces.

* ``sessionq_spans`` equals the number of spans ``highlight()`` marks, and
  ``sessionq_first_span`` the UTF-8 offset of its first marker, for arbitrary
  documents and phrases (overlapping instances, diacritics, CJK, separators);
* snippets cut from the text after the first span equal whole-document snippets;
* the pruned rankings (cross-session and within one session, with a live
  overlay) equal the unpruned pure-SQL rankings, page by page.
"""

from __future__ import annotations

import os
import random
import sqlite3
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from readmodel.search import accelerator as ftsaux
from readmodel.search import phrasetexts
from readmodel.search import sqlite as search_module
from readmodel.live import InMemoryLiveSource
from readmodel.search.config import SearchConfig
from readmodel.search.requests import match_expression
from readmodel.search.snippets import END_MARK, START_MARK, make_snippet
from readmodel.search.engine import SessionSearch
from readmodel.search.sqlite import sqlite_search
from tests.logfactory import header, turn_end, turn_start, user
from tests.search.test_highlight_shortcuts import _WORDS, _documents, _index_with
from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.store.database import open_writer
from tests.search.test_search_engine import write
from tests import indexdb

pytestmark = pytest.mark.skipif(
    os.environ.get("SESSIONQ_FTSAUX") == "0", reason="the C accelerator is disabled by SESSIONQ_FTSAUX=0"
)


def test_the_accelerator_is_built() -> None:
    """scripts/bootstrap builds it (gcc and libsqlite3-dev); CI must not silently lose it."""
    assert ftsaux.available(), "readmodel.search._ftsaux is missing: run scripts/bootstrap with gcc and libsqlite3-dev installed"


def test_a_closed_connection_is_refused() -> None:
    conn = indexdb.connect(":memory:")
    conn.close()
    with pytest.raises(ValueError):
        ftsaux.install(conn)
    assert ftsaux.install("not a connection") is False  # type: ignore[arg-type]


@settings(deadline=None)
@given(
    documents=st.lists(_documents(), min_size=1, max_size=8),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join),
    before=st.integers(0, 40),
    after=st.integers(0, 80),
)
def test_span_counts_and_snippet_sources_equal_highlight(documents: list[str], query: str, before: int, after: int) -> None:
    conn = _index_with(documents)
    assert ftsaux.install(conn)
    rows = conn.execute(
        'SELECT highlight("texts_fts", 0, ?, ?), sessionq_spans("texts_fts"), '
        'sessionq_snippet_source("texts_fts", ?, ?, ?, ?) FROM "texts_fts" WHERE "texts_fts" MATCH ?',
        (START_MARK, END_MARK, START_MARK, END_MARK, before, after, match_expression(query)),
    ).fetchall()
    for whole, spans, source in rows:
        assert spans == whole.count(START_MARK) > 0
        # flags, then the text before the first span (cut to `before` characters), then
        # highlight()'s output from the first span on, for at least `after` bytes of text.
        flags, body = ord(source[0]) - ord("0"), source[1:]
        first = whole.index(START_MARK)
        head = body[: body.index(START_MARK)]
        assert whole[first - len(head) : first] == head and len(head) == min(before, first)
        assert bool(flags & 1) == (len(head) < first)
        window = body[len(head) :]
        assert whole[first:].startswith(window) and window.count(START_MARK) == window.count(END_MARK)
        assert bool(flags & 2) == (window == whole[first:])
        plain = window.replace(START_MARK, "").replace(END_MARK, "")
        assert flags & 2 or len(plain.encode()) > after


_FILLER = st.lists(st.sampled_from(["x1 ", "日本語 ", "\n\n", "é ", "word-", "  "]), max_size=1500).map("".join)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(head=_FILLER, body=_documents(), query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join), width=st.integers(1, 60))
def test_snippets_after_the_first_span_equal_whole_document_snippets(head: str, body: str, query: str, width: int) -> None:
    search = sqlite_search(None, config=SearchConfig(snippet_chars=width))
    conn = search.backend._connection()
    assert search.backend._accelerated
    text = head + body
    docid = (1 << 32) | 7
    conn.execute(
        'INSERT INTO "documents" ("docid", "sid", "seq", "type", "time", "surface", "length", "text") VALUES (?, 1, 7, ?, 0, 1, ?, ?)',
        (docid, "user/message", len(text), text),
    )
    indexdb.index_text(conn, docid)
    phrase = match_expression(query)
    whole = conn.execute(
        'SELECT highlight("texts_fts", 0, ?, ?) FROM "texts_fts" WHERE "texts_fts" MATCH ?', (START_MARK, END_MARK, phrase)
    ).fetchone()
    if whole is None:
        return
    assert make_snippet(search.backend._marked_document(conn, docid, phrase), width) == make_snippet(whole[0], width)


def test_huge_snippet_widths_take_the_whole_text() -> None:
    """Windows wider than a C int are clamped: the whole text, never a wrapped-around cut."""
    width = 3 * 2**31
    search = sqlite_search(None, config=SearchConfig(snippet_chars=width))
    conn = search.backend._connection()
    text = "lead " * 50 + "needle " + "tail " * 50
    docid = (1 << 32) | 1
    conn.execute(
        'INSERT INTO "documents" ("docid", "sid", "seq", "type", "time", "surface", "length", "text") VALUES (?, 1, 1, ?, 0, 1, ?, ?)',
        (docid, "user/message", len(text), text),
    )
    indexdb.index_text(conn, docid)
    source = conn.execute(
        'SELECT sessionq_snippet_source("texts_fts", ?, ?, ?, ?) FROM "texts_fts" WHERE "texts_fts" MATCH ?',
        (START_MARK, END_MARK, width, width, match_expression("needle")),
    ).fetchone()[0]
    assert source == "2" + text.replace("needle", START_MARK + "needle" + END_MARK)
    assert make_snippet(search.backend._marked_document(conn, docid, match_expression("needle")), width) == text.strip()


# -- pruned rankings ------------------------------------------------------------------------

_VOCABULARY = ["needle", "hay", "needle needle", "hay needle", "stack", "needle hay needle"]


@pytest.fixture(scope="module")
def tie_heavy_index(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Sessions whose strongest events tie on spans and length in many ways, in three
    workspaces (one session without a cwd), with several event types."""
    rng = random.Random(20261130)
    base = tmp_path_factory.mktemp("pruned")
    root = base / "root"
    root.mkdir()
    for number in range(40):
        texts = [" ".join(rng.choices(_VOCABULARY, k=rng.randint(1, 5))) for _ in range(1 + number % 9)]
        cwd = None if number == 7 else f"/work/w{number % 3}"
        write(root, f"s{number % 7}-{number:02}", texts, created=1 + number % 6, cwd=cwd)
    db = str(base / "index.db")
    Reconciler(open_writer(db), root, Compression.ZSTD, settle_seconds=0).reconcile()
    return db


def _pages(search: SessionSearch, method: str, request: dict[str, Any]) -> list[Any]:
    pages = []
    while True:
        page = getattr(search, method)(request)
        pages.append(msgspec.to_builtins(page))
        if page.next_cursor is msgspec.UNSET:
            return pages
        request = dict(request, cursor=page.next_cursor)


def _pair(db: str, live: InMemoryLiveSource | None = None) -> tuple[SessionSearch, SessionSearch]:
    fast, plain = sqlite_search(db, live=live), sqlite_search(db, live=live)
    fast.backend._connection()
    plain.backend._connection()
    plain.backend._accelerated = False
    assert fast.backend._accelerated
    return fast, plain


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.sampled_from(_VOCABULARY + ["hay hay", "stack needle"]), limit=st.integers(1, 12), overlay=st.booleans())
def test_pruned_rankings_equal_unpruned_ones(tie_heavy_index: str, query: str, limit: int, overlay: bool) -> None:
    live = None
    if overlay:  # a live session shadowing a persisted one, and a live-only one
        live = InMemoryLiveSource()
        shadow = header("s3-03", created_at=5)
        live.create(shadow, [turn_start(0), user(1, "needle needle needle stack"), turn_end(2)])
        fresh = header("live-only", created_at=9)
        live.create(fresh, [turn_start(0), user(1, "hay needle"), turn_end(2)])
    fast, plain = _pair(tie_heavy_index, live)
    with pytest.MonkeyPatch.context() as patch:
        # Rank only what each page needs, so every page prunes at its own cut.
        patch.setattr(search_module, "RANKED_FIRST_ROWS", 1)
        patch.setattr(phrasetexts, "FIRST_BATCH", 1)  # one class of texts per statement
        request = {"query": query, "limit": limit}
        assert _pages(fast, "search_sessions", request) == _pages(plain, "search_sessions", request)
        for session_id in ("s0-00", "s4-11", "s3-03", "s1-29"):
            events = {"sessionId": session_id, "query": query, "limit": limit}
            assert _pages(fast, "search_events", events) == _pages(plain, "search_events", events)


_SESSION_FILTERS = st.lists(
    st.one_of(
        st.builds(lambda values: {"kind": "cwd", "values": values}, st.lists(st.sampled_from(["/work/w0", "/work/w1", None]), max_size=2)),
        st.builds(lambda values: {"kind": "id", "values": values}, st.lists(st.sampled_from(["s0-00", "s3-03", "s1-29", "s4-11", "live-only"]), min_size=1, max_size=3)),
        st.builds(lambda low: {"kind": "created-at", "from": low}, st.integers(1, 6)),
        st.builds(lambda values: {"kind": "availability", "values": values}, st.sampled_from([["live"], ["persisted"], ["live", "persisted"]])),
    ),
    max_size=2,
)
_EVENT_FILTERS = st.lists(
    st.one_of(
        st.builds(lambda low: {"kind": "seq", "from": low}, st.integers(0, 6)),
        st.builds(lambda high: {"kind": "seq", "to": high}, st.integers(0, 6)),
        st.builds(lambda values: {"kind": "type", "values": values}, st.lists(st.sampled_from(["user/message", "turn/start"]), min_size=1, max_size=2)),
        st.builds(lambda values: {"kind": "surface", "values": values}, st.lists(st.sampled_from(["current", "log-only"]), min_size=1, max_size=2)),
    ),
    max_size=2,
)


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.sampled_from(["needle", "hay needle", "stack"]),
    limit=st.integers(1, 8),
    session_filters=_SESSION_FILTERS,
    event_filters=_EVENT_FILTERS,
    overlay=st.booleans(),
)
def test_filtered_pruned_rankings_equal_unpruned_ones(
    tie_heavy_index: str, query: str, limit: int, session_filters: list[Any], event_filters: list[Any], overlay: bool
) -> None:
    live = None
    if overlay:
        live = InMemoryLiveSource()
        live.create(header("s3-03", created_at=5, cwd="/work/w0"), [turn_start(0), user(1, "needle needle stack"), turn_end(2)])
        live.create(header("live-only", created_at=2, cwd="/work/w1"), [turn_start(0), user(1, "hay needle"), turn_end(2)])
    fast, plain = _pair(tie_heavy_index, live)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_module, "RANKED_FIRST_ROWS", 1)
        patch.setattr(phrasetexts, "FIRST_BATCH", 1)  # one class of texts per statement
        request = {"query": query, "limit": limit, "sessionFilters": session_filters, "eventFilters": event_filters}
        assert _pages(fast, "search_sessions", request) == _pages(plain, "search_sessions", request)
        events = {"sessionId": "s4-11", "query": query, "limit": limit, "filters": event_filters}
        assert _pages(fast, "search_events", events) == _pages(plain, "search_events", events)


def test_session_filters_read_the_covering_index(tie_heavy_index: str) -> None:
    """A workspace-scoped search picks its eligible sessions from ``sessions_filters`` (schema 0005)."""
    fast, _ = _pair(tie_heavy_index)
    conn = fast.backend._connection()
    scope = search_module.session_where([{"kind": "cwd", "values": ["/work/w0"]}])
    matches = fast.backend._phrase_matches(conn, [b"needle"], '"needle"', sessions=scope)
    assert matches.texts is not None
    plan = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + matches.texts, matches.texts_args))
    assert "COVERING INDEX sessions_filters" in plan, plan
