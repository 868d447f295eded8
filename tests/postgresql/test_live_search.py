"""Search with live sessions on PostgreSQL answers exactly as SQLite does (issue #18).

One small stored corpus is indexed by the real indexer into PostgreSQL and into
SQLite; both are opened with the same live source (live-only sessions, and
live sessions overlaying stored ones).  Every page of every mode and scope,
with filters, the cursors' decoded positions included, must be equal — also
when hypothesis generates the live sessions and the requests.  The corpus is
built so that the boilerplate verdict depends on the live sessions: a text two
stored sessions hold becomes boilerplate with a live holder, and a text three
stored sessions hold stops being boilerplate when a live session overlays one
of them without it.
"""

from __future__ import annotations

import base64
import itertools
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.core.errors import SessionQueryError
from readmodel.live import InMemoryLiveSource
from readmodel.query import SessionQuery
from readmodel.store.database import open_writer
from tests import logfactory as lf

MODES = ("phrase", "words", "substring")
TWO_HOLD = "runtime policy sandbox alpha notes"  # two stored sessions: boilerplate with one live holder
THREE_HOLD = "system context beta gamma reminder"  # three stored sessions: specific once one is overlaid without it
WORDS = ["alpha", "beta", "gamma", "delta", "policy", "sandbox", "路径", "déjà", "alphabet", "policies"]
QUERIES = ["alpha", "policy sandbox", "al", "pol", "beta gamma", "路径", "ta", "déjà", "sandbox alpha", "delta", "a", "zzzqqq", '"beta gamma"', "system"]


def _turns(texts: list[str], time: int) -> list[dict[str, Any]]:
    """One turn per text (a user message) and an assistant reply echoing its first word."""
    events: list[dict[str, Any]] = []
    for number, text in enumerate(texts):
        seq = len(events)
        turn = [lf.turn_start(seq, number + 1), lf.user(seq + 1, text), lf.step_start(seq + 2, number + 1),
                lf.assistant(seq + 3, "ok " + text.split()[0], turn=number + 1), lf.step_end(seq + 4, number + 1), lf.turn_end(seq + 5, number + 1)]
        for offset, event in enumerate(turn):
            event["time"] = time + 10 * number + offset
        events += turn
    return events


STORED: dict[str, tuple[int, str, list[str]]] = {
    # id: (createdAt, cwd, texts)
    "s0": (100, "/work/a", [TWO_HOLD, "alpha beta notes", "a much longer delta policy line that goes on and on"]),
    "s1": (200, "/work/b", [TWO_HOLD, "gamma gamma gamma", "路径 déjà vu"]),
    "s2": (300, "/work/a", [THREE_HOLD, "policy sandbox alpha", "alphabet soup"]),
    "s3": (400, "/work/b", [THREE_HOLD, "beta policies", "sandbox"]),
    "s4": (500, "/work/a", [THREE_HOLD, "alpha", "alpha alpha delta"]),
    "s5": (600, "/work/c", ["nothing shared here", "delta delta", "policy sandbox alpha"]),
}


def _write_root(root: Path) -> None:
    for session_id, (created, cwd, texts) in STORED.items():
        lf.write_log(root, lf.header(session_id, created, cwd=cwd), [_turns(texts, created * 10)])


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``(sqlite path, postgresql url)`` of the stored corpus, both built by the real indexer."""
    from readmodel.store.postgres import open_writer as open_postgres_writer
    from tests.postgres import shared_server

    directory = tmp_path_factory.mktemp("live-search")
    root = directory / "root"
    _write_root(root)
    sqlite_db = str(directory / "index.db")
    url = shared_server().database()
    for engine in (open_writer(sqlite_db), open_postgres_writer(url)):
        try:
            Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
        finally:
            engine.dispose()
    yield sqlite_db, url
    shared_server().drop(url)


def _opened(indexes: Any, live: InMemoryLiveSource) -> tuple[SessionQuery, SessionQuery]:
    sqlite_db, url = indexes
    return SessionQuery.open(sqlite_db, live=live), SessionQuery.open(url, live=live)


def _cursor_position(cursor: str) -> dict[str, Any]:
    """A cursor's payload without what differs per index (its identity and generation)."""
    body = cursor.partition(".")[0]
    payload = msgspec.json.decode(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    return {key: payload[key] for key in ("scope", "fingerprint", "offset")}


def _walk(call: Any, request: dict[str, Any], pages: int = 6) -> list[Any]:
    """The first pages of a search, following its cursors (or the error it raised)."""
    walked: list[Any] = []
    cursor = None
    for _ in range(pages):
        try:
            page = call({**request, **({"cursor": cursor} if cursor else {})})
        except SessionQueryError as exc:
            return [*walked, (exc.code, exc.message)]
        cursor = page.next_cursor
        shown = msgspec.to_builtins(page)
        shown.pop("nextCursor", None)
        walked.append((shown, _cursor_position(cursor) if cursor else None))
        if not cursor:
            break
    return walked


def _live_session(session_id: str, created: int, cwd: str | None, texts: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header = lf.header(session_id, created, cwd=cwd) if cwd is not None else lf.header(session_id, created)
    return header, _turns(texts, created * 10 + 5)


def _standard_live() -> InMemoryLiveSource:
    """Live-only sessions and two overlays: s2 without THREE_HOLD (it drops to two holders), s5 with TWO_HOLD."""
    live = InMemoryLiveSource()
    live.create(*_live_session("s2", 300, "/work/a", ["policy sandbox alpha", "a brand new alpha line", "beta"]))
    live.create(*_live_session("s5", 600, "/work/c", ["nothing shared here", TWO_HOLD, "policy policy sandbox"]))
    live.create(*_live_session("live-1", 700, "/work/a", [TWO_HOLD, "alpha beta gamma delta", "路径 alpha"]))
    live.create(*_live_session("live-2", 50, None, [THREE_HOLD, "alphabet policies", "déjà alpha"]))
    return live


def _source_of(indexes: Any) -> str:
    from tests import indexdb

    with indexdb.connect(indexes[0]) as conn:
        return conn.execute('SELECT "source" FROM "sessions" LIMIT 1').fetchone()[0]


def _session_filters(indexes: Any) -> list[Any]:
    return [
        None,
        [{"kind": "availability", "values": ["live"]}],
        [{"kind": "availability", "values": ["persisted"]}],
        [{"kind": "source", "values": [_source_of(indexes)]}],
        [{"kind": "cwd", "values": ["/work/a", None]}],
        [{"kind": "created-at", "from": 250, "to": 650}],
    ]


EVENT_FILTERS: list[Any] = [None, [{"kind": "type", "values": ["user/message"]}], [{"kind": "seq", "from": 2, "to": 9}]]


def test_every_mode_filter_and_page_across_sessions_with_live_sessions_equals_sqlite(indexes: Any) -> None:
    sqlite_query, pg_query = _opened(indexes, _standard_live())
    try:
        compared = 0
        for query, mode, session_filters, event_filters in itertools.product(QUERIES, MODES, _session_filters(indexes), EVENT_FILTERS[:2]):
            request: dict[str, Any] = {"query": query, "match": mode, "limit": 2}
            if session_filters:
                request["sessionFilters"] = session_filters
            if event_filters:
                request["eventFilters"] = event_filters
            expected = _walk(sqlite_query.search_sessions, request)
            assert _walk(pg_query.search_sessions, request) == expected, request
            compared += sum(len(page[0]["items"]) for page in expected if isinstance(page, tuple) and isinstance(page[0], dict))
        assert compared > 300
    finally:
        sqlite_query.close()
        pg_query.close()


def test_every_mode_and_page_within_live_overlaid_and_stored_sessions_equals_sqlite(indexes: Any) -> None:
    sqlite_query, pg_query = _opened(indexes, _standard_live())
    try:
        for session_id, query, mode, filters in itertools.product(["live-1", "live-2", "s2", "s5", "s0", "s4"], QUERIES, MODES, EVENT_FILTERS):
            request: dict[str, Any] = {"sessionId": session_id, "query": query, "match": mode, "limit": 1}
            if filters:
                request["filters"] = filters
            assert _walk(pg_query.search_events, request) == _walk(sqlite_query.search_events, request), request
    finally:
        sqlite_query.close()
        pg_query.close()


def test_the_boilerplate_verdict_counts_live_holders_and_not_overlaid_rows(indexes: Any) -> None:
    """TWO_HOLD: s0, s1 and live s5, live-1 hold it: boilerplate; THREE_HOLD: s3, s4 and live-2
    (s2's overlay dropped it): boilerplate; ranked last in a words search on both backends."""
    sqlite_query, pg_query = _opened(indexes, _standard_live())
    try:
        for query in (sqlite_query, pg_query):
            hits = query.search_events({"sessionId": "s0", "query": "policy", "match": "words"}).items
            assert [hit.seq for hit in hits][-1] == 1  # s0's TWO_HOLD message: boilerplate, last
            assert [hit.seq for hit in hits][0] == 13  # the longer specific text first
    finally:
        sqlite_query.close()
        pg_query.close()


@pytest.mark.parametrize("mode", MODES)
def test_a_live_change_between_pages_makes_the_cursor_stale_on_both_backends(indexes: Any, mode: str) -> None:
    live = _standard_live()
    sqlite_query, pg_query = _opened(indexes, live)
    try:
        request = {"query": "alpha", "match": mode, "limit": 1}
        firsts = [query.search_sessions(request) for query in (sqlite_query, pg_query)]
        seconds = [query.search_sessions({**request, "cursor": page.next_cursor}) for query, page in zip((sqlite_query, pg_query), firsts)]
        assert msgspec.to_builtins(seconds[0]).keys() == msgspec.to_builtins(seconds[1]).keys()
        assert seconds[0].items == seconds[1].items
        held = len(live.get("live-1").events)
        live.append("live-1", *_live_session("live-1", 700, "/work/a", [TWO_HOLD, "alpha beta gamma delta", "路径 alpha", "alpha again"])[1][held:])
        for query, page in zip((sqlite_query, pg_query), seconds):
            with pytest.raises(SessionQueryError) as caught:
                query.search_sessions({**request, "cursor": page.next_cursor})
            assert caught.value.code == "SESSION_QUERY_STALE_CURSOR"
        # The new first pages agree again, the appended event included.
        assert _walk(pg_query.search_sessions, request) == _walk(sqlite_query.search_sessions, request)
        live.remove("live-1")
        assert _walk(pg_query.search_sessions, request) == _walk(sqlite_query.search_sessions, request)
    finally:
        sqlite_query.close()
        pg_query.close()


def test_a_stored_session_overlaid_after_the_overlay_started_is_shadowed_from_then_on(indexes: Any) -> None:
    live = InMemoryLiveSource()
    sqlite_query, pg_query = _opened(indexes, live)
    try:
        request = {"query": "gamma", "match": "words", "limit": 5}
        assert _walk(pg_query.search_sessions, request) == _walk(sqlite_query.search_sessions, request)
        live.create(*_live_session("s1", 200, "/work/b", ["no more of that word"]))
        walked = _walk(pg_query.search_sessions, request)
        assert walked == _walk(sqlite_query.search_sessions, request)
        assert "s1" not in {hit["header"]["id"] for hit in walked[0][0]["items"]}
    finally:
        sqlite_query.close()
        pg_query.close()


# -- generated live sessions and requests -----------------------------------------------------------

_TEXTS = st.one_of(
    st.sampled_from([TWO_HOLD, THREE_HOLD, "policy sandbox alpha", "alpha", "nothing shared here"]),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
)


@st.composite
def _live_sources(draw: Any) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    sessions = []
    ids = draw(st.lists(st.sampled_from(["s0", "s1", "s2", "s3", "s4", "s5", "live-a", "live-b", "live-c"]), min_size=1, max_size=4, unique=True))
    for session_id in ids:
        if session_id in STORED:
            created, cwd, _ = STORED[session_id]
        else:
            created, cwd = draw(st.integers(1, 900)), draw(st.sampled_from(["/work/a", "/work/d", None]))
        sessions.append(_live_session(session_id, created, cwd, draw(st.lists(_TEXTS, min_size=1, max_size=4))))
    return sessions


@st.composite
def _requests(draw: Any, session_filters: list[Any], ids: list[str]) -> tuple[str, dict[str, Any]]:
    query = draw(st.one_of(st.sampled_from(QUERIES), st.sampled_from(WORDS).map(lambda word: word[: max(1, len(word) // 2)])))
    request: dict[str, Any] = {"query": query, "match": draw(st.sampled_from(MODES)), "limit": draw(st.sampled_from([1, 2, 4]))}
    if draw(st.booleans()):
        request["sessionId"] = draw(st.sampled_from(ids))
        if draw(st.booleans()):
            request["filters"] = draw(st.sampled_from(EVENT_FILTERS[1:]))
        return "search_events", request
    filters = draw(st.sampled_from(session_filters))
    if filters:
        request["sessionFilters"] = filters
    if draw(st.booleans()):
        request["eventFilters"] = draw(st.sampled_from(EVENT_FILTERS[1:]))
    return "search_sessions", request


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_live_sessions_and_requests_answer_as_sqlite(indexes: Any, data: Any) -> None:
    live = InMemoryLiveSource()
    sessions = data.draw(_live_sources())
    for header, events in sessions:
        live.create(header, events)
    sqlite_query, pg_query = _opened(indexes, live)
    try:
        ids = sorted({*STORED, *(header["id"] for header, _ in sessions)})
        for _ in range(4):
            method, request = data.draw(_requests(_session_filters(indexes), ids))
            assert _walk(getattr(pg_query, method), request) == _walk(getattr(sqlite_query, method), request), request
    finally:
        sqlite_query.close()
        pg_query.close()


# -- the shared corpora, with live copies of stored sessions --------------------------------------

EDGE_QUERIES = ["the", "do not", "pol", "sandbox pol", '"current working" dir', "é", "fi", ".py", "路径", "def ", "zzzqqq"]


@pytest.fixture(scope="module", params=[False, True], ids=["real", "synthetic"])
def corpus_pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """SQLite and PostgreSQL indexes of a shared corpus (the real indexer) under one live source:
    a stored session overlaid by its log cut in half, another overlaid verbatim, and a live-only
    copy of a third under a new id (each of its texts one holder more)."""
    from tests.backends import POSTGRES
    from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT, require_corpus

    require_corpus()
    root = SYNTHETIC_ROOT if request.param else ZSTD_ROOT
    url = POSTGRES.build(root, POSTGRES.database(tmp_path_factory.mktemp("live-corpus"), "index"))
    sqlite_db = POSTGRES.sqlite_twin(url)
    reader = SessionQuery.open(sqlite_db)
    ids = [record.header["id"] for record in reader.list_sessions()]
    logs = []
    for session_id in ids:
        try:
            logs.append(reader.read_session(session_id, redact=False))
        except SessionQueryError:
            continue  # a corrupt or unsupported stored session
        if len(logs) == 3:
            break
    reader.close()
    live = InMemoryLiveSource()
    cut, verbatim, copied = logs
    live.create(cut.session, cut.events[: max(1, len(cut.events) // 2)])
    live.create(verbatim.session, verbatim.events)
    live.create({**copied.session, "id": "live-copy-of-" + copied.session["id"]}, copied.events)
    pair = (SessionQuery.open(sqlite_db, live=live), SessionQuery.open(url, live=live))
    yield pair, [cut.session["id"], verbatim.session["id"], "live-copy-of-" + copied.session["id"], ids[-1]]
    for query in pair:
        query.close()


def test_the_shared_corpora_with_live_copies_answer_as_sqlite_across_sessions(corpus_pair: Any) -> None:
    (sqlite_query, pg_query), _ = corpus_pair
    filters: list[Any] = [None, [{"kind": "availability", "values": ["live"]}], [{"kind": "cwd", "values": [None, "/home/dev/docs-site"]}]]
    for query, mode, session_filters in itertools.product(EDGE_QUERIES, MODES, filters):
        request: dict[str, Any] = {"query": query, "match": mode, "limit": 4, **({"sessionFilters": session_filters} if session_filters else {})}
        assert _walk(pg_query.search_sessions, request, pages=4) == _walk(sqlite_query.search_sessions, request, pages=4), request


def test_the_shared_corpora_with_live_copies_answer_as_sqlite_within_sessions(corpus_pair: Any) -> None:
    (sqlite_query, pg_query), session_ids = corpus_pair
    for session_id, query, mode in itertools.product(session_ids, EDGE_QUERIES, MODES):
        request: dict[str, Any] = {"sessionId": session_id, "query": query, "match": mode, "limit": 3}
        assert _walk(pg_query.search_events, request, pages=3) == _walk(sqlite_query.search_events, request, pages=3), request


def test_threads_searching_with_live_sessions_at_once_get_the_serial_answers(indexes: Any) -> None:
    """The overlay's in-memory index is one connection: snapshots of concurrent searches take it in
    turn (each inside its own server transaction), and every answer is the one alone."""
    from concurrent.futures import ThreadPoolExecutor

    live = _standard_live()
    sqlite_query, pg_query = _opened(indexes, live)
    sqlite_query.close()
    requests = [{"query": query, "match": mode, "limit": 2} for query in QUERIES[:6] for mode in MODES]
    try:
        serial = [msgspec.to_builtins(pg_query.search_sessions(request)) for request in requests]
        pg_query._searcher().backend._ranked.clear()
        with ThreadPoolExecutor(4) as pool:
            concurrent = list(pool.map(lambda request: msgspec.to_builtins(pg_query.search_sessions(request)), requests * 2))
        assert concurrent == serial * 2
    finally:
        pg_query.close()
