"""Filters: materialisation, predicates and the text clause (query-spec §3, T-SH-4..8)."""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from readmodel.core.errors import SessionQueryError
from readmodel.projection.extraction import build_documents
from readmodel.projection.filters import (
    _simple_fold,
    compile_text_filter,
    event_predicate,
    filter_event_documents,
    filter_session_records,
    materialize_event_filters,
    materialize_event_metadata_filters,
    materialize_session_filters,
    session_predicate,
)
from readmodel.core.jsvalues import JS_WHITESPACE
from readmodel.core.vocabulary import SessionEventSearchDocument, SessionRecord
from tests.corpus import golden
from tests.projection.builders import text, user
from tests.projection.test_extraction import T_SH_3_SURFACES, t_sh_3_events

INVALID = "SESSION_QUERY_INVALID_FILTER"


def header(value: str, **extra: Any) -> dict[str, Any]:
    return {"version": 0, "id": value, "createdAt": 10, **extra}


def invalid(message: str) -> Any:
    """Context manager asserting an INVALID_FILTER error with this exact message."""
    return pytest.raises(SessionQueryError, match="^" + re.escape(message) + "$")


def expect_invalid(call: Any, message: str | None = None) -> None:
    with pytest.raises(SessionQueryError) as caught:
        call()
    assert caught.value.code == INVALID
    if message is not None:
        assert caught.value.message == message


@pytest.fixture
def records() -> list[SessionRecord]:
    return [
        SessionRecord(header=header("a", cwd="/a", parentSession="parent"), live=True, persisted=False),
        SessionRecord(header=header("b", createdAt=20), live=False, persisted=True),
    ]


@pytest.fixture
def documents() -> list[SessionEventSearchDocument]:
    return build_documents("session", t_sh_3_events(), T_SH_3_SURFACES)


# --------------------------------------------------------------------------- T-SH-4


class TestSessionHelper:
    def test_all_five_clauses_combined(self, records: list[SessionRecord]) -> None:
        result = filter_session_records(records, [
            {"kind": "id", "values": ["a", "x"]},
            {"kind": "cwd", "values": ["/a", None]},
            {"kind": "created-at", "from": 5, "to": 15},
            {"kind": "parent", "values": ["parent", None]},
            {"kind": "availability", "values": ["live"]},
        ])
        assert result == [records[0]]
        assert result[0] is records[0]

    @pytest.mark.parametrize(
        "clause",
        [
            {"kind": "cwd", "values": [None]},
            {"kind": "parent", "values": [None]},
            {"kind": "availability", "values": ["persisted"]},
        ],
    )
    def test_null_and_persisted_select_b(self, records: list[SessionRecord], clause: dict[str, Any]) -> None:
        assert filter_session_records(records, [clause]) == [records[1]]

    def test_unknown_availability_value(self, records: list[SessionRecord]) -> None:
        expect_invalid(
            lambda: filter_session_records(records, [{"kind": "availability", "values": ["remote"]}]),
            'session availability filter contains unknown value "remote"',
        )

    def test_explicit_null_field_is_null(self) -> None:
        record = SessionRecord(header=header("n", cwd=None, parentSession=None), live=True, persisted=False)
        assert filter_session_records([record], [{"kind": "cwd", "values": [None]}, {"kind": "parent", "values": [None]}]) == [record]

    def test_availability_values_are_ored(self, records: list[SessionRecord]) -> None:
        assert filter_session_records(records, [{"kind": "availability", "values": ["live", "persisted"]}]) == records
        both = SessionRecord(header=header("c"), live=True, persisted=True)
        assert filter_session_records([both], [{"kind": "availability", "values": ["persisted"]}]) == [both]

    def test_empty_values_match_nothing(self, records: list[SessionRecord]) -> None:
        for kind in ("id", "cwd", "parent", "availability"):
            assert filter_session_records(records, [{"kind": kind, "values": []}]) == []

    def test_no_filters_keeps_everything(self, records: list[SessionRecord]) -> None:
        assert filter_session_records(records) == records
        assert filter_session_records(records, []) == records

    def test_ranges_are_inclusive_and_open_ended(self, records: list[SessionRecord]) -> None:
        assert filter_session_records(records, [{"kind": "created-at", "from": 10, "to": 10}]) == [records[0]]
        assert filter_session_records(records, [{"kind": "created-at", "from": 20}]) == [records[1]]
        assert filter_session_records(records, [{"kind": "created-at", "to": 19.5}]) == [records[0]]
        assert filter_session_records(records, [{"kind": "created-at"}]) == records

    def test_clauses_are_anded(self, records: list[SessionRecord]) -> None:
        assert filter_session_records(records, [{"kind": "id", "values": ["a"]}, {"kind": "availability", "values": ["persisted"]}]) == []

    def test_matching_is_strict_string_equality(self, records: list[SessionRecord]) -> None:
        assert filter_session_records(records, [{"kind": "id", "values": ["A", " a"]}]) == []
        assert filter_session_records(records, [{"kind": "cwd", "values": ["/a/"]}]) == []

    def test_predicate_is_reusable(self, records: list[SessionRecord]) -> None:
        predicate = session_predicate([{"kind": "id", "values": ["b"]}])
        assert [predicate(record) for record in records] == [False, True]


# --------------------------------------------------------------------------- T-SH-5


class TestEventHelper:
    def test_metadata_and_text_clauses_combined(self, documents: list[SessionEventSearchDocument]) -> None:
        result = filter_event_documents(documents, [
            {"kind": "seq", "from": 0, "to": 1},
            {"kind": "time", "from": 9, "to": 11},
            {"kind": "type", "values": ["user/message", "tool/result"]},
            {"kind": "surface", "values": ["shadowed"]},
            {"kind": "text", "text": "hello   (ai)+"},
        ])
        assert result == [documents[0]]
        assert result[0] is documents[0]

    def test_unicode_case_insensitive(self) -> None:
        assert compile_text_filter("CAFÉ").search("café")

    def test_no_filters_returns_every_document(self, documents: list[SessionEventSearchDocument]) -> None:
        assert filter_event_documents(documents) == documents

    def test_empty_surface_list_returns_nothing(self, documents: list[SessionEventSearchDocument]) -> None:
        assert filter_event_documents(documents, [{"kind": "surface", "values": []}]) == []
        assert filter_event_documents(documents, [{"kind": "type", "values": []}]) == []

    def test_unknown_surface_value(self, documents: list[SessionEventSearchDocument]) -> None:
        expect_invalid(
            lambda: filter_event_documents(documents, [{"kind": "surface", "values": ["future"]}]),
            'session surface filter contains unknown value "future"',
        )

    def test_blank_text_fails_to_compile(self) -> None:
        expect_invalid(lambda: compile_text_filter(" \n "), "session text filter must contain non-whitespace text")

    def test_type_values_are_open(self, documents: list[SessionEventSearchDocument]) -> None:
        assert filter_event_documents(documents, [{"kind": "type", "values": ["not/a-real-type"]}]) == []

    def test_surface_values_are_ored(self, documents: list[SessionEventSearchDocument]) -> None:
        result = filter_event_documents(documents, [{"kind": "surface", "values": ["current", "log-only"]}])
        assert [d.seq for d in result] == [2, 3]

    def test_seq_and_time_ranges(self, documents: list[SessionEventSearchDocument]) -> None:
        assert [d.seq for d in filter_event_documents(documents, [{"kind": "seq", "from": 2}])] == [2, 3]
        assert [d.seq for d in filter_event_documents(documents, [{"kind": "time", "to": 12}])] == [0, 2]
        assert [d.seq for d in filter_event_documents(documents, [{"kind": "seq", "from": 0.5, "to": 2.5}])] == [2]


# --------------------------------------------------------------------------- T-SH-6


class TestPredicateTimeValidation:
    @pytest.mark.parametrize(
        ("clause", "message"),
        [
            ({"kind": "seq", "from": math.nan}, "session seq filter from must be finite"),
            ({"kind": "seq", "to": math.inf}, "session seq filter to must be finite"),
            ({"kind": "time", "from": 2, "to": 1}, "session time filter from must be less than or equal to to"),
        ],
    )
    def test_event_ranges(self, documents: list[SessionEventSearchDocument], clause: dict[str, Any], message: str) -> None:
        expect_invalid(lambda: filter_event_documents(documents, [clause]), message)
        expect_invalid(lambda: filter_event_documents([], [clause]), message)

    def test_created_at_nan_fails_on_empty_and_non_empty_input(self, records: list[SessionRecord]) -> None:
        clause = {"kind": "created-at", "from": math.nan}
        expect_invalid(lambda: filter_session_records([], [clause]), "session created-at filter from must be finite")
        expect_invalid(lambda: filter_session_records(records, [clause]), "session created-at filter from must be finite")

    def test_blank_text_fails_even_without_documents(self) -> None:
        expect_invalid(lambda: filter_event_documents([], [{"kind": "text", "text": "\u3000"}]))

    def test_unknown_kinds_fail_even_on_empty_input(self) -> None:
        expect_invalid(lambda: filter_session_records([], [{"kind": "future"}]), 'session unknown filter kind "future"')
        expect_invalid(lambda: filter_event_documents([], [{"kind": "future"}]), 'session unknown filter kind "future"')
        expect_invalid(lambda: event_predicate([{}]), "session unknown filter kind (missing)")
        # Kinds of the other family are unknown too.
        expect_invalid(lambda: filter_session_records([], [{"kind": "seq"}]), 'session unknown filter kind "seq"')
        expect_invalid(lambda: filter_event_documents([], [{"kind": "id", "values": []}]), 'session unknown filter kind "id"')

    @pytest.mark.parametrize(
        ("value", "shown"),
        [(None, "null"), (True, "true"), (2.0, "2"), (1.5e-7, "1.5e-7"), (1e21, "1e+21"), (["a", None], "a,"), ({}, "[object Object]")],
    )
    def test_unmaterialised_values_print_like_js(self, value: Any, shown: str) -> None:
        expect_invalid(
            lambda: filter_session_records([], [{"kind": "availability", "values": ["live", value]}]),
            f'session availability filter contains unknown value "{shown}"',
        )

    def test_unmaterialised_values_use_js_equality(self) -> None:
        document = SessionEventSearchDocument(session_id="s", seq=1, type="x", time=0, surface="current", text="t")
        assert filter_event_documents([document], [{"kind": "type", "values": [1, None, "x"]}]) == [document]
        odd = SessionEventSearchDocument(session_id="s", seq=1, type=1.0, time=0, surface="current", text="t")  # type: ignore[arg-type]
        assert filter_event_documents([odd], [{"kind": "type", "values": [1]}]) == [odd]
        assert filter_event_documents([odd], [{"kind": "type", "values": [True, "1"]}]) == []

    def test_non_number_fields_compare_like_js(self) -> None:
        record = SessionRecord(header=header("s", createdAt="12"), live=True, persisted=False)
        assert filter_session_records([record], [{"kind": "created-at", "from": 11, "to": 12}]) == [record]
        broken = SessionRecord(header=header("s", createdAt="soon"), live=True, persisted=False)
        assert filter_session_records([broken], [{"kind": "created-at", "from": 0}]) == []
        assert filter_session_records([broken], [{"kind": "created-at"}]) == [broken]
        missing = SessionRecord(header={"version": 0, "id": "m"}, live=True, persisted=False)
        assert filter_session_records([missing], [{"kind": "created-at", "to": 0}]) == []  # undefined → NaN

    def test_later_clause_errors_fire_before_any_match(self, records: list[SessionRecord]) -> None:
        expect_invalid(lambda: filter_session_records(records, [{"kind": "id", "values": []}, {"kind": "bogus"}]))


# --------------------------------------------------------------------------- T-SH-7 and §3.4


class TestMaterialisation:
    def test_equal_copy(self) -> None:
        assert materialize_session_filters([{"kind": "created-at", "to": 2}]) == [{"kind": "created-at", "to": 2}]

    @pytest.mark.parametrize(
        ("call", "message"),
        [
            (lambda: materialize_session_filters("not-an-array"), "session filters must be an array"),
            (lambda: materialize_session_filters({"kind": "id", "values": []}), "session filters must be an array"),
            (lambda: materialize_session_filters(None), "session filters must be an array"),
            (lambda: materialize_event_filters("x"), "session filters must be an array"),
            (lambda: materialize_session_filters([{"kind": "id", "values": "bad"}]), "session id filter values must be an array of strings"),
            (lambda: materialize_session_filters([{"kind": "id", "values": [1]}]), "session id filter values must be an array of strings"),
            (lambda: materialize_session_filters([{"kind": "id"}]), "session id filter values must be an array of strings"),
            (lambda: materialize_session_filters([{"kind": "id", "values": [None]}]), "session id filter values must be an array of strings"),
            (lambda: materialize_session_filters([{"kind": "cwd", "values": "bad"}]), "session cwd filter values must be an array of strings or null"),
            (lambda: materialize_session_filters([{"kind": "cwd", "values": [None, 3]}]), "session cwd filter values must be an array of strings or null"),
            (lambda: materialize_session_filters([{"kind": "parent", "values": [1]}]), "session parent filter values must be an array of strings or null"),
            (lambda: materialize_session_filters([{"kind": "availability", "values": [True]}]), "session availability filter values must be an array of strings"),
            (lambda: materialize_session_filters([{"kind": "availability", "values": ["live", "archived"]}]), 'session availability filter contains unknown value "archived"'),
            (lambda: materialize_session_filters([{"kind": "created-at", "from": 10, "to": 1}]), "session created-at filter from must be less than or equal to to"),
            (lambda: materialize_session_filters([{"kind": "created-at", "from": "1"}]), "session created-at filter from must be finite"),
            (lambda: materialize_session_filters([{"kind": "created-at", "from": None}]), "session created-at filter from must be finite"),
            (lambda: materialize_session_filters([{"kind": "created-at", "from": True}]), "session created-at filter from must be finite"),
            (lambda: materialize_session_filters([{"kind": "created-at", "to": -math.inf}]), "session created-at filter to must be finite"),
            (lambda: materialize_session_filters([{"kind": "created-at", "to": 10**400}]), "session created-at filter to must be finite"),
            (lambda: materialize_session_filters([{}]), "session unknown filter kind (missing)"),
            (lambda: materialize_session_filters([{"kind": 3}]), "session unknown filter kind (missing)"),
            (lambda: materialize_session_filters(["id"]), "session unknown filter kind (missing)"),
            (lambda: materialize_session_filters([None]), "session unknown filter kind (missing)"),
            (lambda: materialize_session_filters([{"kind": "bogus"}]), 'session unknown filter kind "bogus"'),
            (lambda: materialize_session_filters([{"kind": "text", "text": "x"}]), 'session unknown filter kind "text"'),
            (lambda: materialize_event_filters([{"kind": "text", "text": 1}]), "session text filter text must be a string"),
            (lambda: materialize_event_filters([{"kind": "text"}]), "session text filter text must be a string"),
            (lambda: materialize_event_filters([{"kind": "future"}]), 'session unknown filter kind "future"'),
            (lambda: materialize_event_filters([{"kind": "created-at"}]), 'session unknown filter kind "created-at"'),
            (lambda: materialize_event_filters([{"kind": "type", "values": "user/message"}]), "session type filter values must be an array of strings"),
            (lambda: materialize_event_filters([{"kind": "surface", "values": [7]}]), "session surface filter values must be an array of strings"),
            (lambda: materialize_event_filters([{"kind": "surface", "values": ["Current"]}]), 'session surface filter contains unknown value "Current"'),
            (lambda: materialize_event_filters([{"kind": "seq", "from": 3, "to": 1}]), "session seq filter from must be less than or equal to to"),
            (lambda: materialize_event_filters([{"kind": "time", "to": math.nan}]), "session time filter to must be finite"),
        ],
    )
    def test_messages(self, call: Any, message: str) -> None:
        expect_invalid(call, message)

    def test_blank_text_is_accepted_at_materialisation(self) -> None:
        assert materialize_event_filters([{"kind": "text", "text": "  "}]) == [{"kind": "text", "text": "  "}]

    def test_first_failing_clause_wins(self) -> None:
        expect_invalid(
            lambda: materialize_session_filters([{"kind": "bogus"}, {"kind": "id", "values": "x"}]),
            'session unknown filter kind "bogus"',
        )
        expect_invalid(
            lambda: materialize_event_filters([{"kind": "seq", "from": 2, "to": 1}, {"kind": "text", "text": 1}]),
            "session seq filter from must be less than or equal to to",
        )

    def test_check_order_within_a_clause(self) -> None:
        # from before to, finiteness before ordering, shape before closed values.
        expect_invalid(lambda: materialize_event_filters([{"kind": "seq", "from": "a", "to": "b"}]), "session seq filter from must be finite")
        expect_invalid(lambda: materialize_event_filters([{"kind": "seq", "from": 5, "to": math.nan}]), "session seq filter to must be finite")
        expect_invalid(lambda: materialize_event_filters([{"kind": "surface", "values": ["future", 1]}]), "session surface filter values must be an array of strings")

    def test_copies_hold_only_known_fields_in_reference_order(self) -> None:
        result = materialize_event_filters([
            {"values": ["a"], "kind": "type", "extra": 1},
            {"to": 4, "kind": "seq", "from": 1.5, "note": "x"},
            {"text": " q ", "kind": "text", "flags": "i"},
            {"kind": "time"},
        ])
        assert result == [
            {"kind": "type", "values": ["a"]},
            {"kind": "seq", "from": 1.5, "to": 4},
            {"kind": "text", "text": " q "},
            {"kind": "time"},
        ]
        assert [list(clause) for clause in result] == [["kind", "values"], ["kind", "from", "to"], ["kind", "text"], ["kind"]]

    def test_copies_are_detached(self) -> None:
        ids = ["a", "b"]
        source = [{"kind": "id", "values": ids}]
        result = materialize_session_filters(source)
        ids.append("c")
        source[0]["kind"] = "cwd"
        assert result == [{"kind": "id", "values": ["a", "b"]}]

    def test_accepted_session_kinds(self) -> None:
        source = [
            {"kind": "id", "values": []},
            {"kind": "cwd", "values": [None, "/x"]},
            {"kind": "created-at", "from": -0.0, "to": 0},
            {"kind": "parent", "values": []},
            {"kind": "availability", "values": ["persisted", "live", "live"]},
        ]
        assert materialize_session_filters(copy.deepcopy(source)) == source

    def test_equal_bounds_and_fractions_are_valid(self) -> None:
        assert materialize_event_filters([{"kind": "time", "from": 1.25, "to": 1.25}]) == [{"kind": "time", "from": 1.25, "to": 1.25}]

    def test_integers_beyond_double_precision_round_like_js(self) -> None:
        [clause] = materialize_event_filters([{"kind": "seq", "from": 2**53 + 1}])
        assert clause == {"kind": "seq", "from": float(2**53)}

    def test_tuples_are_arrays(self) -> None:
        assert materialize_session_filters(({"kind": "id", "values": ("a",)},)) == [{"kind": "id", "values": ["a"]}]

    def test_empty_array(self) -> None:
        assert materialize_session_filters([]) == []
        assert materialize_event_filters([]) == []

    def test_materialised_filters_feed_the_predicates(self, records: list[SessionRecord]) -> None:
        filters = materialize_session_filters([{"kind": "created-at", "from": 11}])
        assert filter_session_records(records, filters) == [records[1]]


class TestMetadataFilters:
    """Search-side event filters (search-tools-export-spec §2.1, golden errors.json)."""

    def test_text_clause_rejected(self) -> None:
        expect_invalid(
            lambda: materialize_event_metadata_filters([{"kind": "text", "text": "x"}]),
            "session-search metadata filters do not accept text clauses",
        )

    def test_unknown_kind_uses_the_search_wording(self) -> None:
        expect_invalid(lambda: materialize_event_metadata_filters([{"kind": "nope"}]), 'session filter contains unknown kind "nope"')
        expect_invalid(lambda: materialize_event_metadata_filters([{}]), "session filter contains unknown kind (missing)")
        expect_invalid(lambda: materialize_event_metadata_filters([{"kind": ["seq"]}]), "session filter contains unknown kind (missing)")

    def test_screen_runs_over_all_clauses_before_materialisation(self) -> None:
        expect_invalid(
            lambda: materialize_event_metadata_filters([{"kind": "seq", "from": 2, "to": 1}, {"kind": "text", "text": "x"}]),
            "session-search metadata filters do not accept text clauses",
        )

    def test_shared_materialisation_messages(self) -> None:
        expect_invalid(lambda: materialize_event_metadata_filters([{"kind": "seq", "from": 5, "to": 1}]), "session seq filter from must be less than or equal to to")
        expect_invalid(lambda: materialize_event_metadata_filters([{"kind": "type", "values": "user/message"}]), "session type filter values must be an array of strings")

    def test_non_arrays(self) -> None:
        expect_invalid(lambda: materialize_event_metadata_filters("seq"), "session filter contains unknown kind (missing)")
        expect_invalid(lambda: materialize_event_metadata_filters(""), "session filters must be an array")
        expect_invalid(lambda: materialize_event_metadata_filters({"kind": "seq"}), "session filters must be an array")

    def test_accepts_metadata_kinds(self) -> None:
        source = [{"kind": "seq", "from": 1}, {"kind": "time", "to": 2}, {"kind": "type", "values": ["x"]}, {"kind": "surface", "values": ["current"]}]
        assert materialize_event_metadata_filters(source) == source


def _golden_filter_cases() -> list[Any]:
    cases = []
    for synthetic in (False, True):
        for case in golden("errors", synthetic)["cases"]:
            if case.get("code") != INVALID or "budget" in case["message"] or "session id" in case["message"]:
                continue
            label = f"{'synthetic' if synthetic else 'real'}:{case['operation']}:{case['message']}"
            cases.append(pytest.param(case, id=label))
    return cases


@pytest.mark.parametrize("case", _golden_filter_cases())
def test_golden_filter_errors(case: dict[str, Any]) -> None:
    """Every filter-validation error the reference produced on the corpus, replayed."""
    request = case["request"]
    operation = case["operation"]

    def run() -> None:
        if operation == "searchSessions":
            materialize_session_filters(request.get("sessionFilters", []))
            materialize_event_metadata_filters(request.get("eventFilters", []))
        elif operation == "searchEvents":
            materialize_event_metadata_filters(request.get("filters", []))
        elif operation == "filterEvents":
            event_predicate(materialize_event_filters(request["filters"]))
        elif operation == "filterSessions":
            session_predicate(materialize_session_filters(request["filters"]))
        else:  # pragma: no cover - the selection above only keeps these four
            raise AssertionError(operation)

    expect_invalid(run, case["message"])


# --------------------------------------------------------------------------- T-SH-8 and §3.5


class TestTextClause:
    def test_t_sh_8_whitespace_flexible_scan(self) -> None:
        documents = build_documents(
            "session",
            [user(0, [text("Alpha\n beta")]), user(1, [text("other")])],
            ["current", "current"],
        )
        result = filter_event_documents(documents, materialize_event_filters([{"kind": "text", "text": "alpha beta"}]))
        assert [(d.seq, d.text) for d in result] == [(0, "Alpha\n beta")]

    def test_metacharacters_are_literal(self) -> None:
        pattern = compile_text_filter("hello   (ai)+")
        assert pattern.search("Hello\n(AI)+")
        assert not pattern.search("hello aiai")
        for query in [".", "a.c", "[x]", "\\d", "^a$", "a|b", "x{2}", "(?i)", "a*b+?"]:
            assert compile_text_filter(query).search("pre " + query + " post"), query
        assert not compile_text_filter("a.c").search("abc")
        assert not compile_text_filter("\\d").search("7")
        assert not compile_text_filter("a|b").search("a")

    def test_unanchored(self) -> None:
        assert compile_text_filter("ai").search("braid")

    @pytest.mark.parametrize(
        ("query", "target", "matches"),
        [
            ("alpha beta", "alpha\t\n beta", True),
            ("alpha\tbeta", "alpha beta", True),
            ("alpha beta", "alpha\u00a0beta", True),
            ("alpha beta", "alpha\u3000\ufeffbeta", True),
            ("alpha beta", "alpha\u2028beta", True),
            ("alpha beta", "alphabeta", False),
            ("alphabeta", "alpha beta", False),
            ("alpha beta", "alpha\x85beta", False),  # NEL is not JS whitespace
            ("alpha beta", "alpha\x1cbeta", False),  # nor are the information separators
            ("alpha beta", "alpha\u200bbeta", False),  # nor ZERO WIDTH SPACE
            ("alpha\x85beta", "ALPHA\x85BETA", True),  # NEL in the query is a literal
            ("\ufeffalpha\ufeff", "alpha", True),  # BOM is trimmed from the query
            ("a b c", "a b\nc", True),
        ],
    )
    def test_whitespace_set(self, query: str, target: str, matches: bool) -> None:
        assert bool(compile_text_filter(query).search(target)) is matches

    @pytest.mark.parametrize("blank", ["", " ", "\n\t", "\u3000\ufeff\u00a0", JS_WHITESPACE])
    def test_blank_queries(self, blank: str) -> None:
        expect_invalid(lambda: compile_text_filter(blank), "session text filter must contain non-whitespace text")

    @pytest.mark.parametrize("not_blank", ["\x85", "\x1c", "\u200b", "\x00"])
    def test_python_whitespace_is_not_blank(self, not_blank: str) -> None:
        assert compile_text_filter(not_blank).search("x" + not_blank + "y")

    def test_non_string_text(self) -> None:
        expect_invalid(lambda: compile_text_filter(1), "session text filter text must be a string")

    @pytest.mark.parametrize(
        ("query", "target", "matches"),
        [
            ("CAFÉ", "café", True),
            ("i", "\u0130", False),  # İ: Python re.IGNORECASE matches, JS /iu does not
            ("\u0130", "i", False),
            ("\u0130", "\u0130", True),
            ("\u0131", "I", False),  # dotless ı has no simple folding
            ("s", "\u017f", True),  # ſ folds to s
            ("\u017f", "S", True),
            ("k", "\u212a", True),  # KELVIN SIGN folds to k
            ("\u212a", "K", True),
            ("\u00e5", "\u212b", True),  # ANGSTROM SIGN folds to å
            ("ß", "SS", False),  # full folding only; JS uses simple
            ("ß", "ss", False),
            ("SS", "ß", False),
            ("ß", "\u1e9e", True),  # ẞ has the simple (S) folding to ß
            ("σ", "ς", True),
            ("Σ", "ς", True),
            ("θ", "\u03d1", True),  # ϑ
            ("\u03f4", "θ", True),  # ϴ
            ("µ", "μ", True),  # MICRO SIGN and Greek mu
            ("\u1f88", "\u1f80", True),  # ᾈ → ᾀ (S entry)
            ("\u1f80", "\u1f08\u0399", False),  # the full folding would expand
            ("ǅ", "ǆ", True),  # titlecase digraph
            ("ǅ", "Ǆ", True),
            ("\u13a0", "\uab70", True),  # Cherokee folds to uppercase
            ("\U00010400", "\U00010428", True),  # Deseret, astral
            ("\u0390", "\u1fd3", True),  # S entries newer than Python's Unicode 14 database
            ("\u03b0", "\u1fe3", True),
            ("\ufb05", "\ufb06", True),
            ("\u1c89", "\u1c8a", True),  # Unicode 16 case pair
            ("\U00010d50", "\U00010d70", True),  # Garay (Unicode 16)
            ("ﬀ", "FF", False),
            ("é", "e\u0301", False),  # no normalisation
        ],
    )
    def test_simple_case_folding(self, query: str, target: str, matches: bool) -> None:
        assert bool(compile_text_filter(query).search(target)) is matches

    def test_python_ignorecase_differs_on_dotted_capital_i(self) -> None:
        # Why the module does not use re.IGNORECASE: Python matches this pair.
        assert re.compile("i", re.IGNORECASE).search("\u0130")
        assert not compile_text_filter("i").search("\u0130")


_QUERY_ALPHABET = st.sampled_from(
    list("aAbBkKsSiI .*+?^${}()|[]\\-#&~") + list(JS_WHITESPACE)
    + ["ß", "ẞ", "ſ", "\u212a", "\u0130", "ı", "σ", "ς", "Σ", "\x85", "\x1c", "\x00", "é", "😀", "\ud800"]
)
_TEXTS = st.text(alphabet=_QUERY_ALPHABET) | st.text()


@settings(deadline=None)
@given(query=_TEXTS, before=_TEXTS, after=_TEXTS)
@example(query="(?P<x>", before="", after="")
@example(query="a\\", before="", after="")
@example(query="[[:alpha:]]", before="x", after="y")
def test_text_filter_literal_occurrence_always_matches(query: str, before: str, after: str) -> None:
    """Property: compiling only ever fails with INVALID_FILTER, and a verbatim occurrence matches."""
    try:
        pattern = compile_text_filter(query)
    except SessionQueryError as error:
        assert error.code == INVALID
        assert query.strip(JS_WHITESPACE) == ""
        return
    assert query.strip(JS_WHITESPACE) != ""
    assert pattern.search(before + query + after) is not None


@settings(deadline=None)
@given(query=_TEXTS)
def test_text_filter_matches_the_simple_folded_query(query: str) -> None:
    """Property: the query matches its own simple case folding, code point by code point."""
    try:
        pattern = compile_text_filter(query)
    except SessionQueryError:
        return
    assert pattern.search("".join(_simple_fold(char) for char in query)) is not None


@settings(deadline=None)
@given(words=st.lists(st.text(alphabet=st.characters(blacklist_characters=JS_WHITESPACE), min_size=1), min_size=1),
       gaps=st.lists(st.text(alphabet=st.sampled_from(JS_WHITESPACE), min_size=1), min_size=1))
def test_text_filter_any_whitespace_run_matches_any_other(words: list[str], gaps: list[str]) -> None:
    """Property: whitespace runs in the query and the text are interchangeable."""
    query = " ".join(words)
    target = "".join(word + gaps[index % len(gaps)] for index, word in enumerate(words))
    assert compile_text_filter(query).search(target) is not None
