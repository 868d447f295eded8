"""Title reads: batch resolution over the index and live sessions
(query-spec §1.7, §2.10; catalogue T-EX-3..11).

The reference inspects persisted ids with up to ``persistedInspectConcurrency``
concurrent backend calls (T-EX-5 measures a peak of exactly 4).  Here every
persisted id is resolved inside one read transaction, one after another, so
the peak is 1 (within any valid limit) and the observable contract that
remains is tested: one listing per batch, inspections in input order, each
projection finished before the next inspection starts (T-EX-6).
"""

from __future__ import annotations

from typing import Any

import pytest

import readmodel.query as query_module
from readmodel.core.errors import SessionQueryError
from readmodel.live import InMemoryLiveSource
from readmodel.query import SessionQuery
from readmodel.core.requests import title_result_to_builtins
from readmodel.core.vocabulary import to_builtins
from tests.logfactory import header as log_header
from tests.projection.builders import title as title_event
from tests.projection.surface_builders import user
from tests.query.support import Corpus, fail_on, live_header


def titled(corpus: Corpus, session_id: str, text: str, *, created_at: int = 1, time: int = 20) -> dict[str, Any]:
    header = log_header(session_id, created_at)
    corpus.write(header, [title_event(0, text, time=time)])
    return header


def test_title_of_persisted_and_shared_sessions(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-EX-3
    titled(corpus, "persisted", "Persisted title")
    shared = titled(corpus, "shared", "Durable shared title")
    corpus.index()
    live.create(dict(shared), [title_event(0, "Live title", time=30)])
    query = corpus.query(live)
    title = to_builtins(query.read_title("persisted"))
    assert (title["title"], title["eventSeq"], title["updatedAt"]) == ("Persisted title", 0, 20)
    assert title == {"title": "Persisted title", "messageSeqs": [], "source": {"kind": "fallback"}, "eventSeq": 0, "updatedAt": 20}
    assert to_builtins(query.read_title("shared"))["title"] == "Live title"
    assert query.read_title_snapshot("persisted").session == log_header("persisted", 1)


def test_batch_order_dedup_and_one_listing(corpus: Corpus) -> None:
    # T-EX-4
    first = titled(corpus, "first", "First")
    second = titled(corpus, "second", "Second")
    corpus.index()
    query, store = corpus.hooked()
    results = query.read_title_snapshots(["second", "first", "second", "missing"])
    assert [(r.session_id, r.status) for r in results] == [("second", "fulfilled"), ("first", "fulfilled"), ("missing", "rejected")]
    assert results[0].value.session == second and results[0].value.title.title == "Second"
    assert results[1].value.session == first and results[1].value.title.title == "First"
    assert results[2].reason.code == "SESSION_QUERY_SESSION_NOT_FOUND"
    assert store.count("list") == 1
    assert store.inspected() == ["second", "first"]


def test_many_persisted_ids_resolve_in_input_order(corpus: Corpus) -> None:
    # T-EX-5 (see the module docstring for the concurrency limit)
    names = [f"s{n:02d}" for n in range(12)]
    for name in reversed(names):
        titled(corpus, name, name.upper())
    corpus.index()
    query, store = corpus.hooked()
    results = query.read_title_snapshots(names)
    assert [r.session_id for r in results] == names and all(r.status == "fulfilled" for r in results)
    assert store.count("list") == 1 and store.inspected() == names


def test_each_projection_finishes_before_the_next_inspection(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    # T-EX-6
    names = [f"p{n}" for n in range(5)]
    for name in names:
        corpus.write(log_header(name), [user(0, f"full-log marker of {name}"), title_event(1, f"title of {name}", message_seqs=[0])])
    corpus.index()
    query, store = corpus.hooked()
    order: list[str] = []
    store.hook = lambda kind, _name, args: order.append(f"inspect {store.sids.get(args[0])}") if kind == "inspect" else None
    real = query_module.title_snapshot

    def projecting(event: dict[str, Any]) -> Any:
        order.append(f"project {event['data']['title'][-2:]}")
        return real(event)

    monkeypatch.setattr(query_module, "title_snapshot", projecting)
    results = query.read_title_snapshots(names)
    assert order == [step for name in names for step in (f"inspect {name}", f"project {name}")]
    assert all(r.status == "fulfilled" for r in results)
    encoded = str([title_result_to_builtins(r) for r in results])
    assert "title of p4" in encoded and "marker" not in encoded


def test_attached_failed_and_malformed_entries(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-EX-10
    attached = titled(corpus, "attached", "Durable")
    titled(corpus, "failed", "Failed")
    corpus.write(log_header("malformed"), [{"type": "session/title", "seq": 0, "time": 1, "data": {"title": "x", "source": {"kind": "user"}}}])
    corpus.index()
    query, store = corpus.hooked(live)
    boom = RuntimeError("E")

    def hook(kind: str, _name: str, args: tuple[Any, ...]) -> None:
        if kind != "inspect":
            return
        target = store.sids.get(args[0])
        if target == "attached" and live.get("attached") is None:
            live.create(dict(attached), [title_event(0, "Live", time=5)])
        if target == "failed":
            raise boom

    store.hook = hook
    attached_result, failed, malformed = query.read_title_snapshots(["attached", "failed", "malformed"])
    assert attached_result.status == "fulfilled"
    assert attached_result.value.title.title == "Live" and attached_result.value.session == attached
    assert failed.status == "rejected" and failed.reason.code == "SESSION_QUERY_PERSISTENCE_FAILED"
    assert failed.reason.cause is boom and failed.reason.message == 'failed to inspect session "failed": E'
    assert malformed.status == "rejected" and isinstance(malformed.reason, TypeError)
    with pytest.raises(TypeError):
        query.read_title("malformed")
    as_json = title_result_to_builtins(malformed)
    assert as_json["reason"]["name"] == "TypeError" and as_json["status"] == "rejected"


def test_batch_edge_cases(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-EX-11
    live_hdr = live_header("live", 1)
    live.create(live_hdr, [user(0, "x")])
    no_index = SessionQuery(None, live)
    results = no_index.read_title_snapshots(["live", "live"])
    assert [title_result_to_builtins(r) for r in results] == [{"sessionId": "live", "status": "fulfilled", "value": {"session": live_hdr}}]
    pair = no_index.read_title_snapshots(["live", "missing"])
    assert [r.status for r in pair] == ["fulfilled", "rejected"]
    with pytest.raises(SessionQueryError) as info:
        no_index.read_title_snapshot("missing")
    assert info.value.code == "SESSION_QUERY_SESSION_NOT_FOUND"

    titled(corpus, "persisted", "P")
    corpus.index()
    query, store = corpus.hooked(live)

    def late_owner(kind: str, name: str, _args: tuple[Any, ...]) -> None:
        if name == "lookup_many" and live.get("late") is None:
            live.create(live_header("late", 3), [title_event(0, "Late", time=1)])

    store.hook = late_owner
    late = query.read_title_snapshots(["live", "persisted", "late"])
    assert [r.status for r in late] == ["fulfilled"] * 3 and late[2].value.title.title == "Late"

    live.remove("late")
    store.hook = fail_on("list", RuntimeError("listing down"))
    kept, lost = query.read_title_snapshots(["live", "missing"])
    assert kept.status == "fulfilled"
    assert lost.status == "rejected" and lost.reason.code == "SESSION_QUERY_PERSISTENCE_FAILED"
    assert lost.reason.message == "session persistence listing failed: listing down"


def test_titles_read_no_surface_and_every_id_live_skips_the_index(corpus: Corpus, live: InMemoryLiveSource) -> None:
    corpus.write(log_header("durable"), [user(0, "x")])
    corpus.index()
    no_op = user(0, "x")
    del no_op["surfaceOp"]
    live.create(live_header("bad-surface"), [no_op, title_event(1, "Still titled")])
    query, store = corpus.hooked(live)
    assert query.read_title("bad-surface").title == "Still titled"
    assert store.calls == []
    assert query.read_title("durable") is None
    assert "title" not in to_builtins(query.read_title_snapshot("durable"))
