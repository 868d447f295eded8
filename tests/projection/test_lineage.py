"""``traceSession`` (query-spec §5.1; T-TR-1..T-TR-5) and deep-lineage encoding."""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import msgspec
import pytest

from readmodel.core.errors import SessionQueryError
from readmodel.projection.lineage import (
    children_index,
    clone_json,
    encode_lineage_trace,
    iter_lineage_nodes,
    lineage_trace_to_builtins,
    trace_session,
)
from readmodel.core.vocabulary import SessionLineageNode, SessionLineageTrace, SessionRecord
from tests.projection.surface_builders import ABSENT, record


def ids(records: list[SessionRecord]) -> list[str]:
    return [r.header["id"] for r in records]


def forest_ids(forest: list[SessionLineageNode]) -> list[Any]:
    """``[id, [children...]]`` pairs, for readable assertions on shallow forests."""
    return [[node.session.header["id"], forest_ids(node.descendants)] for node in forest]


def lineage_error(records: list[SessionRecord], session_id: str) -> SessionQueryError:
    with pytest.raises(SessionQueryError) as caught:
        trace_session(records, session_id)
    return caught.value


FAMILY = [
    record("root", 0),
    record("parent", 1, "root"),
    record("target", 2, "parent"),
    record("b", 4, "target"),
    record("a", 4, "target"),
    record("older", 3, "target"),
    record("grandchild", 5, "a"),
]


class TestTraceSession:
    def test_t_tr_1_complete_lineage(self) -> None:
        result = trace_session(FAMILY, "target")
        assert result.complete is True
        assert ids(result.ancestors) == ["parent", "root"]  # nearest first
        assert result.root is not msgspec.UNSET and result.root.header["id"] == "root"
        assert result.unresolved_parent_id is msgspec.UNSET
        assert forest_ids(result.descendants) == [["older", []], ["a", [["grandchild", []]]], ["b", []]]

    def test_t_tr_1_every_record_is_a_fresh_clone(self) -> None:
        result = trace_session(FAMILY, "target")
        assert result.root is not msgspec.UNSET
        for session in (result.target, result.ancestors[0], result.root, result.descendants[0].session):
            session.header["createdAt"] = 999
        again = trace_session(FAMILY, "target")
        assert again.target.header["createdAt"] == 2
        assert again.ancestors[0].header["createdAt"] == 1
        assert again.descendants[0].session.header["createdAt"] == 3
        assert [r.header["createdAt"] for r in FAMILY] == [0, 1, 2, 4, 4, 3, 5]
        assert result.target is not FAMILY[2]

    def test_t_tr_2_root_traces_itself(self) -> None:
        result = trace_session(FAMILY, "root")
        assert (result.complete, result.ancestors) == (True, [])
        assert result.root is not msgspec.UNSET and result.root.header["id"] == "root"
        assert result.root is not result.target  # separate clones

    def test_t_tr_2_missing_parent_makes_the_trace_partial(self) -> None:
        result = trace_session([record("orphan", 1, "outside")], "orphan")
        assert (result.complete, result.ancestors, result.unresolved_parent_id) == (False, [], "outside")
        assert result.root is msgspec.UNSET
        encoded = json.loads(msgspec.json.encode(result))
        assert "root" not in encoded and encoded["unresolvedParentId"] == "outside"

    def test_partial_trace_keeps_the_ancestors_found_before_the_gap(self) -> None:
        records = [record("child", 3, "mid"), record("mid", 2, "gone")]
        result = trace_session(records, "child")
        assert ids(result.ancestors) == ["mid"]
        assert result.unresolved_parent_id == "gone"

    def test_t_tr_3_cycle(self) -> None:
        error = lineage_error([record("a", 0, "b"), record("b", 0, "a")], "a")
        assert error.code == "SESSION_QUERY_INVALID_LINEAGE"
        assert error.message == 'session lineage contains a cycle at "a"'

    def test_cycle_further_up_the_chain(self) -> None:
        records = [record("t", 0, "p1"), record("p1", 0, "p2"), record("p2", 0, "p1")]
        assert lineage_error(records, "t").message == 'session lineage contains a cycle at "p1"'

    def test_self_parent_is_a_cycle(self) -> None:
        assert lineage_error([record("me", 0, "me")], "me").code == "SESSION_QUERY_INVALID_LINEAGE"

    def test_cycles_off_the_target_chain_are_ignored(self) -> None:
        records = [record("t", 0), record("x", 0, "y"), record("y", 0, "x")]
        assert trace_session(records, "t").complete is True

    def test_object_parent_is_unresolved_like_a_js_identity_lookup(self) -> None:
        result = trace_session([record("x", 0, {"id": "p"}), record("p", 0)], "x")
        assert (result.complete, result.unresolved_parent_id) == (False, {"id": "p"})

    def test_t_tr_3_unknown_target(self) -> None:
        error = lineage_error(FAMILY, "missing")
        assert (error.code, error.message) == ("SESSION_QUERY_SESSION_NOT_FOUND", 'session "missing" not found')

    def test_t_tr_4_pure_part_persisted_record_flags(self) -> None:
        # A persisted-only session traces with its record flags; the one listing call and
        # the listing failure (SESSION_QUERY_PERSISTENCE_FAILED) land with the query side.
        persisted = record("durable", 1, live=False, persisted=True)
        result = trace_session([persisted], "durable")
        assert (result.target.live, result.target.persisted, result.complete) == (False, True, True)

    def test_children_sorted_oldest_first_then_by_locale_compare(self) -> None:
        kids = ["b", "B", "a", "A", "_x", "-x", "1", "session-10", "session-2"]
        records = [record("p", 0), *(record(k, 5, "p") for k in kids), record("old", 4, "p"), record("new", 6, "p")]
        result = trace_session(records, "p")
        assert [n.session.header["id"] for n in result.descendants] == [
            "old", "_x", "-x", "1", "a", "A", "b", "B", "session-10", "session-2", "new"
        ]
        assert ids(children_index(records)["p"]) == [n.session.header["id"] for n in result.descendants]

    def test_descendants_reached_only_through_the_target(self) -> None:
        records = [record("t", 0), record("c", 1, "t"), record("stray", 1, "elsewhere")]
        assert forest_ids(trace_session(records, "t").descendants) == [["c", []]]

    def test_duplicate_ids_last_record_wins_lookups(self) -> None:
        records = [record("t", 0, "gone"), record("t", 0)]
        result = trace_session(records, "t")
        assert result.complete is True

    def test_cycle_through_duplicated_ids_is_refused_not_looped(self) -> None:
        # t (no parent, wins the lookup) -> child a -> the other "t" record is a's child -> ...
        records = [record("t", 0, "a"), record("a", 0, "t"), record("t", 0)]
        assert lineage_error(records, "t").code == "SESSION_QUERY_INVALID_LINEAGE"


class TestDeepLineage:
    @staticmethod
    def chain(length: int) -> list[SessionRecord]:
        return [record("deep-0", 0), *(record(f"deep-{i}", i, f"deep-{i - 1}") for i in range(1, length))]

    def test_t_tr_5_three_thousand_generations(self) -> None:
        records = self.chain(3000)
        result = trace_session(records, "deep-0")
        node, depth = result.descendants[0], 1
        while node.descendants:
            assert len(node.descendants) == 1
            node, depth = node.descendants[0], depth + 1
        assert (node.session.header["id"], depth) == ("deep-2999", 2999)

    def test_t_tr_5_ancestors_of_the_deepest(self) -> None:
        result = trace_session(self.chain(3000), "deep-2999")
        assert len(result.ancestors) == 2999 and result.ancestors[-1].header["id"] == "deep-0"

    def test_deep_trace_encodes_without_recursion(self) -> None:
        result = trace_session(self.chain(3000), "deep-0")
        encoded = encode_lineage_trace(result)
        builtins = lineage_trace_to_builtins(result)
        depth, level = 0, builtins["descendants"]
        while level:
            depth, level = depth + 1, level[0]["descendants"]
        assert depth == 2999
        # msgspec itself needs a recursion budget proportional to the depth;
        # with enough of it, it produces exactly our bytes.
        previous = sys.getrecursionlimit()
        sys.setrecursionlimit(20_000)
        try:
            assert encoded == msgspec.json.encode(result)
            assert builtins == msgspec.to_builtins(result)
        finally:
            sys.setrecursionlimit(previous)

    def test_encoding_matches_msgspec_on_random_forests(self) -> None:
        rng = random.Random(7)
        for _ in range(200):
            size = rng.randint(1, 25)
            records = [record(f"s{i}", rng.randint(0, 3), f"s{rng.randrange(i)}" if i and rng.random() < 0.8
                              else ("missing" if rng.random() < 0.2 else ABSENT)) for i in range(size)]
            result = trace_session(records, f"s{rng.randrange(size)}")
            assert encode_lineage_trace(result) == msgspec.json.encode(result)
            assert lineage_trace_to_builtins(result) == msgspec.to_builtins(result)
            walked = [node.session.header["id"] for _, node in iter_lineage_nodes(result.descendants)]
            assert len(walked) == len(set(walked))

    def test_iter_lineage_nodes_is_preorder_with_depth(self) -> None:
        result = trace_session(FAMILY, "parent")
        assert [(d, n.session.header["id"]) for d, n in iter_lineage_nodes(result.descendants)] == [
            (0, "target"), (1, "older"), (1, "a"), (2, "grandchild"), (1, "b")
        ]

    def test_clone_json_is_deep_and_iterative(self) -> None:
        value: Any = {"a": [1, {"b": None}]}
        copy = clone_json(value)
        copy["a"][1]["b"] = 2
        assert value == {"a": [1, {"b": None}]}
        deep: Any = []
        for _ in range(20_000):
            deep = [deep]
        cloned = clone_json(deep)
        assert cloned is not deep and isinstance(cloned[0], list)

    def test_trace_struct_shape(self) -> None:
        result = trace_session(FAMILY, "target")
        assert isinstance(result, SessionLineageTrace)
        assert list(msgspec.to_builtins(result)) == ["target", "ancestors", "descendants", "complete", "root"]
