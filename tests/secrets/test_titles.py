"""Titles — in listings (``listSessionSummaries``) and title snapshots (``readTitle``,
``readTitleSnapshots``: the web page's results and headings) — show markers under ``index`` and
``all``, as the index's documents do, and are as written under ``off``."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from readmodel.live import InMemoryLiveSource
from readmodel.projection.secrets import marker
from readmodel.query import SessionQuery
from readmodel.store.sqlite import IndexStore
from tests.secrets.planted import CWD, SECRETS, build, leaks, planted_events, session_id


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build(tmp_path_factory.mktemp("titles"))[1]


def _engine(db: str, policy: str) -> SessionQuery:
    live = InMemoryLiveSource()
    live.create({"version": 0, "id": "live-title", "createdAt": 900, "cwd": CWD, "delegationDepth": 0}, planted_events(SECRETS[3], 3))
    return SessionQuery(IndexStore.open(db), live, None, policy)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["index", "all", "off"])
def test_summaries_and_title_snapshots_follow_the_policy(db: str, policy: str) -> None:
    engine = _engine(db, policy)
    summaries = msgspec.json.encode(engine.list_session_summaries({"limit": 100})).decode()
    ids = [session_id(index) for index in range(len(SECRETS))] + ["live-title"]
    titles = msgspec.json.encode(engine.read_title_snapshots(ids)).decode()
    for planted in SECRETS:
        assert bool(leaks(summaries, planted.secret)) is (policy == "off"), (policy, planted.kind)
        assert bool(leaks(titles, planted.secret)) is (policy == "off"), (policy, planted.kind)
    if policy != "off":
        assert marker(SECRETS[3].kind) in summaries
    if policy != "off":
        title = engine.read_title(session_id(1))
        assert title is not None and title.title == f"title {marker('aws-access-key')}"
