"""``sessionq browse`` keeps the first pages it showed per search generation and fetches the
one-character queries ahead: a kept page is shown again without a search, and never once the
index has changed (a session indexed after its query was kept shows up).

The scenarios take the index's ``--db`` and a function that indexes the log root again, so the
PostgreSQL tests (tests/postgresql/test_browse.py) run them on a PostgreSQL index too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from readmodel.cli.browse.app import BrowserApp
from readmodel.cli.browse.cache import PREFETCHED, PageCache, Prefetcher, page_key
from readmodel.cli.browse.rows import Found, find
from readmodel.core.cancel import AbortController
from readmodel.query import SessionQuery
from tests.cli.test_browse import ALPHA, ALPHA_OLD, BETA, _session, drive, listed, type_query, until
from tests.query.support import build_index

NEW = "44444444-cccc-4ccc-8ccc-000000000004"


class CountingSearches:
    """The real engine, counting the cross-session searches asked of it, by query."""

    def __init__(self, engine: SessionQuery) -> None:
        self._engine = engine
        self.searched: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def search_sessions(self, request: Any, signal: Any = None) -> Any:
        self.searched.append(request["query"])
        return self._engine.search_sessions(request, signal)


def write_sessions(root: Path) -> None:
    """The three sessions of tests/cli/test_browse.py (the same words, fewer turns)."""
    _session(root, ALPHA, 3_000, "/work/alpha", [("please frobnicate the widget", "on it"), ("frobnicate once more", "done")])
    _session(root, ALPHA_OLD, 1_000, "/work/alpha", [("an older delta session", "ok")])
    _session(root, BETA, 2_000, "/work/beta", [("gamma rays in beta", "yes gamma")])


async def erase(app: BrowserApp, pilot: Any) -> None:
    for _ in app.query_one("#query").value:
        await pilot.press("backspace")
    await until(pilot, lambda: app.shown_query == "")


def a_session_indexed_after_its_query_was_kept_shows_up(db: str, root: Path, reindex: Callable[[], None]) -> None:
    """Type ``gamma`` (kept), erase, index a new session saying gamma, type ``gamma`` again."""
    engine = CountingSearches(SessionQuery.open(db))
    seen: list[Any] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        await type_query(app, pilot, "gamma")
        seen.append(listed(app))
        await erase(app, pilot)
        await type_query(app, pilot, "gamma")  # the same generation: the kept page, no search
        seen.append((listed(app), engine.searched.count("gamma")))
        await erase(app, pilot)
        _session(root, NEW, 4_000, "/work/gamma", [("gamma once again", "sure")])
        reindex()
        await type_query(app, pilot, "gamma")
        seen.append((sorted(listed(app)), engine.searched.count("gamma")))

    drive(db, scenario, engine)  # type: ignore[arg-type]
    assert seen[0] == [("session", BETA)]
    assert seen[1] == ([("session", BETA)], 1)
    assert seen[2] == (sorted([("session", BETA), ("session", NEW)]), 2)


def one_character_queries_are_fetched_ahead_while_nobody_types(db: str) -> None:
    engine = CountingSearches(SessionQuery.open(db))
    seen: list[Any] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        await until(pilot, app.prefetcher.done.is_set)
        seen.append((len(app.cache), set(PREFETCHED) <= set(engine.searched)))
        searches = len(engine.searched)
        await type_query(app, pilot, "g")  # kept ahead: shown without a search of its own
        seen.append((listed(app), len(engine.searched) - searches))
        await erase(app, pilot)
        await type_query(app, pilot, "G")  # the index folds ASCII case: the page of "g" serves it
        seen.append((listed(app), len(engine.searched) - searches))

    drive(db, scenario, engine)  # type: ignore[arg-type]
    assert seen == [(len(PREFETCHED), True), ([("session", BETA)], 0), ([("session", BETA)], 0)]


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    root.mkdir()
    write_sessions(root)
    return root, build_index(root, tmp_path / "index.db")


def test_a_session_indexed_after_its_query_was_kept_shows_up(corpus: tuple[Path, Path]) -> None:
    root, db = corpus
    a_session_indexed_after_its_query_was_kept_shows_up(str(db), root, lambda: build_index(root, db) and None)


def test_one_character_queries_are_fetched_ahead_while_nobody_types(corpus: tuple[Path, Path]) -> None:
    one_character_queries_are_fetched_ahead_while_nobody_types(str(corpus[1]))


@pytest.mark.parametrize("query", ["G", "Gamma", "FROBNICATE the", "Delta S", "Zz"])
def test_an_ascii_query_finds_what_its_lower_case_finds_so_they_share_a_page(corpus: tuple[Path, Path], query: str) -> None:
    """What lets :func:`page_key` fold ASCII case: the engine's answers are equal."""
    with SessionQuery.open(str(corpus[1])) as engine:
        assert find(engine, query) == find(engine, query.lower())
    assert page_key(query) == page_key(query.lower()) and page_key("É") == "É"


def _rows(name: str) -> Found:
    return Found((), {name: None})


def test_the_cache_keeps_one_generation_and_at_most_its_size_least_recently_used_first() -> None:
    cache = PageCache(size=2)
    cache.put("a", "g1", _rows("a"))
    cache.put("b", "g1", _rows("bb"))
    assert cache.get("a", "g1") == _rows("a")  # "a" is now the most recent
    cache.put("c", "g1", _rows("ccc"))
    assert (cache.get("b", "g1"), cache.get("a", "g1") is not None, len(cache)) == (None, True, 2)
    assert cache.get("a", "g2") is None  # another generation: never the old page
    cache.put("d", "g2", _rows("d"))
    assert (len(cache), cache.get("a", "g1"), cache.has("d", "g2")) == (1, None, True)


class ChangingIndex:
    """An engine whose generation changes on every read, its searches counted."""

    def __init__(self) -> None:
        self.reads = 0
        self.searches = 0

    def search_generation(self, signal: Any = None) -> str:
        self.reads += 1
        return str(self.reads)

    def search_sessions(self, request: Any, signal: Any = None) -> Any:
        self.searches += 1
        return type("Page", (), {"items": [], "next_cursor": None})()

    def session_summaries(self, ids: Any) -> dict[str, Any]:
        return {}


def test_an_index_that_keeps_changing_is_fetched_ahead_at_most_once_per_interval() -> None:
    prefetcher = Prefetcher(PageCache(), queries="ab", every=3600)
    engine = ChangingIndex()
    prefetcher.run(engine, AbortController().signal)
    assert (engine.searches, prefetcher.done.is_set()) == (2, True)
    prefetcher.run(engine, AbortController().signal)  # the generation moved: not again so soon
    assert engine.searches == 2


def test_an_aborted_prefetch_stops_at_once() -> None:
    prefetcher = Prefetcher(PageCache(), queries="ab")
    controller = AbortController()
    controller.abort()

    class Aborting(ChangingIndex):
        def search_generation(self, signal: Any = None) -> str:
            signal.throw_if_aborted()
            return super().search_generation(signal)

    engine = Aborting()
    with pytest.raises(Exception):
        prefetcher.run(engine, controller.signal)
    assert (engine.searches, prefetcher.done.is_set()) == (0, False)


def test_a_row_is_painted_one_screen_line_per_line_cut_with_an_ellipsis_at_the_width() -> None:
    from rich.text import Text
    from textual.style import Style

    from readmodel.cli.browse.lines import Lines

    lines = Lines([Text("title " * 40, style="bold"), Text("short")])
    strips = lines.painted(50, Style(), 1, 1, {"option": 3})
    assert [strip.cell_length for strip in strips] == [50, 50]
    assert strips[0].text.startswith(" title title") and strips[0].text.rstrip().endswith("…")
    assert strips[1].text == " short" + " " * 44
    assert all(segment.style is None or segment.style.meta == {"option": 3} for strip in strips for segment in strip)
    assert lines.get_height(None, 10) == 2  # never wrapped, whatever the width


def test_the_results_list_shows_each_hit_title_line_then_snippet_line(corpus: tuple[Path, Path]) -> None:
    shown: list[str] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        await type_query(app, pilot, "gamma")
        results = app.query_one("#results")
        shown.extend(results.render_line(y).text.strip() for y in range(3))

    drive(corpus[1], scenario)
    title, snippet, after = shown
    assert BETA[:8] in title and "/work/beta" in title
    assert "gamma" in snippet and after == ""


def test_a_list_taller_than_the_screen_scrolls_to_the_highlighted_row_and_back(corpus: tuple[Path, Path]) -> None:
    """The results list never asks for a layout (its size is fixed), yet scrolling follows the
    highlight when the overview (5 lines) is taller than the list (3 lines on a 10-line screen)."""
    seen: list[Any] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        results = app.query_one("#results")
        seen.append((results.scrollable_content_region.height, results.max_scroll_y))
        await pilot.press("down", "down", "down", "down", "down")
        await pilot.pause(0.05)
        seen.append((results.highlighted, results.scroll_y > 0, BETA[:8] in results.render_line(results.scrollable_content_region.height - 1).text))
        app.query_one("#query").focus()
        await type_query(app, pilot, "gamma")  # one hit, two lines: nothing to scroll
        await pilot.pause(0.05)
        seen.append((results.max_scroll_y, results.scroll_y))

    drive(corpus[1], scenario, size=(80, 10))
    (height, overflow), moved, fitted = seen
    assert height < 5 and overflow == 5 - height
    assert moved == (4, True, True)
    assert fitted == (0, 0)
