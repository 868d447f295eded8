"""``readEventRange``: runs of a long session's events with their surface facts
(a sessionq extension the web page uses for logs too long to read whole)."""

from __future__ import annotations

import pytest

from readmodel.core.errors import SessionQueryError
from readmodel.live import InMemoryLiveSource
from readmodel.query import EVENT_RANGE_MAX
from readmodel.core.vocabulary import to_builtins
from tests.logfactory import header as log_header
from tests.projection.surface_builders import assistant, event, log_only, replace, user
from tests.query.support import Corpus, live_header


def _compacted() -> list[dict]:
    """Ten events; seq 7 replaces the surface nodes 1..3 (seqs 1, 2, 3)."""
    return [
        event("turn/start", 0, {"turn": 1}),
        user(1, "first question"),
        assistant(2, "first answer"),
        user(3, "second question"),
        log_only(4),
        log_only(5),
        log_only(6),
        user(7, "summary of the first exchange", op=replace(1, 3), sources=[1, 2, 3]),
        assistant(8, "after the summary"),
        event("turn/end", 9, {"turn": 1, "reason": {"kind": "completed"}}),
    ]


def test_a_range_carries_events_surfaces_and_replacement_links(corpus: Corpus) -> None:
    events = _compacted()
    corpus.write(log_header("long"), events)
    corpus.index()
    query = corpus.query()
    whole = {r.seq: r.surface for r in query.list_events("long")}
    window = to_builtins(query.read_event_range("long", 2, 6))
    assert window["eventCount"] == 10 and window["startSeq"] == 2
    assert window["events"] == events[2:8]
    assert [r["surface"] for r in window["records"]] == [whole[seq] for seq in range(2, 8)]
    by_seq = {r["seq"]: r for r in window["records"]}
    assert by_seq[2]["replacedBy"] == 7 and by_seq[3]["replacedBy"] == 7
    assert by_seq[7]["replaces"] == [1, 2, 3]
    assert "replacedBy" not in by_seq[4] and "replaces" not in by_seq[4]
    # past the end: the rest of the log, or nothing
    assert [e["seq"] for e in query.read_event_range("long", 8, 50).events] == [8, 9]
    assert query.read_event_range("long", 10, 5).events == []


def test_a_live_session_answers_the_same_range(live: InMemoryLiveSource, corpus: Corpus) -> None:
    events = _compacted()
    corpus.write(log_header("stored"), events)
    corpus.index()
    live.create(live_header("live", cwd="/abs"), events)
    query = corpus.query(live)
    stored = to_builtins(query.read_event_range("stored", 0, 10))
    in_memory = to_builtins(query.read_event_range("live", 0, 10))
    assert in_memory["records"] == stored["records"] and in_memory["events"] == stored["events"]


@pytest.mark.parametrize(("start", "limit"), [(-1, 5), (1.5, 5), ("0", 5), (0, 0), (0, EVENT_RANGE_MAX + 1), (0, None)])
def test_bad_bounds_are_an_invalid_window_before_the_session_is_resolved(corpus: Corpus, start: object, limit: object) -> None:
    corpus.index()
    with pytest.raises(SessionQueryError) as info:
        corpus.query().read_event_range("no-such-session", start, limit)
    assert info.value.code == "SESSION_QUERY_INVALID_WINDOW"


def test_an_unknown_session_is_not_found(corpus: Corpus) -> None:
    corpus.index()
    with pytest.raises(SessionQueryError) as info:
        corpus.query().read_event_range("no-such-session", 0, 10)
    assert info.value.code == "SESSION_QUERY_SESSION_NOT_FOUND"
