"""Each answer comes from one read transaction (one committed index generation).

Deterministic counterpart of the multi-process test: a hook runs the writer
(append a batch, reconcile, commit) *between* the lookup and the inspection of
one read.  The answer must still be entirely the old generation, and the next
read must see the new one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.logfactory import header as log_header
from tests.logfactory import write_log
from tests.projection.builders import title as title_event
from tests.query.concurrency import GrowingLog
from tests.query.support import Corpus, build_index


@pytest.fixture
def growing(corpus: Corpus) -> tuple[Corpus, GrowingLog]:
    log = GrowingLog(corpus.root, "grow", 1)
    for _ in range(3):  # 12 events; the fourth batch will be a compaction
        log.append()
    corpus.index()
    return corpus, log


def commit_during_inspection(corpus: Corpus, log: GrowingLog, store: Any) -> None:
    """Install a hook that commits one more batch when the first inspection starts."""
    state = {"done": False}

    def hook(kind: str, _name: str, _args: tuple[Any, ...]) -> None:
        if kind == "inspect" and not state["done"]:
            state["done"] = True
            log.append()
            build_index(Path(corpus.root), Path(corpus.db))

    store.hook = hook


@pytest.mark.parametrize(
    "read",
    [
        lambda q: len(q.read_session("grow").events),
        lambda q: q.read_surface("grow").captured_through_seq + 1,
        lambda q: len(q.list_events("grow")),
        lambda q: q.read_event({"sessionId": "grow", "seq": 11, "after": 50}).end_seq + 1,
    ],
    ids=["readSession", "readSurface", "listEvents", "readEvent"],
)
def test_a_commit_during_a_read_is_not_seen_by_it(growing: tuple[Corpus, GrowingLog], read: Any) -> None:
    corpus, log = growing
    query, store = corpus.hooked()
    commit_during_inspection(corpus, log, store)
    assert read(query) == 12
    assert read(query) == 16


def test_surface_and_trace_stay_in_the_old_generation(growing: tuple[Corpus, GrowingLog]) -> None:
    corpus, log = growing
    query, store = corpus.hooked()
    commit_during_inspection(corpus, log, store)
    # The committed batch is a compaction that shadows seqs 1..9 (it keeps 10); the read began before it.
    surface = query.read_surface("grow")
    assert [e["seq"] for e in surface.events] == [1, 2, 5, 6, 9, 10]
    assert query.trace_event({"sessionId": "grow", "seq": 1}).replacement_chain == [13]
    assert [e["seq"] for e in query.read_surface("grow").events] == [13, 10, 14]


def test_a_title_batch_reads_one_snapshot(corpus: Corpus) -> None:
    # The log is replaced (and re-indexed) right after the batch's listing: the
    # batch still answers from the generation its listing saw.
    path = write_log(corpus.root, log_header("titled"), [[title_event(0, "Old")]])
    corpus.index()
    query, store = corpus.hooked()
    state = {"done": False}

    def after(kind: str, name: str, _args: tuple[Any, ...]) -> None:
        if name == "lookup_many" and not state["done"]:
            state["done"] = True
            path.unlink()
            write_log(corpus.root, log_header("titled"), [[title_event(0, "Replaced", time=9)]])
            GrowingLog(corpus.root, "late-session", 2).append()
            build_index(Path(corpus.root), Path(corpus.db))

    store.after = after
    titled, late = query.read_title_snapshots(["titled", "late-session"])
    assert titled.status == "fulfilled" and titled.value.title.title == "Old"
    assert late.status == "rejected" and late.reason.code == "SESSION_QUERY_SESSION_NOT_FOUND"
    assert query.read_title("titled").title == "Replaced"
    assert [r.header["id"] for r in query.list_sessions()] == ["late-session", "titled"]
