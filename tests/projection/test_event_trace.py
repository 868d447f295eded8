"""``traceEvent`` (query-spec §5.2; T-TR-6..T-TR-20) and its building blocks."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from readmodel.core.errors import SessionQueryError
from readmodel.projection.eventtrace import (
    assemble_trace,
    build_event_records,
    derived_event_seqs,
    derived_links,
    event_record,
    event_sources,
    replacement_chain,
    require_target,
    target_index,
    trace_event,
)
from readmodel.projection.surface import fold_events
from readmodel.core.vocabulary import SessionEventRecord, to_builtins
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

HEADER: dict[str, Any] = {"version": 0, "id": "s", "createdAt": 1, "cwd": "/same", "delegationDepth": 0}

# The worked example of §5.2 (T-TR-6).
WORKED = [
    event("turn/start", 0, {"turn": 1}, time=10),
    event("step/start", 1, {"turn": 1, "step": 1}, time=11),
    log_only(2, time=12),
    user(3, sources=[2], time=13),
    assistant(4, op=replace(3, 3), sources=[3, 2], time=14),
    user(5, time=15),
    event("step/end", 6, {"turn": 1, "step": 1}, time=16),
    event("step/start", 7, {"turn": 1, "step": 2}, time=17),
    assistant(8, op=replace(4, 4), sources=[2, 4], time=18),
]


def trace(seq: Any, events: list[dict[str, Any]] = WORKED) -> dict[str, Any]:
    return to_builtins(trace_event("s", HEADER, events, seq))


def query_error(events: list[dict[str, Any]], seq: Any) -> SessionQueryError:
    with pytest.raises(SessionQueryError) as caught:
        trace_event("s", HEADER, events, seq)
    return caught.value


class TestWorkedExample:
    @pytest.mark.parametrize(
        ("seq", "surface", "replaced_by", "chain", "replaced", "sources", "derived"),
        [
            (3, "shadowed", 4, [4, 8], [], [2], [4]),
            (4, "shadowed", 8, [8], [3], [3, 2], [8]),
            (2, "log-only", None, [], [], [], [3, 4, 8]),
            (8, "current", None, [], [4], [2, 4], []),
        ],
    )
    def test_t_tr_6_table(self, seq: int, surface: str, replaced_by: int | None, chain: list[int],
                          replaced: list[int], sources: list[int], derived: list[int]) -> None:
        result = trace(seq)
        assert result["target"]["surface"] == surface
        assert result.get("replacedBy") == replaced_by
        assert ("replacedBy" in result) is (replaced_by is not None)  # absent, never null
        assert result["replacementChain"] == chain
        assert result["replacedEventSeqs"] == replaced
        assert result["sourceEventSeqs"] == sources  # recorded order, not sorted
        assert result["derivedEventSeqs"] == derived

    def test_t_tr_6_target_record_and_key_order(self) -> None:
        result = trace(3)
        assert result["target"] == {"sessionId": "s", "seq": 3, "type": "user/message", "time": 13, "surface": "shadowed"}
        assert list(result) == ["session", "target", "replacedBy", "replacementChain", "replacedEventSeqs",
                                "sourceEventSeqs", "derivedEventSeqs"]
        assert result["session"] == HEADER

    def test_t_tr_7_results_are_fresh(self) -> None:
        first = trace_event("s", HEADER, WORKED, 4)
        first.target.time = 999
        for values in (first.replacement_chain, first.replaced_event_seqs, first.source_event_seqs,
                       first.derived_event_seqs):
            values.append(99)
        first.session["cwd"] = "/mutated"
        again = trace_event("s", HEADER, WORKED, 4)
        assert again.target.time == 14
        assert (again.replacement_chain, again.replaced_event_seqs, again.source_event_seqs,
                again.derived_event_seqs) == ([8], [3], [3, 2], [8])
        assert HEADER["cwd"] == "/same" and WORKED[4]["sourceEventSeqs"] == [3, 2]

    def test_source_links_are_not_followed_transitively(self) -> None:
        events = [log_only(0), user(1, sources=[0]), assistant(2, sources=[1])]
        assert trace(0, events)["derivedEventSeqs"] == [1]  # not 2, which cites 1 only


class TestTargetLookup:
    def test_t_tr_9_missing_seq_is_reported_before_surface_validation(self) -> None:
        events = [user(0), user(1, op=replace(9, 9), sources=[0])]
        error = query_error(events, 9)
        assert error.code == "SESSION_QUERY_EVENT_NOT_FOUND"
        assert error.message == 'session "s" has no event at seq 9'
        assert query_error(events, 0).code == "SESSION_QUERY_INVALID_SURFACE"

    @pytest.mark.parametrize(
        ("seq", "shown"),
        [(-1, "-1"), (9, "9"), (1.5, "1.5"), (True, "true"), ("1", "1"), (None, "null"), (float("nan"), "NaN"),
         (float("inf"), "Infinity"), (1e21, "1e+21"), (1.5e-7, "1.5e-7")],
    )
    def test_not_found_for_anything_but_an_indexed_seq(self, seq: Any, shown: str) -> None:
        error = query_error(WORKED, seq)
        assert error.code == "SESSION_QUERY_EVENT_NOT_FOUND"
        assert error.message == f'session "s" has no event at seq {shown}'

    def test_array_position_must_carry_that_seq(self) -> None:
        events = [user(0), {**user(1), "seq": 7}]
        assert target_index(events, 1) is None
        assert query_error(events, 1).code == "SESSION_QUERY_EVENT_NOT_FOUND"

    def test_integral_float_and_negative_zero_address_events(self) -> None:
        assert target_index(WORKED, 3.0) == 3
        assert target_index(WORKED, -0.0) == 0  # JS: events[-0] is events[0] and -0 === 0
        assert trace(3.0)["target"]["seq"] == 3
        assert require_target("s", WORKED, 8) == 8


class TestInvalidSurfaces:
    """T-TR-10..T-TR-19: each log makes traceEvent(seq 0) fail with INVALID_SURFACE."""

    @pytest.mark.parametrize(
        "events",
        [
            pytest.param([event("turn/start", 0, {"turn": 1}, sources=[])], id="T-TR-10-sources-on-log-only"),
            pytest.param([user(0, sources="invalid")], id="T-TR-11-not-an-array"),
            pytest.param([user(0, sources=[])], id="T-TR-12-empty-on-user"),
            pytest.param([log_only(0), user(1, sources=[None])], id="T-TR-13-hole"),
            pytest.param([log_only(0), user(1, sources=[0, 0])], id="T-TR-14-duplicates"),
            pytest.param([log_only(0), user(1, sources=[-1])], id="T-TR-15-negative"),
            pytest.param([user(0, sources=[1]), log_only(1)], id="T-TR-16-later"),
            pytest.param([user(0), user(1, op=replace(0, 0))], id="T-TR-17-replacement-without-sources"),
            pytest.param([user(0), user(1), user(2, op=replace(1, 1), sources=[0])], id="T-TR-18-uncited-node"),
            pytest.param([event("turn/start", 0, {"turn": 1}, op="append")], id="T-TR-19-surfaceOp-on-log-only"),
        ],
    )
    def test_invalid_surface(self, events: list[dict[str, Any]]) -> None:
        error = query_error(events, 0)
        assert error.code == "SESSION_QUERY_INVALID_SURFACE"
        assert error.message.startswith("invalid session surface: ")

    def test_violation_after_the_target_still_fails(self) -> None:
        events = [*WORKED, user(9, op=ABSENT)]
        assert query_error(events, 0).code == "SESSION_QUERY_INVALID_SURFACE"


class TestBuildingBlocks:
    def test_derived_links_in_one_pass_match_per_target_scans(self) -> None:
        links = derived_links(WORKED)
        assert links == {2: [3, 4, 8], 3: [4], 4: [8]}
        for seq in range(len(WORKED)):
            assert links.get(seq, []) == derived_event_seqs(WORKED, seq)

    def test_event_sources_copy_in_recorded_order(self) -> None:
        assert event_sources(WORKED[4]) == [3, 2]
        assert event_sources(WORKED[0]) == []
        assert event_sources(user(3, sources=[2.0, 0])) == [2, 0]
        assert all(type(s) is int for s in event_sources(user(3, sources=[2.0])))
        copy = event_sources(WORKED[4])
        copy.append(1)
        assert WORKED[4]["sourceEventSeqs"] == [3, 2]

    def test_replacement_chain_from_mapping_or_lookup(self) -> None:
        replaced_by = fold_events(WORKED).replaced_by()
        assert replacement_chain(3, replaced_by) == [4, 8]
        calls: list[int] = []

        def lookup(seq: int) -> int | None:  # e.g. one DB query per hop
            calls.append(seq)
            return replaced_by.get(seq)

        assert replacement_chain(3, lookup) == [4, 8]
        assert calls == [3, 4, 8]
        assert replacement_chain(5, replaced_by) == []

    def test_assemble_trace_equals_trace_event(self) -> None:
        folded = fold_events(WORKED)
        links = derived_links(WORKED)
        for seq in range(len(WORKED)):
            record = event_record("s", WORKED[seq], folded.surfaces[seq])
            assembled = assemble_trace(HEADER, record, folded.replaced_by(),
                                       folded.replaced_event_seqs().get(seq, ()), event_sources(WORKED[seq]),
                                       links.get(seq, []))
            assert msgspec.json.encode(assembled) == msgspec.json.encode(trace_event("s", HEADER, WORKED, seq))

    def test_records_cover_every_event(self) -> None:
        events = [user(0), tool_result(1), tool_result(2, tool_data("short"), op=replace(1, 1), sources=[1])]
        records = build_event_records("s", events)
        assert records == [
            SessionEventRecord(session_id="s", seq=0, type="user/message", time=0, surface="current"),
            SessionEventRecord(session_id="s", seq=1, type="tool/result", time=0, surface="shadowed"),
            SessionEventRecord(session_id="s", seq=2, type="tool/result", time=0, surface="current"),
        ]

    def test_t_tr_8_pure_part_persisted_trace(self) -> None:
        # Persisted-only session with cwd /same: seq 0 is current.
        # (list/inspect call counts and backend failures land with the query side.)
        result = trace(0, [user(0), log_only(1)])
        assert result["target"]["surface"] == "current"
        assert result["session"]["cwd"] == "/same"
