"""The shared world of the tool tests: one real index, built once per run.

Workspace ``W`` holds the caller ``me`` and most sessions; ``OTHER`` is a
second workspace whose sessions must never be revealed; two sessions have no
workspace at all.

Lineages::

    target ─┬─ first ── nested            (W)
            ├─ hiddenchild (OTHER) ── hiddengrand (W)
            └─ last                       (W)
    outsider (OTHER) ── b (W)
    x (W, parent outsider) ── xc (OTHER) ── xg (W)
    ghostchild (W, parent "ghost": not in the corpus)
    cyc (W) ── parent cyc1 (OTHER) ⇄ cyc2 (OTHER)   (a cycle outside the workspace)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from readmodel.query import SessionQuery
from tests.logfactory import step_start, turn_end, turn_start, user
from tests.tools.support import OTHER, W, Session, build_index, chat, hdr, open_query

ME_EVENTS: list[dict[str, Any]] = [
    turn_start(0),
    user(1, "alpha beta caller note from an earlier step"),
    step_start(2),
    user(3, "alpha beta caller note of the invoking step"),
]


def world_sessions() -> list[Session]:
    def s(session_id: str, cwd: str | None = W, created: int = 1, parent: str | None = None,
          texts: tuple[str, ...] = ("alpha beta common words",), title: str | None = None) -> Session:
        return Session(hdr(session_id, cwd, created, parent), chat(list(texts), title=title or session_id.capitalize()))

    return [
        Session(hdr("me", W, 5), [*ME_EVENTS, turn_end(4)]),
        s("a", created=100, texts=("alpha beta shared words", "gamma"), title="Alpha"),
        s("b", created=200, parent="outsider", texts=("alpha beta more words",), title="Beta"),
        s("outsider", OTHER, 50, texts=("alpha beta outsider secret words",), title="Secret"),
        s("nocwd", None, 60, texts=("alpha beta nocwd words",)),
        s("nocwd2", None, 61, texts=("alpha beta nocwd2 words",)),
        s("target", created=300, title="Target"),
        s("first", created=310, parent="target", title="First"),
        s("nested", created=320, parent="first", title="Nested"),
        s("hiddenchild", OTHER, 330, parent="target", title="Hidden child"),
        s("hiddengrand", W, 340, parent="hiddenchild", title="Hidden grandchild"),
        s("last", created=350, parent="target", title="Last"),
        s("x", created=400, parent="outsider", title="Lineage x"),
        s("xc", OTHER, 410, parent="x", title="Hidden xc"),
        s("xg", W, 420, parent="xc", title="Hidden xg"),
        s("ghostchild", created=400, parent="ghost", title="Lineage x"),
        s("cyc", created=500, parent="cyc1", title="Cycle"),
        s("cyc1", OTHER, 510, parent="cyc2", title="Cycle one"),
        s("cyc2", OTHER, 520, parent="cyc1", title="Cycle two"),
    ]


@pytest.fixture(scope="session")
def world_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_index(tmp_path_factory.mktemp("tools-world"), world_sessions())


@pytest.fixture(scope="session")
def world(world_db: str) -> Iterator[SessionQuery]:
    query = open_query(world_db)
    try:
        yield query
    finally:
        query.close()



@pytest.fixture(scope="session")
def corpus_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An index of the shared reference corpus (``zstd-root``), built in a tmp dir."""
    from indexer.layout import Compression
    from indexer.reconcile import Reconciler
    from readmodel.store.database import open_writer
    from tests.corpus import ZSTD_ROOT, require_corpus

    require_corpus()
    db = str(tmp_path_factory.mktemp("tools-corpus") / "index.db")
    engine = open_writer(db)
    try:
        Reconciler(engine, ZSTD_ROOT, Compression.ZSTD, settle_seconds=0).reconcile()
    finally:
        engine.dispose()
    return db
