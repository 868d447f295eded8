"""Search against a real index: ranking, live overlay, cursors, budgets, hostile queries."""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from indexer.writer import LogWriter
from readmodel.store.database import open_writer
from readmodel.core.errors import SessionQueryError
from readmodel.live import InMemoryLiveSource
from readmodel.search.config import SearchConfig
from readmodel.search.engine import SessionSearch
from readmodel.search.sqlite import sqlite_search
from tests.logfactory import ev, header, turn_end, turn_start, user


def write(root: Path, session_id: str, texts: list[str], created: int = 1, **extra: Any) -> LogWriter:
    events = [turn_start(0)]
    for text in texts:
        events.append(user(len(events), text))
    events.append(turn_end(len(events)))
    hdr = header(session_id, created_at=created, **extra)
    writer = LogWriter.in_root(root, hdr)
    writer.create(hdr, events)
    return writer


def build(tmp: Path, sessions: dict[str, list[str]]) -> tuple[Path, str, Reconciler]:
    root = tmp / "root"
    root.mkdir(exist_ok=True)
    for session_id, texts in sessions.items():
        write(root, session_id, texts)
    db = str(tmp / "index.db")
    reconciler = Reconciler(open_writer(db), root, Compression.ZSTD, settle_seconds=0)
    reconciler.reconcile()
    return root, db, reconciler


def ids(page: Any) -> list[str]:
    return [hit.header["id"] for hit in page.items]


def code_of(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SessionQueryError) as caught:
        call()
    return caught.value.code


def test_phrases_are_literal_and_ranked_by_spans_then_length_then_id(tmp_path: Path) -> None:
    _, db, _ = build(
        tmp_path,
        {"b": ["alpha beta"], "d": ["alpha beta"], "a": ["😀😀 alpha beta BRAID 😀😀"], "c": ["alpha middle beta"], "e": ["needle"], "f": ['say "needle" twice']},
    )
    search = sqlite_search(db, config=SearchConfig(snippet_chars=5))
    page = search.search_sessions({"query": "alpha beta"})
    assert ids(page) == ["b", "d", "a"]
    assert all(len(hit.best_match.snippet) <= 5 for hit in page.items)
    assert search.search_sessions({"query": "AI"}).items == []
    assert ids(search.search_sessions({"query": 'say "needle"'})) == ["f"]
    assert search.search_sessions({"query": "*"}).items == []
    assert ids(search.search_sessions({"query": "needle OR absent"})) == []


def test_more_spans_rank_first_and_diacritics_fold(tmp_path: Path) -> None:
    _, db, _ = build(tmp_path, {"once": ["needle and more words here"], "twice": ["needle, needle and more words here at length"], "accent": ["long long long—café,\nnext value"]})
    search = sqlite_search(db, config=SearchConfig(snippet_chars=14))
    assert ids(search.search_sessions({"query": "needle"})) == ["twice", "once"]
    hit = search.search_sessions({"query": "CAFE"}).items[0]
    assert "café" in hit.best_match.snippet and "—" in hit.best_match.snippet and "\n" not in hit.best_match.snippet
    assert len(hit.best_match.snippet) <= 14


def test_filters_apply_before_the_best_event_is_chosen(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    hdr = header("s", created_at=10)
    events = [
        user(0, "needle needle original"),
        ev("compaction/start", 1, {"compactionId": "k", "turn": None}),
        user(2, "needle summary", surface_op={"op": "replace", "start": 0, "end": 0}, sources=[1, 0]),
    ]
    LogWriter.in_root(root, hdr).create(hdr, events)
    db = str(tmp_path / "index.db")
    Reconciler(open_writer(db), root, Compression.ZSTD, settle_seconds=0).reconcile()
    search = sqlite_search(db)
    best = search.search_sessions({"query": "needle"}).items[0].best_match
    assert (best.seq, best.surface) == (0, "shadowed")
    current_only = search.search_sessions({"query": "needle", "eventFilters": [{"kind": "surface", "values": ["current"]}]})
    assert (current_only.items[0].best_match.seq, current_only.items[0].best_match.surface) == (2, "current")
    events_page = search.search_events({"sessionId": "s", "query": "needle", "filters": [{"kind": "seq", "from": 1}, {"kind": "type", "values": ["user/message"]}]})
    assert [hit.seq for hit in events_page.items] == [2]
    assert events_page.session["id"] == "s"


def test_cursors_page_to_the_end_and_are_bound_to_request_and_corpus(tmp_path: Path) -> None:
    root, db, reconciler = build(tmp_path, {"x": ["needle one", "needle two", "needle three"], "y": ["needle"]})
    search = sqlite_search(db)
    seen = []
    page = search.search_events({"sessionId": "x", "query": "needle", "limit": 1})
    while True:
        seen.extend(hit.seq for hit in page.items)
        if page.next_cursor is msgspec.UNSET:
            break
        page = search.search_events({"sessionId": "x", "query": "needle", "limit": 1, "cursor": page.next_cursor})
    assert sorted(seen) == [1, 2, 3]
    first = search.search_sessions({"query": "needle", "limit": 1})
    events_cursor = search.search_events({"sessionId": "x", "query": "needle", "limit": 1}).next_cursor
    assert isinstance(first.next_cursor, str) and isinstance(events_cursor, str)
    # Another process of the same index accepts them.
    assert sqlite_search(db).search_sessions({"query": "needle", "limit": 1, "cursor": first.next_cursor}).items
    # A different request, or a forged one, is invalid; a different scope too.
    assert code_of(lambda: search.search_sessions({"query": "other", "limit": 1, "cursor": first.next_cursor})) == "SESSION_QUERY_INVALID_CURSOR"
    assert code_of(lambda: search.search_sessions({"query": "needle", "limit": 2, "cursor": first.next_cursor})) == "SESSION_QUERY_INVALID_CURSOR"
    assert code_of(lambda: search.search_sessions({"query": "needle", "limit": 1, "cursor": events_cursor})) == "SESSION_QUERY_INVALID_CURSOR"
    body, _, signature = first.next_cursor.partition(".")
    forged_payload = msgspec.json.decode(__import__("base64").urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    forged_payload["offset"] = 10**100
    import base64

    forged = base64.urlsafe_b64encode(msgspec.json.encode(forged_payload)).rstrip(b"=").decode() + "." + signature
    assert code_of(lambda: search.search_sessions({"query": "needle", "limit": 1, "cursor": forged})) == "SESSION_QUERY_INVALID_CURSOR"
    assert code_of(lambda: search.search_sessions({"query": "needle", "cursor": "not-json"})) == "SESSION_QUERY_INVALID_CURSOR"
    # An unrelated session changes: the cross-session cursor is stale, the within-session one is not.
    write(root, "z", ["unrelated"])
    reconciler.reconcile()
    assert code_of(lambda: search.search_sessions({"query": "needle", "limit": 1, "cursor": first.next_cursor})) == "SESSION_QUERY_STALE_CURSOR"
    assert search.search_events({"sessionId": "x", "query": "needle", "limit": 1, "cursor": events_cursor}).items
    # The target itself changes: now the within-session cursor is stale too; a changed request stays invalid.
    LogWriter.in_root(root, header("x")).append([turn_start(5, 2), user(6, "needle four")])
    reconciler.reconcile()
    assert code_of(lambda: search.search_events({"sessionId": "x", "query": "needle", "limit": 1, "cursor": events_cursor})) == "SESSION_QUERY_STALE_CURSOR"
    assert code_of(lambda: search.search_events({"sessionId": "x", "query": "other", "limit": 1, "cursor": events_cursor})) == "SESSION_QUERY_INVALID_CURSOR"


def test_a_cursor_from_another_index_is_invalid(tmp_path: Path) -> None:
    _, db_one, _ = build(tmp_path / "one", {"x": ["needle", "needle"]}) if (tmp_path / "one").mkdir() is None else (None, "", None)
    _, db_two, _ = build(tmp_path / "two", {"x": ["needle", "needle"]}) if (tmp_path / "two").mkdir() is None else (None, "", None)
    cursor = sqlite_search(db_one).search_events({"sessionId": "x", "query": "needle", "limit": 1}).next_cursor
    assert code_of(lambda: sqlite_search(db_two).search_events({"sessionId": "x", "query": "needle", "limit": 1, "cursor": cursor})) == "SESSION_QUERY_INVALID_CURSOR"


def test_live_sessions_shadow_the_index_and_rank_with_it(tmp_path: Path) -> None:
    _, db, _ = build(tmp_path, {"z-persisted": ["needle needle"], **{f"filler-{i}": ["needle"] for i in range(12)}})
    live = InMemoryLiveSource()
    live.create(header("a-live", created_at=5, seedLength=1, delegationDepth=2, agentPreset="minimal"), [user(0, "needle needle")])
    search = sqlite_search(db, live=live)
    page = search.search_sessions({"query": "needle", "sessionFilters": [{"kind": "id", "values": ["a-live", "z-persisted"]}]})
    assert ids(page) == ["a-live", "z-persisted"]
    assert (page.items[0].live, page.items[0].persisted, page.items[1].live, page.items[1].persisted) == (True, False, False, True)
    assert page.items[0].header["agentPreset"] == "minimal"
    # A live owner of a persisted id shadows its persisted text and reports both availabilities.
    live.create(header("z-persisted"), [user(0, "shadowing text")])
    hits = search.search_sessions({"query": "needle", "sessionFilters": [{"kind": "id", "values": ["z-persisted"]}]})
    assert hits.items == []
    owned = search.search_sessions({"query": "shadowing"}).items[0]
    assert (owned.live, owned.persisted) == (True, True)
    assert search.search_events({"sessionId": "z-persisted", "query": "shadowing"}).items[0].seq == 0
    cursor = search.search_sessions({"query": "needle", "limit": 1}).next_cursor
    live.create(header("another-live"), [user(0, "unrelated")])
    assert code_of(lambda: search.search_sessions({"query": "needle", "limit": 1, "cursor": cursor})) == "SESSION_QUERY_STALE_CURSOR"


def test_disabled_search_and_unknown_targets(tmp_path: Path) -> None:
    _, db, _ = build(tmp_path, {"x": ["needle"]})
    disabled = sqlite_search(db, config=SearchConfig(open_at="never"))
    assert code_of(lambda: disabled.search_sessions({"query": ""})) == "SESSION_QUERY_SEARCH_DISABLED"
    assert code_of(lambda: disabled.search_events({"sessionId": 1, "query": 1})) == "SESSION_QUERY_SEARCH_DISABLED"
    assert code_of(lambda: sqlite_search(db).search_events({"sessionId": "nope", "query": "needle"})) == "SESSION_QUERY_SESSION_NOT_FOUND"
    empty = sqlite_search(db).search_events({"sessionId": "x", "query": "absent"})
    assert empty.items == [] and empty.session["id"] == "x" and empty.next_cursor is msgspec.UNSET


def test_filter_budgets_and_binding_limits(tmp_path: Path) -> None:
    _, db, _ = build(tmp_path, {"x": ["needle"]})
    search = sqlite_search(db)
    cwd_clause = {"kind": "cwd", "values": ["/work/project", None]}
    assert ids(search.search_sessions({"query": "needle", "sessionFilters": [cwd_clause] * 14})) == ["x"]
    assert search.search_events({"sessionId": "x", "query": "needle", "filters": [{"kind": "type", "values": ["user/message"]}] * 13}).items
    cases = [
        {"query": "needle", "sessionFilters": [cwd_clause] * 15},
        {"query": "needle", "sessionFilters": [cwd_clause] * 7, "eventFilters": [{"kind": "seq", "from": 0}] * 8},
        {"query": "needle", "sessionFilters": [{"kind": "id", "values": ["x"] * 16383}], "eventFilters": [{"kind": "type", "values": ["t"] * 16383}]},
        {"query": "needle", "sessionFilters": [{"kind": "id", "values": ["x"] * 125000}]},
    ]
    for request in cases:
        assert code_of(lambda request=request: search.search_sessions(request)) == "SESSION_QUERY_INVALID_FILTER"
    assert code_of(lambda: search.search_events({"sessionId": "x", "query": "needle", "filters": [{"kind": "seq", "from": 0}] * 14})) == "SESSION_QUERY_INVALID_FILTER"
    many = {"sessionId": "x", "query": "needle", "filters": [{"kind": "type", "values": ["t"] * 16383}, {"kind": "surface", "values": ["current"] * 16383}]}
    assert code_of(lambda: search.search_events(many)) == "SESSION_QUERY_INVALID_FILTER"


WORDS = ["needle", "alpha", "beta", "café", "naïve", "x1", "日本"]
OPERATORS = ["OR", "AND", "NOT", "NEAR", "*", '"', "(", ")", "-", "^", ":", "text:", "{", "}", "+", "\x01", "\t", "\u2028", "\ufdd0", "'", "\\", "%", "_"]


@pytest.fixture(scope="module")
def hostile_index(tmp_path_factory: pytest.TempPathFactory) -> SessionSearch:
    tmp = tmp_path_factory.mktemp("hostile")
    texts = ["needle alpha beta", "alpha needle", "café naïve x1", "日本 needle", "OR AND NOT NEAR text: needle", "beta"]
    _, db, _ = build(tmp, {f"s{i}": [text] for i, text in enumerate(texts)})
    return sqlite_search(db)


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@given(parts=st.lists(st.one_of(st.sampled_from(WORDS + OPERATORS), st.text(max_size=3)), min_size=1, max_size=6))
def test_hostile_queries_never_reach_fts_syntax(hostile_index: SessionSearch, parts: list[str]) -> None:
    query = " ".join(parts)
    try:
        page = hostile_index.search_sessions({"query": query})
    except SessionQueryError as exc:
        assert exc.code == "SESSION_QUERY_INVALID_QUERY"
        return
    words = [w for w in re.findall(r"[^\W_]+", _fold(query)) if w]  # unicode61 token characters
    for hit in page.items:
        document = _fold(hit.best_match.snippet)
        for word in words:
            assert word in document, (query, hit.best_match.snippet)


def test_a_second_process_sees_the_same_results(tmp_path: Path) -> None:
    _, db, _ = build(tmp_path, {"x": ["needle here"], "y": ["needle there"]})
    code = (
        "import sys, msgspec; from readmodel.search.sqlite import sqlite_search; "
        f"p = sqlite_search({db!r}).search_sessions({{'query': 'needle', 'limit': 1}}); "
        "sys.stdout.write(p.next_cursor)"
    )
    cursor = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert ids(sqlite_search(db).search_sessions({"query": "needle", "limit": 1, "cursor": cursor})) in (["x"], ["y"])


def test_an_aborted_signal_cancels_a_search_even_mid_statement(tmp_path: Path) -> None:
    from readmodel.core.cancel import AbortController

    _, db, _ = build(tmp_path, {f"s{i}": [" ".join(["needle"] * 200)] * 3 for i in range(40)})
    search = sqlite_search(db)
    controller = AbortController()
    controller.abort()
    with pytest.raises(SessionQueryError) as before:
        search.search_sessions({"query": "needle"}, signal=controller.signal)
    assert before.value.code == "SESSION_QUERY_ABORTED"

    class FlipsDuringTheQuery:
        """A signal that becomes aborted after the statement has started running."""

        def __init__(self) -> None:
            self.checks = 0

        @property
        def aborted(self) -> bool:
            self.checks += 1
            return self.checks > 2

        reason = None

    flipping = FlipsDuringTheQuery()
    with pytest.raises(SessionQueryError) as during:
        search.search_sessions({"query": "needle needle"}, signal=flipping)
    assert during.value.code == "SESSION_QUERY_ABORTED" and flipping.checks > 2
    # The connection stays usable afterwards.
    assert len(search.search_sessions({"query": "needle"}).items) == 20


def test_the_strongest_event_per_session_follows_every_tie_break(tmp_path: Path) -> None:
    """Same span count and length: newer time wins, negative times included; then higher seq."""
    root = tmp_path / "root"
    root.mkdir()
    hdr = header("ties")
    events = [dict(user(0, "needle aa"), time=-5), dict(user(1, "needle bb"), time=3), dict(user(2, "needle cc"), time=3), dict(user(3, "needle dd"), time=-9)]
    LogWriter.in_root(root, hdr).create(hdr, events)
    db = str(tmp_path / "index.db")
    Reconciler(open_writer(db), root, Compression.ZSTD, settle_seconds=0).reconcile()
    search = sqlite_search(db)
    assert search.search_sessions({"query": "needle"}).items[0].best_match.seq == 2
    assert [hit.seq for hit in search.search_events({"sessionId": "ties", "query": "needle"}).items] == [2, 1, 0, 3]


@pytest.mark.parametrize("cache_rows", [500, 7])
def test_cached_pages_equal_fresh_rankings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_rows: int) -> None:
    import readmodel.search.sqlite as search_module

    monkeypatch.setattr(search_module, "RANKED_CACHE_ROWS", cache_rows)
    _, db, _ = build(tmp_path, {f"s{i:02}": [" ".join(["needle"] * (1 + i % 4)) + f" filler {i}"] * (1 + i % 3) for i in range(25)})
    cached = sqlite_search(db)
    pages: list[list[str]] = []
    request: dict[str, Any] = {"query": "needle", "limit": 3}
    while True:
        page = cached.search_sessions(request)
        fresh = sqlite_search(db).search_sessions(request)  # an empty cache ranks from scratch
        assert page == fresh
        pages.append(ids(page))
        if page.next_cursor is msgspec.UNSET:
            break
        request = {"query": "needle", "limit": 3, "cursor": page.next_cursor}
    flat = [sid for page in pages for sid in page]
    assert len(flat) == len(set(flat)) == 25
    events = cached.search_events({"sessionId": "s05", "query": "needle", "limit": 1})
    assert events == sqlite_search(db).search_events({"sessionId": "s05", "query": "needle", "limit": 1})
