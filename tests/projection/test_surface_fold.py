"""The surface fold (format-spec §6, query-spec Appendix A and §4.4).

Covers every ``SESSION_QUERY_INVALID_SURFACE`` condition of §6.5 (one test
each, plus the reference's check order), the §6.4 tool-result rewrite rule with
JavaScript value semantics, the §6.6 compaction example, T-EX-14/15/22,
T-SH-3/6, and the resumable :class:`SurfaceFold` API (deltas, serialisation,
failure persistence).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from readmodel.core.errors import SessionQueryError
from readmodel.projection.eventtrace import build_event_records
from readmodel.projection.surface import (
    SurfaceDelta,
    SurfaceFold,
    SurfaceFoldError,
    SurfaceReplacement,
    classify_events,
    fold_events,
    fold_session_surface,
    invalid_surface_error,
    iter_current_events,
    surface_kind,
)
from readmodel.projection.toolresults import (
    UNBLANKABLE,
    NullishRead,
    PendingDigest,
    blanked_tool_result,
    canonical_json,
    defer_fingerprint,
    digest_of,
    tool_result_fingerprint,
)
from tests.projection.surface_builders import (
    ABSENT,
    assistant,
    event,
    log_only,
    replace,
    tool_data,
    tool_result,
    user,
)


def fold_error(events: list[dict[str, Any]]) -> SurfaceFoldError:
    """The fold's error for an invalid log (fails the test if the log folds)."""
    with pytest.raises(SurfaceFoldError) as caught:
        fold_events(events)
    return caught.value


# ---------------------------------------------------------------------------
# Classification and ordering
# ---------------------------------------------------------------------------

class TestClassification:
    def test_empty_log_folds_to_nothing(self) -> None:
        result = fold_events([])
        assert (result.nodes, result.replacements, result.surfaces) == ([], [], [])

    def test_appends_are_current_and_other_types_log_only(self) -> None:
        events = [event("turn/start", 0, {"turn": 1}), user(1), log_only(2), assistant(3, sources=[2]),
                  tool_result(4, sources=[3]), event("turn/end", 5, {"turn": 1, "reason": {"kind": "completed"}})]
        result = fold_events(events)
        assert result.nodes == [1, 3, 4]
        assert result.surfaces == ["log-only", "current", "log-only", "current", "current", "log-only"]
        assert classify_events(events) == result.surfaces
        assert result.replacements == []

    def test_t_ex_14_replacement_shadows_its_range(self) -> None:
        # turn/start, step/start, user (append), chunk, assistant replacing the user node
        events = [event("turn/start", 0, {"turn": 1}), event("step/start", 1, {"turn": 1, "step": 1}), user(2),
                  log_only(3), assistant(4, op=replace(2, 2), sources=[2])]
        assert classify_events(events)[2:] == ["shadowed", "log-only", "current"]

    def test_t_ex_15_read_surface_is_in_surface_order(self) -> None:
        events = [
            user(0, "old"),
            log_only(1),
            user(2, "checkpoint", op=replace(0, 0), sources=[0]),
            user(3, "retained tail"),
            user(4, "latest checkpoint", op=replace(2, 3), sources=[2, 3]),
            assistant(5),
        ]
        result = fold_events(events)
        current = list(iter_current_events(events, result))
        assert [(e["seq"], e["type"]) for e in current] == [(4, "user/message"), (5, "assistant/message")]
        assert events[-1]["seq"] == 5  # capturedThroughSeq of this observation
        assert result.surfaces == ["shadowed", "log-only", "shadowed", "shadowed", "current", "current"]
        # the replacement node 2 was itself replaced later: still "shadowed", replaced by 4
        assert result.replaced_by() == {0: 2, 2: 4, 3: 4}

    def test_t_sh_3_record_surfaces(self) -> None:
        events = [user(0, "Hello\n(AI)+"), log_only(1), assistant(2, "replacement", op=replace(0, 0), sources=[0]),
                  event("turn/end", 3, {"turn": 1, "reason": {"kind": "interrupted"}})]
        records = build_event_records("s", events)
        assert [r.surface for r in records] == ["shadowed", "log-only", "current", "log-only"]
        assert [(r.session_id, r.seq, r.type) for r in records] == [
            ("s", 0, "user/message"), ("s", 1, "assistant/chunk"), ("s", 2, "assistant/message"), ("s", 3, "turn/end")
        ]

    def test_compaction_example_of_section_6_6(self) -> None:
        """The real compaction log: [4, 13, 15] -> [21, 13, 15] -> [21, 13, 15, 28]."""
        events: list[dict[str, Any]] = [log_only(seq) for seq in range(29)]
        events[4] = user(4, "first prompt")
        events[13] = assistant(13)
        events[15] = user(15, "follow-up")
        events[19] = event("compaction/start", 19, {"compactionId": "c", "turn": None})
        events[20] = event("compaction/summary", 20, {"compactionId": "c"})
        events[21] = user(21, "summary", op=replace(4, 4), sources=[19, 20, 4])
        events[28] = assistant(28)
        fold = SurfaceFold()
        fold.extend(events[:21])
        assert fold.nodes() == [4, 13, 15]
        fold.apply(events[21])
        assert fold.nodes() == [21, 13, 15]  # the replacement takes the range's position, not the tail
        fold.extend(events[22:])
        assert fold.nodes() == [21, 13, 15, 28]
        assert fold.result().replacements == [SurfaceReplacement(21, 4, 4, (4,))]

    def test_replacement_records_actual_nodes_in_surface_order(self) -> None:
        # nodes [3, 1, 2] after replacing 0 by 3; then replace 3..2 removes [3, 1, 2], not seqs 2..3
        events = [user(0), user(1), user(2), user(3, op=replace(0, 0), sources=[0]),
                  user(4, op=replace(3, 2), sources=[1, 2, 3])]
        result = fold_events(events)
        assert result.replacements[-1] == SurfaceReplacement(4, 3, 2, (3, 1, 2))
        assert result.replaced_event_seqs() == {3: (0,), 4: (3, 1, 2)}
        assert result.nodes == [4]

    def test_middle_range_replacement_keeps_the_tail_in_place(self) -> None:
        events = [user(0), assistant(1), user(2), assistant(3), user(4),
                  user(5, op=replace(1, 3), sources=[3, 2, 1, 0])]
        result = fold_events(events)
        assert result.nodes == [0, 5, 4]
        fold = SurfaceFold()
        fold.extend(events)
        assert fold.is_current(4) and not fold.is_current(2)
        fold.apply(user(6, op=replace(4, 4), sources=[4]))  # positions after the splice are still right
        assert fold.nodes() == [0, 5, 6]

    def test_any_surface_type_may_replace_a_mixed_range(self) -> None:
        events = [user(0), assistant(1), tool_result(2), tool_result(3, op=replace(2, 2), sources=[2]),
                  user(4, op=replace(0, 3), sources=[0, 1, 3])]
        assert fold_events(events).nodes == [4]

    def test_surface_kind(self) -> None:
        assert surface_kind("append") == "append"
        assert surface_kind(replace(1, 2)) == "replace"
        assert surface_kind({"op": "replace", "start": 1}) is None
        assert surface_kind(None) is None


# ---------------------------------------------------------------------------
# §6.5: every INVALID_SURFACE condition
# ---------------------------------------------------------------------------

class TestSeqContiguity:
    @pytest.mark.parametrize(
        "events",
        [
            pytest.param([user(1)], id="not-zero-based"),
            pytest.param([user(0), user(2)], id="gap"),
            pytest.param([user(0), user(0)], id="repeat"),
            pytest.param([event("turn/start", True, {})], id="bool-is-not-0"),
            pytest.param([event("turn/start", "0", {})], id="string-seq"),
            pytest.param([{"type": "turn/start", "time": 0, "data": {}}], id="missing-seq"),
            pytest.param(["not an event"], id="not-a-record"),
        ],
    )
    def test_seq_must_equal_log_position(self, events: list[Any]) -> None:
        error = fold_error(events)
        assert "without gaps" in error.message
        assert error.seq == len(events) - 1

    def test_integral_float_seq_is_the_same_number(self) -> None:
        assert fold_events([user(0), event("turn/start", 1.0, {})]).surfaces == ["current", "log-only"]


class TestMarkersOnNonSurfaceTypes:
    def test_surface_op_on_a_log_only_type(self) -> None:  # T-TR-19
        assert "carries surfaceOp" in fold_error([event("turn/start", 0, {}, op="append")]).message

    def test_null_surface_op_counts_as_present(self) -> None:
        assert "carries surfaceOp" in fold_error([event("turn/start", 0, {}, op=None)]).message

    def test_source_event_seqs_on_a_log_only_type(self) -> None:  # T-TR-10
        assert "carries sourceEventSeqs" in fold_error([event("turn/start", 0, {}, sources=[])]).message

    def test_surface_op_is_reported_before_source_event_seqs(self) -> None:
        assert "carries surfaceOp" in fold_error([event("step/end", 0, {}, op="append", sources=[1])]).message

    def test_non_string_type_is_not_a_surface_type(self) -> None:
        assert fold_events([event(7, 0, {})]).surfaces == ["log-only"]
        assert "carries surfaceOp" in fold_error([event(["user/message"], 0, {}, op="append")]).message


class TestSurfaceOpShape:
    def test_missing_surface_op_on_a_surface_type(self) -> None:  # T-EX-22
        error = fold_error([user(0, op=ABSENT)])
        assert "has no surfaceOp" in error.message

    @pytest.mark.parametrize("op", [None, 1, True, [], ["append"], "prepend", "APPEND", ""])
    def test_unusable_surface_op(self, op: Any) -> None:
        assert "unusable surfaceOp" in fold_error([user(0, op=op)]).message

    @pytest.mark.parametrize(
        "op",
        [
            {"op": "replace", "start": 0, "end": 0, "extra": 1},
            {"op": "replace", "start": 0},
            {"start": 0, "end": 0, "kind": "replace"},
            {"op": "Replace", "start": 0, "end": 0},
            {"op": "replace", "start": -1, "end": 0},
            {"op": "replace", "start": 0, "end": 0.5},
            {"op": "replace", "start": True, "end": 0},
            {"op": "replace", "start": "0", "end": 0},
            {"op": "replace", "start": 0, "end": None},
            {"op": "replace", "start": 0, "end": 2**53},
            {},
        ],
    )
    def test_malformed_replace_surface_op(self, op: dict[str, Any]) -> None:
        assert "malformed replace surfaceOp" in fold_error([user(0), user(1, op=op, sources=[0])]).message

    def test_integral_float_bounds_are_accepted(self) -> None:
        result = fold_events([user(0), user(1, op=replace(0.0, 0.0), sources=[0])])
        assert result.replacements == [SurfaceReplacement(1, 0, 0, (0,))]


class TestReplacementRange:
    def test_start_never_on_the_surface(self) -> None:  # T-SH-6 / T-TR-9 shape
        assert "starts at 9, which is not a current" in fold_error([user(0, op=replace(9, 9), sources=[])]).message

    def test_start_is_a_log_only_event(self) -> None:
        assert "not a current surface node" in fold_error([log_only(0), user(1, op=replace(0, 0), sources=[0])]).message

    def test_a_shadowed_node_can_never_be_named_again(self) -> None:
        events = [user(0), user(1, op=replace(0, 0), sources=[0]), user(2, op=replace(0, 1), sources=[0, 1])]
        assert "starts at 0, which is not a current" in fold_error(events).message

    def test_end_not_on_the_surface(self) -> None:
        assert "ends at 5, which is not a current" in fold_error([user(0), user(1, op=replace(0, 5), sources=[0])]).message

    def test_start_after_end(self) -> None:
        events = [user(0), user(1), user(2, op=replace(1, 0), sources=[0, 1])]
        assert "after its end node" in fold_error(events).message

    def test_range_is_checked_before_provenance(self) -> None:
        # bad sources too, but the reference locates the range first
        events = [user(0), user(1, op=replace(7, 7), sources="invalid")]
        assert "not a current surface node" in fold_error(events).message


class TestProvenance:
    def test_not_an_array(self) -> None:  # T-TR-11
        assert "not an array" in fold_error([user(0, sources="invalid")]).message

    def test_null_is_present_and_not_an_array(self) -> None:
        assert "not an array" in fold_error([user(0, sources=None)]).message

    def test_empty_on_a_user_message(self) -> None:  # T-TR-12
        assert "is empty" in fold_error([user(0, sources=[])]).message

    def test_empty_on_a_tool_result(self) -> None:
        assert "is empty" in fold_error([tool_result(0, sources=[])]).message

    def test_empty_is_allowed_on_an_assistant_message(self) -> None:
        assert fold_events([assistant(0, sources=[])]).nodes == [0]

    @pytest.mark.parametrize("bad", [None, -1, 1.5, True, "0", 2**53, [0], {"seq": 0}])
    def test_element_not_a_seq(self, bad: Any) -> None:  # T-TR-13 (JSON cannot hold holes; null is the analogue), T-TR-15
        error = fold_error([log_only(0), log_only(1), user(2, sources=[0, bad])])
        assert "not a non-negative integer seq" in error.message

    def test_duplicates(self) -> None:  # T-TR-14
        assert "repeats a seq" in fold_error([log_only(0), user(1, sources=[0, 0])]).message

    def test_one_and_one_point_zero_are_duplicates(self) -> None:
        assert "repeats a seq" in fold_error([log_only(0), user(1, sources=[0, 0.0])]).message

    def test_not_earlier(self) -> None:  # T-TR-16
        assert "not an earlier event" in fold_error([user(0, sources=[1])]).message

    def test_own_seq_is_not_earlier(self) -> None:
        assert "cites 1, which is not an earlier" in fold_error([log_only(0), user(1, sources=[0, 1])]).message

    def test_check_order_types_then_duplicates_then_earlier(self) -> None:
        # [5, 5] on seq 0: both not earlier and duplicated -> duplicates reported first
        assert "repeats a seq" in fold_error([user(0, sources=[5, 5])]).message
        # [5, "x"]: the bad element wins although 5 comes first
        assert "holds \"x\"" in fold_error([user(0, sources=[5, "x"])]).message

    def test_sources_may_cite_non_surface_and_shadowed_events(self) -> None:
        events = [log_only(0), user(1), user(2, op=replace(1, 1), sources=[0, 1]), assistant(3, sources=[0, 1, 2])]
        assert fold_events(events).nodes == [2, 3]

    def test_replacement_without_sources(self) -> None:  # T-TR-17
        error = fold_error([user(0), user(1, op=replace(0, 0))])
        assert "do not cite: 0" in error.message

    def test_replacement_sources_missing_a_shadowed_node(self) -> None:  # T-TR-18
        error = fold_error([user(0), user(1), user(2, op=replace(1, 1), sources=[0])])
        assert "do not cite: 1" in error.message

    def test_every_missing_node_is_listed(self) -> None:
        events = [user(0), user(1), user(2), user(3, op=replace(0, 2), sources=[1])]
        assert fold_error(events).message.endswith("do not cite: 0, 2")


class TestToolResultRewrite:
    """§6.4: a tool/result replacement rewrites one current tool/result's content only."""

    @staticmethod
    def prune(data: dict[str, Any], *, start: int = 1, end: int = 1, sources: Any = ABSENT) -> list[dict[str, Any]]:
        return [user(0), tool_result(1), tool_result(2, data, op=replace(start, end),
                                                      sources=[start, end] if sources is ABSENT else sources)]

    def test_content_may_change(self) -> None:
        events = self.prune(tool_data("[pruned]"), sources=[1])
        assert fold_events(events).nodes == [0, 2]

    def test_extra_top_level_key_order_is_irrelevant(self) -> None:
        data = tool_data("short")
        reordered = {key: data[key] for key in reversed(list(data))}
        assert fold_events(self.prune(reordered, sources=[1])).nodes == [0, 2]

    def test_js_number_semantics_1_equals_1_0(self) -> None:
        assert fold_events(self.prune(tool_data("x", turn=1.0, step=1e0), sources=[1])).nodes == [0, 2]

    @pytest.mark.parametrize(
        "changed",
        [
            pytest.param(tool_data("x", turn=True), id="true-is-not-1"),
            pytest.param(tool_data("x", turn=2), id="turn"),
            pytest.param(tool_data("x", step="1"), id="step-type"),
            pytest.param(tool_data("x", message_id="t2"), id="message-id"),
            pytest.param(tool_data("x", call_id="call-2"), id="tool-call-id"),
            pytest.param(tool_data("x", is_error=True), id="is-error"),
            pytest.param(tool_data("x", is_error=0), id="is-error-false-vs-0"),
            pytest.param(tool_data("x", error={"name": "E", "code": "X"}), id="error-added"),
            pytest.param(tool_data("x", meta={"a": 1}), id="meta-added"),
            pytest.param(tool_data("x", meta=None), id="meta-null-vs-absent"),
        ],
    )
    def test_anything_but_the_content_must_stay(self, changed: dict[str, Any]) -> None:
        error = fold_error(self.prune(changed, sources=[1]))
        assert "changes more than the result content" in error.message

    def test_nested_meta_compared_deeply(self) -> None:
        original = tool_data("long", meta={"files": [1, 2, {"k": [True, None]}]})
        same = tool_data("short", meta={"files": [1.0, 2, {"k": [True, None]}]})
        different = tool_data("short", meta={"files": [1, 2, {"k": [True, False]}]})
        base = [user(0), tool_result(1, original)]
        assert fold_events([*base, tool_result(2, same, op=replace(1, 1), sources=[1])]).nodes == [0, 2]
        error = fold_error([*base, tool_result(2, different, op=replace(1, 1), sources=[1])])
        assert "changes more than" in error.message

    def test_only_the_first_content_block_is_compared(self) -> None:
        # The reference compares message.content reduced to [first block with content:null]:
        # later blocks never take part in the comparison.
        original = tool_data("long")
        original["message"]["content"].append({"type": "text", "text": "stray"})
        pruned = tool_data("short")
        assert fold_events([user(0), tool_result(1, original), tool_result(2, pruned, op=replace(1, 1), sources=[1])]).nodes == [0, 2]

    def test_must_shadow_exactly_one_node(self) -> None:
        events = [tool_result(0), tool_result(1), tool_result(2, op=replace(0, 1), sources=[0, 1])]
        assert "shadows 2 nodes" in fold_error(events).message

    def test_must_target_a_tool_result(self) -> None:
        events = [user(0), tool_result(1, op=replace(0, 0), sources=[0])]
        assert "not a tool/result" in fold_error(events).message

    def test_nested_prunes_compare_with_the_current_copy(self) -> None:
        events = [tool_result(0, tool_data("v1")), tool_result(1, tool_data("v2"), op=replace(0, 0), sources=[0]),
                  tool_result(2, tool_data("v3"), op=replace(1, 1), sources=[1])]
        assert fold_events(events).nodes == [2]
        bad = [*events[:2], tool_result(2, tool_data("v3", turn=9), op=replace(1, 1), sources=[1])]
        assert "changes more than" in fold_error(bad).message

    def test_tool_result_shadowed_by_a_user_checkpoint_is_forgotten(self) -> None:
        events = [tool_result(0), user(1, op=replace(0, 0), sources=[0]),
                  tool_result(2, op=replace(1, 1), sources=[1])]
        assert "not a tool/result" in fold_error(events).message

    def test_unblankable_data_fails_like_a_property_read_on_undefined(self) -> None:
        events = [tool_result(0, {"turn": 1}), tool_result(1, tool_data(), op=replace(0, 0), sources=[0])]
        assert "cannot be compared" in fold_error(events).message

    def test_fingerprint_ignores_inner_content_only(self) -> None:
        assert tool_result_fingerprint(tool_data("a")) == tool_result_fingerprint(tool_data("b" * 10_000))
        assert tool_result_fingerprint(tool_data("a")) != tool_result_fingerprint(tool_data("a", step=2))
        assert tool_result_fingerprint({"message": None}) == b""

    def test_canonical_json_follows_js_equality(self) -> None:
        assert canonical_json({"a": 1, "b": [1.0, -0.0]}) == canonical_json({"b": [1, 0], "a": 1.0})
        assert canonical_json(True) != canonical_json(1)
        assert canonical_json(None) != canonical_json([])
        assert canonical_json({"a": None}) != canonical_json({})
        assert canonical_json(2**53 + 1) == canonical_json(2**53)  # both are the double 2**53 in JS
        assert canonical_json(["ab"]) != canonical_json(["a", "b"])
        assert canonical_json({"s": "1.0", "n": 1.5e16}) == b'{"n":15000000000000000,"s":"1.0"}'
        assert canonical_json("\ud800") != canonical_json("\udc00")  # lone surrogates are fine

    def test_canonical_json_has_no_nesting_limit(self) -> None:
        deep: Any = {"k": 1.0}
        for _ in range(50_000):
            deep = [deep]
        text = canonical_json(deep)
        assert text == b"[" * 50_000 + b'{"k":1}' + b"]" * 50_000


# ---------------------------------------------------------------------------
# Query-side error mapping
# ---------------------------------------------------------------------------

class TestQueryErrors:
    def test_fold_errors_become_invalid_surface(self) -> None:  # T-EX-22
        with pytest.raises(SessionQueryError) as caught:
            fold_session_surface([user(0, op=ABSENT)])
        error = caught.value
        assert error.code == "SESSION_QUERY_INVALID_SURFACE"
        assert error.message.startswith("invalid session surface: ")
        assert isinstance(error.cause, SurfaceFoldError)
        assert error.message == f"invalid session surface: {error.cause.message}"

    def test_t_sh_6_records_of_a_log_starting_with_a_bad_replacement(self) -> None:
        with pytest.raises(SessionQueryError) as caught:
            build_event_records("s", [user(0, op=replace(3, 3), sources=[])])
        assert caught.value.code == "SESSION_QUERY_INVALID_SURFACE"

    def test_t_tr_20_records_of_a_log_with_duplicate_sources(self) -> None:
        with pytest.raises(SessionQueryError) as caught:
            build_event_records("s", [log_only(0), user(1, sources=[0, 0])])
        assert caught.value.code == "SESSION_QUERY_INVALID_SURFACE"

    def test_conversion_helper(self) -> None:
        error = invalid_surface_error(SurfaceFoldError("boom", 3))
        assert (error.code, error.message) == ("SESSION_QUERY_INVALID_SURFACE", "invalid session surface: boom")


# ---------------------------------------------------------------------------
# The resumable fold
# ---------------------------------------------------------------------------

COMPACTED_LOG = [
    user(0), assistant(1), tool_result(2), tool_result(3, tool_data("pruned"), op=replace(2, 2), sources=[2]),
    log_only(4), user(5, op=replace(0, 3), sources=[4, 0, 1, 3]), assistant(6),
]


class TestSurfaceFold:
    def test_apply_reports_the_shadowed_earlier_events(self) -> None:
        fold = SurfaceFold()
        reports = [fold.apply(e) for e in COMPACTED_LOG]
        assert reports == [None, None, None, SurfaceReplacement(3, 2, 2, (2,)), None,
                           SurfaceReplacement(5, 0, 3, (0, 1, 3)), None]
        assert fold.generation == 2 and fold.next_seq == 7

    def test_extend_delta_across_batches(self) -> None:
        fold = SurfaceFold(track_history=False)
        first = fold.extend(COMPACTED_LOG[:4])
        assert first == SurfaceDelta(0, ["current", "current", "shadowed", "current"], [],
                                     [SurfaceReplacement(3, 2, 2, (2,))])
        second = fold.extend(COMPACTED_LOG[4:])
        assert second.first_seq == 4
        assert second.surfaces == ["log-only", "current", "current"]
        assert second.shadowed_earlier == [0, 1, 3]
        assert fold.nodes() == [5, 6]

    def test_classify_needs_history(self) -> None:
        fold = SurfaceFold(track_history=False)
        fold.extend(COMPACTED_LOG)
        assert fold.is_current(5) and not fold.is_current(0)
        with pytest.raises(ValueError):
            fold.classify(0)
        with pytest.raises(ValueError):
            fold.result()
        tracked = SurfaceFold()
        tracked.extend(COMPACTED_LOG)
        assert [tracked.classify(s) for s in range(7)] == fold_events(COMPACTED_LOG).surfaces
        with pytest.raises(IndexError):
            tracked.classify(7)

    @pytest.mark.parametrize("track_history", [True, False])
    def test_state_round_trip_at_every_point(self, track_history: bool) -> None:
        whole = SurfaceFold(track_history=track_history)
        whole.extend(COMPACTED_LOG)
        for split in range(len(COMPACTED_LOG) + 1):
            first = SurfaceFold(track_history=track_history)
            first.extend(COMPACTED_LOG[:split])
            resumed = SurfaceFold.from_bytes(first.to_bytes())
            assert resumed.tracks_history is track_history
            resumed.extend(COMPACTED_LOG[split:])
            assert resumed.to_bytes() == whole.to_bytes()
            assert resumed.nodes() == [5, 6]

    def test_failed_fold_stays_failed_and_unchanged(self) -> None:
        fold = SurfaceFold()
        fold.extend(COMPACTED_LOG[:3])
        before = fold.to_bytes()
        with pytest.raises(SurfaceFoldError) as caught:
            fold.apply(user(3, op=replace(9, 9), sources=[]))
        assert fold.error is caught.value
        assert fold.next_seq == 3 and fold.nodes() == [0, 1, 2]
        with pytest.raises(SurfaceFoldError):
            fold.apply(user(3))  # a valid event cannot rescue the log
        with pytest.raises(SurfaceFoldError):
            fold.result()
        restored = SurfaceFold.from_bytes(fold.to_bytes())
        assert restored.error is not None and restored.error.message == caught.value.message
        with pytest.raises(SurfaceFoldError):
            restored.apply(user(3))
        assert SurfaceFold.from_bytes(before).error is None

    def test_foreign_state_is_refused(self) -> None:
        with pytest.raises(ValueError):
            SurfaceFold.from_bytes(b"\x00garbage")
        import msgspec
        bogus = msgspec.msgpack.encode([99, 0, 0, [], {}, None, None])
        with pytest.raises(ValueError, match="format 99"):
            SurfaceFold.from_bytes(bogus)

    def test_tool_result_state_survives_a_restore(self) -> None:
        fold = SurfaceFold(track_history=False)
        fold.extend([user(0), tool_result(1)])
        restored = SurfaceFold.from_bytes(fold.to_bytes())
        with pytest.raises(SurfaceFoldError, match="changes more than"):
            restored.apply(tool_result(2, tool_data("x", turn=3), op=replace(1, 1), sources=[1]))

    def test_many_prunes_on_a_long_surface(self) -> None:
        events: list[dict[str, Any]] = []
        for index in range(0, 60_000, 3):
            events += [user(index), tool_result(index + 1),
                       tool_result(index + 2, tool_data("p"), op=replace(index + 1, index + 1), sources=[index + 1])]
        fold = SurfaceFold(track_history=False)
        delta = fold.extend(events)
        assert len(fold.nodes()) == 40_000
        assert delta.surfaces.count("shadowed") == 20_000


def _fingerprint_anew(data: Any) -> bytes:
    try:
        return digest_of(blanked_tool_result(copy.deepcopy(data)))
    except NullishRead:
        return UNBLANKABLE


@given(
    st.lists(
        st.tuples(
            st.one_of(st.builds(lambda output, step: tool_data(output, step=step), st.text(max_size=8), st.integers(0, 2)),
                      st.just({"message": None})),
            st.booleans(),  # folded (deferred) first
            st.sampled_from(["same", "copy", "other"]),  # which object the digest is then asked for
        ),
        min_size=1,
        max_size=8,
    )
)
def test_a_deferred_fingerprint_equals_the_fingerprint_computed_anew(steps: list[tuple[Any, bool, str]]) -> None:
    # The fold defers a tool result's digest and the indexer asks for the same event's digest
    # right after: one computation serves both, and never answers for another object.
    other = tool_data("unrelated", step=7)
    for data, deferred, asked in steps:
        pending = defer_fingerprint(data, remember=True) if deferred else None
        target = data if asked == "same" else copy.deepcopy(data) if asked == "copy" else other
        assert tool_result_fingerprint(target) == _fingerprint_anew(target)
        if pending is not None:
            assert (pending.resolve() if type(pending) is PendingDigest else pending) == _fingerprint_anew(data)


def test_a_batch_of_deferred_fingerprints_is_computed_once_each_and_the_oldest_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fold defers a whole batch's tool results before the indexer asks for their digests:
    # each is hashed once, for both; past RECENT_DIGESTS the oldest is hashed again, equal.
    from readmodel.projection import toolresults

    hashed: list[bytes] = []

    def counted(blanked: Any) -> bytes:
        digest = digest_of(blanked)
        hashed.append(digest)
        return digest

    monkeypatch.setattr(toolresults, "digest_of", counted)
    batch = [tool_data(f"output {n}", step=n % 3) for n in range(toolresults.RECENT_DIGESTS)]
    pendings = [defer_fingerprint(data, remember=True) for data in batch]
    assert [tool_result_fingerprint(data) for data in batch] == [_fingerprint_anew(data) for data in batch]
    assert len(hashed) == len(batch)
    assert [pending.resolve() for pending in pendings if type(pending) is PendingDigest] == [_fingerprint_anew(data) for data in batch]
    assert len(hashed) == len(batch)  # the fold's own digests were those already computed
    hashed.clear()
    overflow = [tool_data(f"more {n}") for n in range(toolresults.RECENT_DIGESTS + 1)]
    for data in overflow:
        defer_fingerprint(data, remember=True)
    assert tool_result_fingerprint(overflow[0]) == _fingerprint_anew(overflow[0])  # forgotten: hashed anew
    assert tool_result_fingerprint(overflow[-1]) == _fingerprint_anew(overflow[-1])
    assert len(hashed) == 2
    assert len(toolresults._recent) == toolresults.RECENT_DIGESTS - 1  # an entry goes once it is asked for
    # A fold that no projector in this process follows (a query's) keeps nothing alive.
    toolresults._recent.clear()
    fold = SurfaceFold(track_history=False)
    for seq, data in enumerate(overflow[:3]):
        fold.apply(tool_result(seq, data))
    assert not toolresults._recent
