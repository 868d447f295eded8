"""Cross-corpus listing, session filters and lineage through SessionQuery
(query-spec §1.5, §2.1, §2.2, §2.8, §5.1; catalogue T-EX-3/12/13, T-TR-1..5)."""

from __future__ import annotations

import sys

import msgspec
import pytest

from readmodel.core.errors import SessionQueryError
from readmodel.projection.lineage import encode_lineage_trace, iter_lineage_nodes
from readmodel.live import InMemoryLiveSource
from readmodel.query import SessionQuery
from readmodel.core.vocabulary import to_builtins
from tests.logfactory import header as log_header
from tests.projection.surface_builders import user
from tests.query.support import Corpus, fail_on, live_header


def ids(records) -> list[str]:  # type: ignore[no-untyped-def]
    return [record.header["id"] for record in records]


def test_live_listing_order_flags_and_detached_headers(live: InMemoryLiveSource) -> None:
    # T-EX-12
    live.create(live_header("older", 1))
    live.create(live_header("z", 2))
    live.create(live_header("a", 2))
    records = SessionQuery(None, live).list_sessions()
    assert [(r.header["id"], r.live, r.persisted) for r in records] == [("a", True, False), ("z", True, False), ("older", True, False)]
    records[0].header["createdAt"] = 99
    assert live.get("a").header["createdAt"] == 2  # type: ignore[union-attr]


def test_record_keys_are_exactly_header_live_persisted(corpus: Corpus) -> None:
    # T-EX-3 (listing half)
    corpus.write(log_header("persisted"), [user(0, "x")])
    corpus.index()
    (record,) = corpus.query().list_sessions()
    assert list(msgspec.json.decode(msgspec.json.encode(record))) == ["header", "live", "persisted"]


def test_ties_follow_icu_order_in_the_index_and_when_merged_with_live(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # Recommended extra: equal createdAt with mixed-case or punctuated ids follow ICU order.
    persisted = ["b", "A", "_x", "1", "B"]
    for session_id in persisted:
        corpus.write(log_header(session_id, 5), [user(0, "x")])
    corpus.write(log_header("newest", 9), [user(0, "x")])
    corpus.index()
    assert ids(corpus.query().list_sessions()) == ["newest", "_x", "1", "A", "b", "B"]
    for session_id in ("a", "-x", "Z", "aa"):
        live.create(live_header(session_id, 5))
    live.create(live_header("oldest-live", 1))
    records = corpus.query(live).list_sessions()
    assert ids(records) == ["newest", "_x", "-x", "1", "a", "A", "aa", "b", "B", "Z", "oldest-live"]
    flags = {r.header["id"]: (r.live, r.persisted) for r in records}
    assert flags["a"] == (True, False) and flags["A"] == (False, True)


def test_filter_sessions_over_both_sources(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-EX-13 (sessions half) and the availability filter over real flags.
    corpus.write(log_header("durable-filter", 1), [user(0, "x")])
    corpus.write(log_header("child", 0, parentSession="durable-filter", cwd=None), [user(0, "x")])
    corpus.index()
    live.create(live_header("live-filter", 2, cwd="/live"))
    query = corpus.query(live)
    wanted = ["durable-filter"]
    result = query.filter_sessions([{"kind": "id", "values": wanted}])
    wanted.append("live-filter")  # the caller's array was copied
    assert to_builtins(result) == [{"header": log_header("durable-filter", 1), "live": False, "persisted": True}]
    assert ids(query.filter_sessions([{"kind": "availability", "values": ["live"]}])) == ["live-filter"]
    assert ids(query.filter_sessions([{"kind": "availability", "values": ["persisted"]}])) == ["durable-filter", "child"]
    assert ids(query.filter_sessions([{"kind": "cwd", "values": [None]}])) == ["child"]
    assert ids(query.filter_sessions([{"kind": "parent", "values": ["durable-filter"]}])) == ["child"]
    assert ids(query.filter_sessions([{"kind": "created-at", "from": 1, "to": 2}])) == ["live-filter", "durable-filter"]
    assert len(query.filter_sessions([])) == 3
    for bad in ([{"kind": "bogus"}], [{"kind": "availability", "values": ["remote"]}], "x", [{"kind": "created-at", "from": float("nan")}]):
        with pytest.raises(SessionQueryError) as info:
            query.filter_sessions(bad)
        assert info.value.code == "SESSION_QUERY_INVALID_FILTER"


def test_invalid_filters_fail_before_the_index_is_consulted(corpus: Corpus) -> None:
    corpus.write(log_header("s"), [user(0, "x")])
    corpus.index()
    query, store = corpus.hooked()
    store.hook = fail_on("list", RuntimeError("down"))
    with pytest.raises(SessionQueryError) as info:
        query.filter_sessions([{"kind": "availability", "values": ["archived"]}])
    assert info.value.message == 'session availability filter contains unknown value "archived"'
    assert store.calls == []


def test_listing_reflects_the_index_generation(corpus: Corpus) -> None:
    # The decoded listing is reused only while the index generation is unchanged.
    corpus.write(log_header("first", 1), [user(0, "x")])
    corpus.index()
    query = corpus.query()
    first = query.list_sessions()
    first[0].header["cwd"] = "/mutated"
    assert query.list_sessions()[0].header["cwd"] == "/work/project"
    corpus.write(log_header("second", 2), [user(0, "x")])
    corpus.index()
    assert ids(query.list_sessions()) == ["second", "first"]


def test_lineage_of_live_sessions(live: InMemoryLiveSource) -> None:
    # T-TR-1 and T-TR-2
    live.create(live_header("root", 0))
    live.create(live_header("parent", 1, parentSession="root"))
    live.create(live_header("target", 2, parentSession="parent"))
    live.create(live_header("b", 4, parentSession="target"))
    live.create(live_header("a", 4, parentSession="target"))
    live.create(live_header("older", 3, parentSession="target"))
    live.create(live_header("grandchild", 5, parentSession="a"))
    live.create(live_header("orphan", 6, parentSession="outside"))
    query = SessionQuery(None, live)
    trace = query.trace_session("target")
    assert trace.complete and ids(trace.ancestors) == ["parent", "root"] and trace.root.header["id"] == "root"
    assert [n.session.header["id"] for n in trace.descendants] == ["older", "a", "b"]
    assert [n.session.header["id"] for n in trace.descendants[1].descendants] == ["grandchild"]
    trace.target.header["createdAt"] = 100
    trace.ancestors[0].header["createdAt"] = 100
    trace.root.header["createdAt"] = 100
    trace.descendants[0].session.header["createdAt"] = 100
    again = query.trace_session("target")
    assert (again.target.header["createdAt"], again.ancestors[0].header["createdAt"], again.descendants[0].session.header["createdAt"]) == (2, 1, 3)
    root = query.trace_session("root")
    assert root.complete and root.root.header["id"] == "root" and root.ancestors == []
    orphan = to_builtins(query.trace_session("orphan"))
    assert orphan["complete"] is False and orphan["unresolvedParentId"] == "outside" and orphan["ancestors"] == []
    assert "root" not in orphan


def test_lineage_cycles_and_missing_targets(live: InMemoryLiveSource) -> None:
    # T-TR-3
    live.create(live_header("a", 1, parentSession="b"))
    live.create(live_header("b", 1, parentSession="a"))
    query = SessionQuery(None, live)
    with pytest.raises(SessionQueryError) as info:
        query.trace_session("a")
    assert (info.value.code, info.value.message) == ("SESSION_QUERY_INVALID_LINEAGE", 'session lineage contains a cycle at "a"')
    with pytest.raises(SessionQueryError) as info:
        query.trace_session("missing")
    assert (info.value.code, info.value.message) == ("SESSION_QUERY_SESSION_NOT_FOUND", 'session "missing" not found')


def test_lineage_of_a_persisted_session_lists_once_and_never_inspects(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-TR-4, plus a live child of a persisted parent.
    corpus.write(log_header("durable", 1), [user(0, "x")])
    corpus.index()
    live.create(live_header("child", 2, parentSession="durable"))
    query, store = corpus.hooked(live)
    trace = query.trace_session("durable")
    assert (trace.target.live, trace.target.persisted, trace.complete) == (False, True, True)
    assert [(n.session.header["id"], n.session.live) for n in trace.descendants] == [("child", True)]
    assert store.count("inspect") == 0 and store.count("list") >= 1
    store.hook = fail_on("list", RuntimeError("down"))
    with pytest.raises(SessionQueryError) as info:
        query.trace_session("child")  # even a live target needs the listing
    assert info.value.code == "SESSION_QUERY_PERSISTENCE_FAILED"


def test_a_3000_deep_lineage_neither_overflows_nor_truncates(live: InMemoryLiveSource) -> None:
    # T-TR-5
    for depth in range(3000):
        extra = {"parentSession": f"deep-{depth - 1}"} if depth else {}
        live.create(live_header(f"deep-{depth}", depth, **extra))
    trace = SessionQuery(None, live).trace_session("deep-0")
    assert trace.complete
    deepest = max(iter_lineage_nodes(trace.descendants), key=lambda item: item[0])
    assert deepest[0] == 2998 and deepest[1].session.header["id"] == "deep-2999" and deepest[1].descendants == []
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # only the test's decoder needs it; encoding must not
    try:
        encoded = msgspec.json.decode(encode_lineage_trace(trace))
    finally:
        sys.setrecursionlimit(limit)
    node, depth = encoded["descendants"][0], 1
    while node["descendants"]:
        node, depth = node["descendants"][0], depth + 1
    assert (depth, node["session"]["header"]["id"]) == (2999, "deep-2999")


def test_listing_flatness_check_never_misjudges_nested_headers() -> None:
    from readmodel.store.sqlite import _all_flat

    flat = [b'{"version":0,"id":"a","createdAt":1}', b'{"version":0,"id":"b{[","createdAt":2}']
    assert _all_flat(flat[0], 1)
    assert not _all_flat(b",".join(flat), 2)  # a brace inside a string only costs a deep copy
    assert not _all_flat(b'{"version":0,"id":"n","cwd":{"x":1}}', 1)
    assert not _all_flat(b'{"version":0,"id":"n","cwd":[1]}', 1)
