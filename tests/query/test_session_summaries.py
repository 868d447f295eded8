"""The session-summary API (sessionq extension): listSessionSummaries and listWorkspaces."""

from __future__ import annotations

import json

import pytest

from readmodel.core.errors import SessionQueryError
from readmodel.core.vocabulary import to_builtins
from readmodel.live import InMemoryLiveSource
from readmodel.rpc import Dispatcher
from tests.logfactory import ev, header, simple_turn, turn_start, user
from tests.projection.builders import title as title_event
from tests.query.support import Corpus


def _write_corpus(corpus: Corpus) -> None:
    corpus.write(header("alpha", 100, cwd="/w/one"), [*simple_turn(0, "first"), title_event(9, "Alpha work", time=5000)])
    corpus.write(header("beta", 200, cwd="/w/two"), [turn_start(0), ev("user/message", 1, user(1, "x")["data"], time=7000, surfaceOp="append")])
    corpus.write(header("gamma", 300, cwd=None), simple_turn(0, "third"))
    corpus.write(header("delta", 400, cwd="/w/one"), simple_turn(0, "fourth"))
    corpus.index()


def test_summaries_carry_title_workspace_times_and_counts_in_listing_order(corpus: Corpus) -> None:
    _write_corpus(corpus)
    page = to_builtins(corpus.query().list_session_summaries({}))
    assert [item["id"] for item in page["items"]] == ["delta", "gamma", "beta", "alpha"]
    alpha = page["items"][3]
    assert alpha == {
        "id": "alpha",
        "title": "Alpha work",
        "cwd": "/w/one",
        "createdAt": 100,
        "lastActivity": 5000,
        "eventCount": 10,
        "parentSession": None,
        "status": "ok",
    }
    # The last event is a plain event (turn/end, stored in a run) for delta, a message for beta.
    assert page["items"][0]["lastActivity"] == 1000 and page["items"][2]["lastActivity"] == 7000
    assert page["items"][1]["cwd"] is None and page["items"][1]["title"] is None
    assert "nextCursor" not in page


def test_filters_by_workspace_and_creation_time(corpus: Corpus) -> None:
    _write_corpus(corpus)
    query = corpus.query()
    ids = lambda params: [i.id for i in query.list_session_summaries(params).items]  # noqa: E731
    assert ids({"cwd": "/w/one"}) == ["delta", "alpha"]
    assert ids({"cwd": None}) == ["gamma"]
    assert ids({"createdFrom": 200, "createdTo": 300}) == ["gamma", "beta"]
    assert ids({"cwd": "/w/one", "createdTo": 399}) == ["alpha"]


def test_cursor_pages_cover_the_listing_and_go_stale_when_the_index_moves(corpus: Corpus) -> None:
    _write_corpus(corpus)
    query = corpus.query()
    first = query.list_session_summaries({"limit": 3})
    assert len(first.items) == 3 and isinstance(first.next_cursor, str)
    second = query.list_session_summaries({"limit": 3, "cursor": first.next_cursor})
    assert [i.id for i in first.items + second.items] == ["delta", "gamma", "beta", "alpha"]
    with pytest.raises(SessionQueryError) as forged:
        query.list_session_summaries({"limit": 3, "cursor": first.next_cursor[:-2] + "AA"})
    assert forged.value.code == "SESSION_QUERY_INVALID_CURSOR"
    with pytest.raises(SessionQueryError) as other_request:
        query.list_session_summaries({"limit": 2, "cursor": first.next_cursor})
    assert other_request.value.code == "SESSION_QUERY_INVALID_CURSOR"
    corpus.write(header("epsilon", 500), simple_turn(0, "fifth"))
    corpus.index()
    with pytest.raises(SessionQueryError) as stale:
        query.list_session_summaries({"limit": 3, "cursor": first.next_cursor})
    assert stale.value.code == "SESSION_QUERY_STALE_CURSOR"


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"limit": 0}, "SESSION_QUERY_INVALID_LIMIT"),
        ({"limit": 501}, "SESSION_QUERY_INVALID_LIMIT"),
        ({"limit": 1.5}, "SESSION_QUERY_INVALID_LIMIT"),
        ({"createdFrom": "yesterday"}, "SESSION_QUERY_INVALID_FILTER"),
        ({"cwd": 5}, "SESSION_QUERY_INVALID_FILTER"),
        ({"cursor": 7}, "SESSION_QUERY_INVALID_CURSOR"),
        ({"cursor": "garbage"}, "SESSION_QUERY_INVALID_CURSOR"),
    ],
)
def test_bad_params_are_coded_query_errors(corpus: Corpus, params: dict, code: str) -> None:
    _write_corpus(corpus)
    with pytest.raises(SessionQueryError) as error:
        corpus.query().list_session_summaries(params)
    assert error.value.code == code


def test_live_sessions_are_merged_as_list_sessions_merges_them(corpus: Corpus) -> None:
    _write_corpus(corpus)
    live = InMemoryLiveSource()
    live.create(header("beta", 200, cwd="/w/two"), [turn_start(0), user(1, "a"), user(2, "b")])
    live.create(header("zeta", 250, cwd="/w/two"), [turn_start(0)])
    query = corpus.query(live=live)
    items = query.list_session_summaries({}).items
    assert [i.id for i in items] == [r.header["id"] for r in query.list_sessions()]
    beta = next(i for i in items if i.id == "beta")
    assert beta.event_count == 3  # the live log wins over the persisted row
    workspaces = {w.cwd: w.session_count for w in query.list_workspaces()}
    assert workspaces == {"/w/one": 2, "/w/two": 2, None: 1}


def test_workspaces_newest_activity_first_over_rpc(corpus: Corpus) -> None:
    _write_corpus(corpus)
    dispatcher = Dispatcher(corpus.query())
    line = dispatcher.handle({"jsonrpc": "2.0", "id": 1, "method": "listWorkspaces", "params": {}})
    result = json.loads(line)["result"]
    assert result == [
        {"cwd": "/w/two", "sessionCount": 1, "lastActivity": 7000},
        {"cwd": "/w/one", "sessionCount": 2, "lastActivity": 5000},
        {"cwd": None, "sessionCount": 1, "lastActivity": 1000},
    ]
    line = dispatcher.handle({"jsonrpc": "2.0", "id": 2, "method": "listSessionSummaries", "params": {"limit": 0}})
    assert json.loads(line)["error"]["data"] == {"code": "SESSION_QUERY_INVALID_LIMIT"}


def test_titles_are_read_once_per_engine_and_a_retitled_session_shows_its_new_title(corpus: Corpus) -> None:
    """The engine caches titles (a title costs a block decompression) under the session's
    generation: a repeated page reads none, and re-indexing a session is never served stale."""
    _write_corpus(corpus)
    query, store = corpus.hooked()
    reads = lambda: sum(1 for call in store.calls if call[1] == "raw_at")  # noqa: E731
    assert query.session_summaries(["alpha"])["alpha"].title == "Alpha work"
    first = reads()
    assert query.list_session_summaries({}).items[3].title == "Alpha work"
    assert query.session_summaries(["alpha", "beta"])["alpha"].title == "Alpha work"
    assert first == 1 and reads() == first
    corpus.write(header("alpha", 100, cwd="/w/one"), [*simple_turn(0, "first"), title_event(9, "Alpha work"), title_event(10, "Renamed", time=6000)])
    corpus.index()
    assert query.session_summaries(["alpha"])["alpha"].title == "Renamed"
    assert query.list_session_summaries({"cwd": "/w/one"}).items[1].title == "Renamed"
    assert {w.cwd: w.last_activity for w in query.list_workspaces()}["/w/one"] == 6000
