"""``sessionq browse``: the Textual browser driven headless by Textual's pilot, on a real index.

The index is built from logs written with :mod:`tests.logfactory`; the app runs
the real engine in its worker threads.  The command's failure paths run
through the real console script.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from readmodel.cli.browse.app import BrowserApp, TranscriptScreen
from readmodel.query import SessionQuery
from tests.cli.helpers import sessionq
from tests.logfactory import assistant, header, step_end, step_start, turn_end, turn_start, user, write_log
from tests.query.support import build_index

ALPHA = "11111111-aaaa-4aaa-8aaa-000000000001"
ALPHA_OLD = "22222222-aaaa-4aaa-8aaa-000000000002"
BETA = "33333333-bbbb-4bbb-8bbb-000000000003"


def _turn(start: int, turn: int, said: str, reply: str) -> list[dict[str, Any]]:
    """One turn: four log-only markers around a user message and a reply (seqs start..start+5)."""
    return [
        turn_start(start, turn=turn),
        user(start + 1, said),
        step_start(start + 2, turn=turn),
        assistant(start + 3, reply, turn=turn),
        step_end(start + 4, turn=turn),
        turn_end(start + 5, turn=turn),
    ]


def _session(root: Path, session_id: str, created: int, cwd: str, turns: list[tuple[str, str]]) -> None:
    events = [event for number, (said, reply) in enumerate(turns) for event in _turn(number * 6, number + 1, said, reply)]
    write_log(root, header(session_id, created_at=created, cwd=cwd), [events])


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("browse")
    root = base / "root"
    root.mkdir()
    # ALPHA: "frobnicate" in seqs 1, 9 (a reply) and 19; the other turns do not say it.
    _session(
        root,
        ALPHA,
        3_000,
        "/work/alpha",
        [("please frobnicate the widget", "on it"), ("and then?", "I frobnicate it now"), ("unrelated words", "fine"), ("frobnicate once more", "done")],
    )
    _session(root, ALPHA_OLD, 1_000, "/work/alpha", [("an older delta session", "ok")])
    _session(root, BETA, 2_000, "/work/beta", [("gamma rays in beta", "yes gamma")])
    return build_index(root, base / "index.db")


def drive(
    db: Path, scenario: Callable[[BrowserApp, Any], Awaitable[None]], engine: Any = None, debounce: float = 0.005, size: tuple[int, int] = (120, 40)
) -> BrowserApp:
    """Run ``scenario(app, pilot)`` in a headless app over ``db``; the app is returned afterwards."""
    engine = engine or SessionQuery.open(str(db))
    app = BrowserApp(engine, debounce=debounce)

    async def run() -> None:
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: app.shown_query == "")
            await scenario(app, pilot)

    try:
        asyncio.run(run())
    finally:
        engine.close()
    return app


async def until(pilot: Any, condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Let the app run until ``condition`` holds (fails after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the app never reached the expected state"
        await pilot.pause(0.01)


async def type_query(app: BrowserApp, pilot: Any, text: str) -> None:
    """Type ``text`` key by key, waiting after each key until its results are on screen."""
    typed = app.query_one("#query").value
    for char in text:
        typed += char
        await pilot.press("space" if char == " " else char)
        await until(pilot, lambda: app.shown_query == typed)


def listed(app: BrowserApp) -> list[tuple[str, str | None]]:
    return [(row.kind, row.session_id or row.cwd) for row in app.rows]


def test_results_follow_each_keystroke_and_replace_the_previous_query(db: Path) -> None:
    seen: list[list[tuple[str, str | None]]] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        await type_query(app, pilot, "gamma")
        seen.append(listed(app))
        for _ in "gamma":
            await pilot.press("backspace")
        await until(pilot, lambda: app.shown_query == "")
        seen.append([kind for kind, _ in listed(app)][:1])  # type: ignore[list-item]
        await type_query(app, pilot, "frobnicate")
        seen.append(listed(app))
        await type_query(app, pilot, " zzz")
        seen.append(listed(app))

    drive(db, scenario)
    assert seen[0] == [("session", BETA)]
    assert seen[1] == ["workspace"]  # an emptied query goes back to the workspaces
    assert seen[2] == [("session", ALPHA)]
    assert seen[3] == [("note", None)]  # "no session matches"


def test_without_a_debounce_each_key_shows_its_own_results_and_a_burst_its_last_query(db: Path) -> None:
    """The app's default (no debounce timer): a key's search starts once the keys queued with
    it are handled, so keys typed one by one each show their results, and a burst shows its
    last query's."""
    seen: list[Any] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        await type_query(app, pilot, "gam")
        seen.append(listed(app))
        await pilot.press("backspace", "backspace", "backspace", *"frobnicate")
        await until(pilot, lambda: app.shown_query == "frobnicate")
        await pilot.pause(0.1)
        seen.append((app.shown_query, listed(app)))

    drive(db, scenario, debounce=0.0)
    assert seen == [[("session", BETA)], ("frobnicate", [("session", ALPHA)])]


class SlowFirstSearch:
    """The real engine, except that a search for ``slow`` takes half a second."""

    def __init__(self, engine: SessionQuery) -> None:
        self._engine = engine
        self.slow_finished = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def search_sessions(self, request: Any, signal: Any = None) -> Any:
        if request["query"] == "slow":
            time.sleep(0.5)
            self.slow_finished.set()
            return self._engine.search_sessions({**request, "query": "frobnicate"})
        return self._engine.search_sessions(request, signal)


def test_a_slow_search_overtaken_by_a_later_keystroke_is_never_shown(db: Path) -> None:
    engine = SlowFirstSearch(SessionQuery.open(str(db)))
    shown: list[str | None] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        app.query_one("#query").value = "slow"
        await pilot.pause(0.05)  # the slow search is running in its worker
        app.query_one("#query").value = "gamma"
        await until(pilot, lambda: app.shown_query == "gamma")
        await until(pilot, engine.slow_finished.is_set)
        await pilot.pause(0.1)
        shown.append(app.shown_query)
        shown.append(str(listed(app)))

    drive(db, scenario, engine)
    assert shown == ["gamma", str([("session", BETA)])]


def test_empty_query_lists_sessions_by_workspace_and_enter_opens_a_whole_workspace(db: Path) -> None:
    states: list[list[tuple[str, str | None]]] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        states.append(listed(app))
        await pilot.press("down")  # to the results; the first row is the newest workspace
        await pilot.press("enter")
        await until(pilot, lambda: app.workspace == "/work/alpha" and app.rows[-1].session_id == ALPHA_OLD)
        states.append(listed(app))
        await pilot.press("escape")
        await until(pilot, lambda: app.workspace is False and len(app.rows) == 5)
        states.append(listed(app))

    drive(db, scenario)
    overview = [("workspace", "/work/alpha"), ("session", ALPHA), ("session", ALPHA_OLD), ("workspace", "/work/beta"), ("session", BETA)]
    assert states == [overview, [("workspace", "/work/alpha"), ("session", ALPHA), ("session", ALPHA_OLD)], overview]


def test_enter_opens_the_transcript_at_the_best_match_and_n_p_move_between_matches(db: Path) -> None:
    visited: list[int | None] = []
    texts: list[str] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        await type_query(app, pilot, "frobnicate")
        best = app.rows[0].seq
        await pilot.press("enter")
        await until(pilot, lambda: app.shown_query == f"transcript:{ALPHA}")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen) and screen.session_id == ALPHA
        assert screen.transcript is not None and screen.transcript.matches == [1, 9, 19]
        visited.append(best)
        visited.append(screen.current_seq)
        for key in "nnnpp":
            await pilot.press(key)
            visited.append(screen.current_seq)
        texts.append(str(screen.query_one("#where").render()))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, TranscriptScreen))

    drive(db, scenario)
    best, opened, *moves = visited
    assert opened == best
    # From the best match forward through 1, 9, 19 with wrap-around, then back.
    order = [1, 9, 19]
    expected, at = [], order.index(best)  # type: ignore[arg-type]
    for step in (1, 1, 1, -1, -1):
        at = (at + step) % 3
        expected.append(order[at])
    assert moves == expected
    assert f"match {order.index(moves[-1]) + 1} of 3" in texts[0]


def test_log_only_events_are_hidden_until_l_shows_them(db: Path) -> None:
    counts: list[list[int]] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        await type_query(app, pilot, "gamma")
        await pilot.press("enter")
        await until(pilot, lambda: app.shown_query == f"transcript:{BETA}")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        counts.append(list(screen.seqs))
        await pilot.press("l")
        counts.append(list(screen.seqs))
        await pilot.press("l")
        counts.append(list(screen.seqs))

    drive(db, scenario)
    assert counts == [[1, 3], [0, 1, 2, 3, 4, 5], [1, 3]]


def test_copy_puts_the_session_id_on_the_clipboard_from_the_results_and_the_transcript(db: Path) -> None:
    copied: list[str] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        await type_query(app, pilot, "gamma")
        await pilot.press("ctrl+y")
        copied.append(app.clipboard)
        for _ in "gamma":
            await pilot.press("backspace")
        await type_query(app, pilot, "delta")
        await pilot.press("down", "c")
        copied.append(app.clipboard)
        await pilot.press("enter")
        await until(pilot, lambda: app.shown_query == f"transcript:{ALPHA_OLD}")
        app.copy_to_clipboard("")
        await pilot.press("c")
        copied.append(app.clipboard)

    drive(db, scenario)
    assert copied == [BETA, ALPHA_OLD, ALPHA_OLD]


def test_q_and_c_typed_in_the_search_box_are_text_and_esc_clears_then_quits(db: Path) -> None:
    states: list[Any] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        await type_query(app, pilot, "qc")
        states.append((app.query_one("#query").value, app.is_running, app.clipboard))
        await pilot.press("escape")
        await until(pilot, lambda: app.shown_query == "")
        states.append(app.query_one("#query").value)
        await pilot.press("escape")
        await pilot.pause(0.05)
        states.append(app.is_running)

    drive(db, scenario)
    assert states == [("qc", True, ""), "", False]


@pytest.mark.parametrize("kind", ["missing", "directory", "text file"])
def test_an_unusable_index_is_one_line_and_exit_1_before_the_app_starts(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "index.db"
    if kind == "directory":
        target.mkdir()
    elif kind == "text file":
        target.write_text("not a database\n" * 100)
    result = sessionq("browse", "--db", str(target))
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr and "sqlalche.me" not in result.stderr


def test_browse_without_a_terminal_says_so_in_one_line(db: Path) -> None:
    result = sessionq("browse", "--db", str(db))
    assert result.returncode == 1
    assert "needs a terminal" in result.stderr and len(result.stderr.strip().splitlines()) == 1


class CountingEngine:
    """The real engine, counting the workspace listings asked of it."""

    def __init__(self, engine: SessionQuery) -> None:
        self._engine = engine
        self.workspace_listings = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def list_workspaces(self) -> Any:
        self.workspace_listings += 1
        return self._engine.list_workspaces()


def test_an_emptied_query_shows_the_overview_kept_from_start_up_without_listing_again(db: Path) -> None:
    """The overview's rows and options are made once: erasing a query shows them again as they
    were (first row highlighted) without asking the index or rebuilding them, in the same list
    (no list shown or hidden, so no layout of the whole screen)."""
    engine = CountingEngine(SessionQuery.open(str(db)))
    seen: list[Any] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        results = app.query_one("#results")
        first = list(results._options)
        seen.append(results.option_count)
        await type_query(app, pilot, "gamma")
        seen.append(listed(app))
        for _ in "gamma":
            await pilot.press("backspace")
        await until(pilot, lambda: app.shown_query == "")
        seen.append((results.option_count, results.highlighted, listed(app)[0], all(a is b for a, b in zip(first, results._options))))
        seen.append(len(app.query("OptionList")))

    drive(db, scenario, engine)
    assert seen == [5, [("session", BETA)], (5, 0, ("workspace", "/work/alpha"), True), 1]
    assert engine.workspace_listings == 1  # at start-up only


def test_a_query_longer_than_the_box_scrolls_it_to_the_cursor(db: Path) -> None:
    """The search box never asks for a layout (its size is fixed); a long query still scrolls."""
    state: list[Any] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        box = app.query_one("#query")
        typed = "frobnicate " * 12
        await pilot.press(*("space" if char == " " else char for char in typed))
        await until(pilot, lambda: app.shown_query == typed)
        await pilot.pause(0.05)
        state.append((box.scroll_x > 0, box.region.x <= box.cursor_screen_offset.x < box.region.right))

    drive(db, scenario)
    assert state == [(True, True)]


def test_the_collector_settings_are_given_back_when_the_app_ends(db: Path) -> None:
    import gc

    before = gc.get_threshold()

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        await until(pilot, lambda: gc.get_threshold() != before or gc.get_freeze_count() > 0)

    drive(db, scenario)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_the_status_line_and_the_transcript_position_are_on_screen_above_the_footer(db: Path) -> None:
    """Both lines were once docked at the bottom with the footer, which covered them."""
    from textual.widgets import Footer

    regions: list[Any] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        status, footer = app.query_one("#status"), app.screen.query_one(Footer)
        regions.append((status.region, footer.region, str(status.render())))
        await type_query(app, pilot, "gamma")
        await pilot.press("enter")
        await until(pilot, lambda: app.shown_query == f"transcript:{BETA}")
        where, footer = app.screen.query_one("#where"), app.screen.query_one(Footer)
        regions.append((where.region, footer.region, str(where.render())))

    drive(db, scenario)
    for line, footer, text in regions:
        assert line.height == 1 and line.bottom <= footer.y and not line.overlaps(footer), (line, footer)
        assert text.strip()
    assert "Enter on a workspace" in regions[0][2] and "event" in regions[1][2]
