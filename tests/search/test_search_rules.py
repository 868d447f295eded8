"""Search request normalisation, SQL predicates and budgets, fingerprints, snippets
(search-tools-export-spec §10.2) and the properties of hostile queries."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from readmodel.core.errors import SessionQueryError
from readmodel.search.config import SearchConfig, search_config
from readmodel.search.cursors import request_fingerprint
from readmodel.search.predicates import event_where, session_where
from readmodel.search.requests import match_expression, normalize_events_request, normalize_sessions_request
from readmodel.search.snippets import ELLIPSIS, END_MARK, START_MARK, make_snippet

CONFIG = SearchConfig()


def code_of(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SessionQueryError) as caught:
        call()
    return caught.value.code


def test_requests_normalise_query_filters_and_limit() -> None:
    request = normalize_sessions_request({"query": "  alpha\n beta  "}, CONFIG)
    assert (request.query, request.session_filters, request.event_filters, request.limit, request.cursor) == ("alpha beta", [], [], 20, None)
    explicit = normalize_sessions_request(
        {"query": "x", "sessionFilters": [{"kind": "id", "values": ["a"]}], "eventFilters": [{"kind": "seq", "from": 1}], "limit": 3, "cursor": "c"}, CONFIG
    )
    assert (explicit.session_filters, explicit.event_filters, explicit.limit, explicit.cursor) == ([{"kind": "id", "values": ["a"]}], [{"kind": "seq", "from": 1}], 3, "c")
    events = normalize_events_request({"sessionId": "s", "query": " a\tb "}, CONFIG)
    assert (events.session_id, events.query, events.filters, events.limit) == ("s", "a b", [], 20)


def test_invalid_requests_get_their_codes() -> None:
    assert code_of(lambda: normalize_sessions_request({"query": 42}, CONFIG)) == "SESSION_QUERY_INVALID_QUERY"
    assert code_of(lambda: normalize_sessions_request({"query": " \u3000\ufeff "}, CONFIG)) == "SESSION_QUERY_INVALID_QUERY"
    assert code_of(lambda: normalize_sessions_request({"query": "a\x00"}, CONFIG)) == "SESSION_QUERY_INVALID_QUERY"
    assert code_of(lambda: normalize_events_request({"sessionId": 7, "query": "a"}, CONFIG)) == "SESSION_QUERY_INVALID_FILTER"
    assert code_of(lambda: normalize_sessions_request({"query": "a", "cursor": 5}, CONFIG)) == "SESSION_QUERY_INVALID_CURSOR"
    assert code_of(lambda: normalize_sessions_request({"query": "a", "eventFilters": [{"kind": "text", "text": "a"}]}, CONFIG)) == "SESSION_QUERY_INVALID_FILTER"
    assert code_of(lambda: normalize_sessions_request({"query": "a", "eventFilters": [{}]}, CONFIG)) == "SESSION_QUERY_INVALID_FILTER"
    small = SearchConfig(default_limit=2, max_limit=3)
    for limit in (1.5, 0, 4, 2**53 - 1, True, "2", float("nan"), float("inf")):
        assert code_of(lambda limit=limit: normalize_sessions_request({"query": "a", "limit": limit}, small)) == "SESSION_QUERY_INVALID_LIMIT"


def test_validation_order_puts_filters_before_the_query() -> None:
    # A bad filter wins over a bad query; a bad cursor type wins over a bad query too.
    assert code_of(lambda: normalize_sessions_request({"query": "", "sessionFilters": "x"}, CONFIG)) == "SESSION_QUERY_INVALID_FILTER"
    assert code_of(lambda: normalize_sessions_request({"query": "", "cursor": 1}, CONFIG)) == "SESSION_QUERY_INVALID_CURSOR"
    assert code_of(lambda: normalize_sessions_request({"query": "", "limit": 0}, CONFIG)) == "SESSION_QUERY_INVALID_QUERY"


def test_normalised_filters_are_copies() -> None:
    values = ["a"]
    filters = [{"kind": "id", "values": values}]
    request = normalize_sessions_request({"query": "q", "sessionFilters": filters}, CONFIG)
    values.append("b")
    filters.append({"kind": "bogus"})
    assert request.session_filters == [{"kind": "id", "values": ["a"]}]


def test_session_predicates_compile_like_the_reference() -> None:
    assert session_where([]).fragments == []
    assert session_where([{"kind": "id", "values": []}]).fragments == ["0"]
    ids = session_where([{"kind": "id", "values": ["a", "b"]}])
    assert (ids.fragments, ids.params) == (["session_id IN (?, ?)"], ["a", "b"])
    assert session_where([{"kind": "cwd", "values": []}]).fragments == ["0"]
    assert session_where([{"kind": "cwd", "values": [None]}]).fragments == ["(cwd IS NULL)"]
    assert session_where([{"kind": "cwd", "values": ["/a"]}]).fragments == ["(cwd IN (?))"]
    parent = session_where([{"kind": "parent", "values": ["p", None]}])
    assert parent.fragments == ["(parent_session IN (?) OR parent_session IS NULL)"]
    mixed = session_where(
        [
            {"kind": "created-at", "from": 1, "to": 2},
            {"kind": "availability", "values": []},
            {"kind": "availability", "values": ["live", "live"]},
            {"kind": "availability", "values": ["live", "persisted"]},
            {"kind": "created-at"},
        ]
    )
    assert mixed.fragments == ["CAST(created_at AS INTEGER) >= ?", "CAST(created_at AS INTEGER) <= ?", "0", "live = 1"]
    assert mixed.params == [1, 2]


def test_event_predicates_compile_like_the_reference() -> None:
    where = event_where(
        [{"kind": "seq", "from": 1}, {"kind": "time", "to": 9}, {"kind": "type", "values": ["user/message"]}, {"kind": "surface", "values": ["current", "shadowed"]}]
    )
    assert where.fragments == ["CAST(seq AS INTEGER) >= ?", "CAST(time AS INTEGER) <= ?", "type IN (?)", "surface IN (?, ?)"]
    assert where.params == [1, 9, "user/message", "current", "shadowed"]
    assert event_where([{"kind": "type", "values": []}, {"kind": "surface", "values": []}]).sql() == "0 AND 0"


def test_the_outer_predicate_budget_is_fourteen() -> None:
    assert len(session_where([{"kind": "id", "values": ["a"]}] * 14).fragments) == 14
    assert code_of(lambda: session_where([{"kind": "id", "values": ["a"]}] * 15)) == "SESSION_QUERY_INVALID_FILTER"
    assert code_of(lambda: session_where([{"kind": "nope"}])) == "SESSION_QUERY_INVALID_FILTER"
    assert code_of(lambda: event_where([{"kind": "nope"}])) == "SESSION_QUERY_INVALID_FILTER"


def test_a_query_is_one_literal_phrase() -> None:
    assert match_expression('say "needle" OR *') == '"say ""needle"" OR *"'


def test_fingerprints_ignore_clause_and_value_order_but_not_the_target() -> None:
    one = normalize_sessions_request(
        {"query": "q", "sessionFilters": [{"kind": "cwd", "values": ["/b", None, "/a"]}, {"kind": "created-at", "from": 1}]}, CONFIG
    )
    two = normalize_sessions_request(
        {"query": "q", "sessionFilters": [{"kind": "created-at", "from": 1}, {"kind": "cwd", "values": [None, "/a", "/b"]}]}, CONFIG
    )
    assert request_fingerprint(one) == request_fingerprint(two)
    duplicate = normalize_sessions_request({"query": "q", "sessionFilters": [{"kind": "cwd", "values": ["/a", "/a"]}]}, CONFIG)
    single = normalize_sessions_request({"query": "q", "sessionFilters": [{"kind": "cwd", "values": ["/a"]}]}, CONFIG)
    assert request_fingerprint(duplicate) != request_fingerprint(single)
    a = normalize_events_request({"sessionId": "a", "query": "q"}, CONFIG)
    b = normalize_events_request({"sessionId": "b", "query": "q"}, CONFIG)
    assert request_fingerprint(a) != request_fingerprint(b)


@pytest.mark.parametrize(
    ("marked", "width", "expected"),
    [
        ("  short\ntext  ", 20, "short text"),
        (f"abcde{START_MARK}f{END_MARK}", 1, ELLIPSIS),
        ("abcdefghij", 5, "abcd…"),
        (f"ab{START_MARK}c{END_MARK}defghij", 5, "…bcd…"),
        (f"ab{START_MARK}c{END_MARK}defghij", 3, "…c…"),
        (f"abcde{START_MARK}f{END_MARK}", 2, "…f"),
        (f"abcde{START_MARK}f{END_MARK}", 5, "…cdef"),
        (f"  x—{START_MARK}café{END_MARK}\n y  ", 20, "x—café y"),
    ],
)
def test_snippet_examples(marked: str, width: int, expected: str) -> None:
    assert make_snippet(marked, width) == expected


def reference_snippet(marked: str, max_chars: int) -> str:
    """The §4 algorithm written out plainly, over the whole text (the oracle)."""
    chars: list[str] = []
    match_start = None
    for ch in marked:
        if ch == START_MARK:
            match_start = len(chars) if match_start is None else match_start
        elif ch == END_MARK:
            pass
        elif ch in " \t\n\r\x0b\x0c\u00a0\u2028\u2029\u3000\ufeff\u1680\u202f\u205f" or "\u2000" <= ch <= "\u200a":
            if chars and chars[-1] != " ":
                chars.append(" ")
        else:
            chars.append(ch)
    if chars and chars[-1] == " ":
        chars.pop()
    n = len(chars)
    if n <= max_chars:
        return "".join(chars)
    if max_chars == 1:
        return ELLIPSIS
    m = min(match_start or 0, n - 1)
    start = max(0, m - max_chars // 3)
    prefix = ELLIPSIS if start > 0 else ""
    suffix = ELLIPSIS
    content = max_chars - len(prefix) - len(suffix)
    if content < 1:
        start, suffix, content = m, "", max_chars - len(prefix)
    elif m >= start + content:
        start = m - content + 1
    end = min(n, start + content)
    if end == n:
        suffix, content = "", max_chars - len(prefix)
        start = max(0, end - content)
    end = min(n, start + content)
    return prefix + "".join(chars[start:end]) + suffix


snippet_text = st.lists(st.sampled_from(["a", "é", "😀", " ", "\n", "\u3000", START_MARK + "x" + END_MARK, "word", "\t\t"]), max_size=60).map("".join)


@given(marked=snippet_text, width=st.integers(min_value=1, max_value=30))
def test_snippets_with_early_exit_equal_the_plain_algorithm(marked: str, width: int) -> None:
    result = make_snippet(marked, width)
    assert result == reference_snippet(marked, width)
    assert len(result) <= width and "\n" not in result


def test_search_config_validation_order_and_messages() -> None:
    assert search_config() == SearchConfig()
    assert search_config({"openAt": None, "defaultLimit": None}) == SearchConfig()
    for bad in ({"openAt": "later"}, {"defaultLimit": 0}, {"maxLimit": 1e100}, {"snippetChars": 0}, {"defaultLimit": 5, "maxLimit": 4}, {"journalMode": "memory"}):
        with pytest.raises(SessionQueryError) as caught:
            search_config(bad)
        assert caught.value.code == "SESSION_QUERY_INVALID_CONFIG"
        assert caught.value.message.startswith("session-search SQLite config: ")
