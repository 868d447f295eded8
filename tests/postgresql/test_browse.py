"""``sessionq browse --db postgresql://…``: the same browser over a PostgreSQL index.

The app runs headless (Textual's pilot) over an index the real indexer wrote into a database
of the tests' throwaway cluster (tests/postgres.py; under CI a missing server fails these
tests).  Search as you type, the overview, a transcript's matches, and the first pages kept per
search generation behave as on SQLite (the scenarios of tests/cli/test_browse*.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.cli.browse.app import BrowserApp, TranscriptScreen
from readmodel.store.postgres import open_writer
from tests.cli.test_browse_cache import (
    ALPHA,
    ALPHA_OLD,
    BETA,
    a_session_indexed_after_its_query_was_kept_shows_up,
    drive,
    listed,
    one_character_queries_are_fetched_ahead_while_nobody_types,
    type_query,
    until,
    write_sessions,
)
from tests.postgres import shared_server


def reconcile(root: Path, url: str) -> None:
    """Index ``root`` into the PostgreSQL index ``url`` with the real indexer."""
    engine = open_writer(url)
    try:
        Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
    finally:
        engine.dispose()


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "root"
    root.mkdir()
    write_sessions(root)
    url = shared_server().database()
    reconcile(root, url)
    return root, url


def test_browse_searches_lists_and_opens_transcripts_on_postgresql(corpus: tuple[Path, str]) -> None:
    _, url = corpus
    seen: list[Any] = []

    async def scenario(app: BrowserApp, pilot: Any) -> None:
        seen.append(listed(app))  # the overview: workspaces, newest activity first
        await type_query(app, pilot, "frobnicate")
        seen.append(listed(app))
        await pilot.press("enter")
        await until(pilot, lambda: app.shown_query == f"transcript:{ALPHA}")
        screen = app.screen
        assert isinstance(screen, TranscriptScreen) and screen.transcript is not None
        seen.append((screen.transcript.matches, screen.seqs))

    drive(url, scenario)  # type: ignore[arg-type]
    assert seen[0] == [("workspace", "/work/alpha"), ("session", ALPHA), ("session", ALPHA_OLD), ("workspace", "/work/beta"), ("session", BETA)]
    assert seen[1] == [("session", ALPHA)]
    assert seen[2] == ([1, 7], [1, 3, 7, 9])  # both user messages match; log-only events hidden


def test_a_session_indexed_after_its_query_was_kept_shows_up_on_postgresql(corpus: tuple[Path, str]) -> None:
    root, url = corpus
    a_session_indexed_after_its_query_was_kept_shows_up(url, root, lambda: reconcile(root, url))


def test_one_character_queries_are_fetched_ahead_on_postgresql(corpus: tuple[Path, str]) -> None:
    one_character_queries_are_fetched_ahead_while_nobody_types(corpus[1])


def test_the_browse_command_takes_a_postgresql_db_and_opens_it_before_the_terminal_check(corpus: tuple[Path, str]) -> None:
    """Through the real console script: the URL is accepted and the index opened (an unusable
    one would be reported first); without a terminal the command then says so in one line."""
    from tests.cli.helpers import sessionq

    result = sessionq("browse", "--db", corpus[1])
    assert result.returncode == 1
    assert "needs a terminal" in result.stderr and len(result.stderr.strip().splitlines()) == 1
