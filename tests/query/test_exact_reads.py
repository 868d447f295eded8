"""Exact reads through SessionQuery over a real index plus live sessions
(query-spec §2.3–§2.7, §6; catalogue §10.1 "exact reads")."""

from __future__ import annotations

import pytest

from readmodel.core.cancel import AbortController
from readmodel.core.errors import SessionQueryError
from readmodel.live import InMemoryLiveSource
from readmodel.query import SessionQuery
from readmodel.projection.replay import ReplayError
from readmodel.core.vocabulary import to_builtins
from tests.logfactory import header as log_header
from tests.projection.surface_builders import assistant, event, log_only, replace, user
from tests.query.support import Corpus, fail_on, live_header


def codes(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SessionQueryError) as info:
        call()
    return info.value.code


def test_read_session_of_a_persisted_log_equals_what_was_written(corpus: Corpus) -> None:
    # T-EX-1 (persisted half): the header and every event, unchanged; reads are detached.
    header = log_header("valid-log", 2)
    events = [event("turn/start", 0, {"turn": 1}), user(1, "hi"), event("turn/end", 2, {"turn": 1, "reason": {"kind": "completed"}})]
    corpus.write(header, events)
    corpus.index()
    query = corpus.query()
    snapshot = query.read_session("valid-log")
    assert to_builtins(snapshot) == {"session": header, "events": events}
    snapshot.events[0]["time"] = 999
    assert query.read_session("valid-log").events[0]["time"] == 0


def test_read_session_of_a_live_log_is_replay_validated(live: InMemoryLiveSource) -> None:
    # T-EX-1: a log whose only event has seq 1 fails replay with the core's plain error.
    live.create(live_header("corrupt-log", cwd="/abs"), [user(1, "x")])
    live.create(live_header("valid", cwd="/abs"), [user(0, "x")])
    query = SessionQuery(None, live)
    with pytest.raises(ReplayError, match="seed event at index 0 has seq 1") as info:
        query.read_session("corrupt-log")
    assert not isinstance(info.value, SessionQueryError)
    snapshot = query.read_session("valid")
    assert snapshot.events == [user(0, "x")] and snapshot.session == live_header("valid", cwd="/abs")
    snapshot.events[0]["time"] = 5
    assert live.get("valid").events[0]["time"] == 0  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        snapshot.events[0]["data"]["content"] = []  # the message part is frozen


def test_late_live_owner_wins_over_the_inspected_index(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-EX-2: a live owner created during the inspection answers filterEvents.
    corpus.write(log_header("late"), [user(0, "durable")])
    corpus.index()
    query, store = corpus.hooked(live)

    def attach(kind: str, _name: str, _args: tuple) -> None:  # type: ignore[type-arg]
        if kind == "inspect" and live.get("late") is None:
            live.create(log_header("late"), [user(0, "live")])

    store.hook = attach
    documents = query.filter_events("late", [])
    assert [(d.session_id, d.seq, d.text) for d in documents] == [("late", 0, "live")]


def test_list_events_surfaces_of_a_live_replacement(live: InMemoryLiveSource) -> None:
    # T-EX-14
    live.create(
        live_header("live"),
        [
            event("turn/start", 0, {"turn": 1}),
            event("step/start", 1, {"turn": 1, "step": 1}),
            user(2, "question"),
            log_only(3),
            assistant(4, "answer", op=replace(2, 2), sources=[2]),
        ],
    )
    records = SessionQuery(None, live).list_events("live")
    assert [r.surface for r in records[2:]] == ["shadowed", "log-only", "current"]
    assert [r.seq for r in records] == [0, 1, 2, 3, 4] and all(r.session_id == "live" for r in records)


def _compacted_log() -> list[dict]:  # type: ignore[type-arg]
    return [
        user(0, "old"),
        log_only(1),
        user(2, "checkpoint", op=replace(0, 0), sources=[0]),
        user(3, "retained tail"),
        user(4, "latest checkpoint", op=replace(2, 3), sources=[2, 3]),
        assistant(5, "reply"),
    ]


def test_read_surface_of_a_live_session(live: InMemoryLiveSource) -> None:
    # T-EX-15
    hdr = live_header("live", cwd="/fixed/cwd")
    live.create(hdr, _compacted_log())
    snapshot = SessionQuery(None, live).read_surface("live")
    assert snapshot.session == hdr and snapshot.captured_through_seq == 5
    assert [(e["seq"], e["type"]) for e in snapshot.events] == [(4, "user/message"), (5, "assistant/message")]
    with pytest.raises(TypeError):
        snapshot.events[0]["data"]["content"] = []
    snapshot.session["cwd"] = "/elsewhere"
    assert live.get("live").header["cwd"] == "/fixed/cwd"  # type: ignore[union-attr]
    assert live.get("live").events[4]["data"]["content"][0]["text"] == "latest checkpoint"  # type: ignore[union-attr]


def test_read_surface_of_the_same_log_persisted(corpus: Corpus) -> None:
    # The persisted path answers T-EX-15's log identically, from the index alone.
    corpus.write(log_header("durable", cwd="/fixed/cwd"), _compacted_log())
    corpus.index()
    snapshot = corpus.query().read_surface("durable")
    assert snapshot.captured_through_seq == 5
    assert [(e["seq"], e["type"]) for e in snapshot.events] == [(4, "user/message"), (5, "assistant/message")]
    with pytest.raises(TypeError):
        snapshot.events[0]["data"]["content"] = []


def test_read_surface_of_an_empty_live_session(live: InMemoryLiveSource) -> None:
    # T-EX-16
    live.create(live_header("empty"))
    snapshot = SessionQuery(None, live).read_surface("empty")
    assert snapshot.captured_through_seq is None and snapshot.events == []
    assert to_builtins(snapshot)["capturedThroughSeq"] is None


def test_read_event_windows_and_validation(live: InMemoryLiveSource) -> None:
    # T-EX-17 (readWindowMax 1)
    hdr = live_header("live")
    live.create(hdr, [event("turn/start", 0, {"turn": 1}), user(1, "a"), user(2, "b"), user(3, "c")])
    query = SessionQuery(None, live, {"readWindowMax": 1})
    window = query.read_event({"sessionId": "live", "seq": 2, "before": 1, "after": 1})
    assert (window.start_seq, window.end_seq, window.target["seq"]) == (1, 3, 2)
    assert window.session == hdr and window.target is window.events[1]
    window.session["createdAt"] = 42
    assert live.get("live").header["createdAt"] == 1  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        window.events[0]["data"]["content"] = []
    assert codes(lambda: query.read_event({"sessionId": "live", "seq": 9})) == "SESSION_QUERY_EVENT_NOT_FOUND"
    for bad in ({"before": -1}, {"before": 2}, {"after": 0.5}, {"before": None}, {"after": True}, {"after": "1"}):
        with pytest.raises(SessionQueryError) as info:
            query.read_event({"sessionId": "live", "seq": 2, **bad})
        assert info.value.code == "SESSION_QUERY_INVALID_WINDOW"
        name = next(iter(bad))
        assert info.value.message == f"{name} must be an integer between 0 and 1"
    # Integral floats are the same JS number; the default window is the target alone.
    assert query.read_event({"sessionId": "live", "seq": 2.0, "before": 1.0}).start_seq == 1
    only = query.read_event({"sessionId": "live", "seq": 3})
    assert (only.start_seq, only.end_seq, [e["seq"] for e in only.events]) == (3, 3, [3])


def test_read_event_checks_before_then_after_before_the_session(corpus: Corpus) -> None:
    corpus.write(log_header("s"), [user(0, "x")])
    corpus.index()
    query, store = corpus.hooked()
    with pytest.raises(SessionQueryError, match="^before must") as info:
        query.read_event({"sessionId": "missing", "seq": 0, "before": 51, "after": -1})
    assert info.value.code == "SESSION_QUERY_INVALID_WINDOW" and store.calls == []


def test_read_event_clamps_persisted_windows_across_blocks(corpus: Corpus) -> None:
    events = [user(i, f"message {i}") for i in range(600)]
    corpus.write(log_header("long"), events)
    corpus.index()
    query = corpus.query()
    window = query.read_event({"sessionId": "long", "seq": 256, "before": 50, "after": 50})
    assert (window.start_seq, window.end_seq) == (206, 306)
    assert window.events == events[206:307] and window.target == events[256]
    edge = query.read_event({"sessionId": "long", "seq": 599, "after": 50, "before": 2})
    assert [e["seq"] for e in edge.events] == [597, 598, 599]
    first = query.read_event({"sessionId": "long", "seq": 0, "before": 10})
    assert (first.start_seq, first.end_seq) == (0, 0)
    for seq in (600, -1, 1.5, True, "1", None):
        assert codes(lambda seq=seq: query.read_event({"sessionId": "long", "seq": seq})) == "SESSION_QUERY_EVENT_NOT_FOUND"
    with pytest.raises(SessionQueryError) as info:
        query.read_event({"sessionId": "long", "seq": -1})
    assert info.value.message == 'session "long" has no event at seq -1'


def test_live_wins_and_persisted_only_sessions_read_from_the_index(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-EX-18
    shared = log_header("shared", 3, cwd="/same")
    durable = log_header("durable", 2)
    corpus.write(shared, [user(0, "durable shared")])
    corpus.write(durable, [user(0, "durable content")])
    corpus.index()
    live.create(dict(shared), [user(0, "first"), user(1, "live")])
    query = corpus.query(live)
    listing = [(r.header["id"], r.live, r.persisted) for r in query.list_sessions()]
    assert listing == [("shared", True, True), ("durable", False, True)]
    assert query.read_event({"sessionId": "shared", "seq": 1}).target["data"]["content"][0]["text"] == "live"
    assert [e["data"]["content"][0]["text"] for e in query.read_surface("shared").events] == ["first", "live"]
    window = query.read_event({"sessionId": "durable", "seq": 0})
    assert window.session == durable and window.target["data"]["content"][0]["text"] == "durable content"
    surface = query.read_surface("durable")
    assert surface.session == durable and surface.events[0]["data"]["content"][0]["text"] == "durable content"

    live.create(dict(shared, cwd="/conflict"), [])
    with pytest.raises(SessionQueryError) as info:
        query.list_sessions()
    assert (info.value.code, info.value.message) == (
        "SESSION_QUERY_SOURCE_CONFLICT",
        'session source headers conflict for session "shared"',
    )
    live.create(dict(shared, delegationDepth=1), [])
    assert codes(query.list_sessions) == "SESSION_QUERY_SOURCE_CONFLICT"
    live.create(dict(shared, delegationDepth=None), [])  # absent/null depth counts as 0
    assert len(query.list_sessions()) == 2
    # Without persistence only the live session remains, not persisted.
    live.create(dict(shared), [])
    alone = SessionQuery(None, live).list_sessions()
    assert to_builtins(alone) == [{"header": shared, "live": True, "persisted": False}]


def test_live_reads_never_touch_a_failing_index(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-EX-19
    corpus.write(log_header("durable"), [user(0, "x")])
    corpus.index()
    live.create(live_header("live"), [user(0, "a"), user(1, "b")])
    query, store = corpus.hooked(live)
    def fail_everything(kind: str, _name: str, _args: tuple) -> None:  # type: ignore[type-arg]
        raise RuntimeError(f"{kind} down")

    store.hook = fail_everything
    signal = AbortController().signal
    assert len(query.list_events("live")) == 2
    assert query.trace_event({"sessionId": "live", "seq": 1}, signal).target.seq == 1
    assert query.read_event({"sessionId": "live", "seq": 1}, signal).target["seq"] == 1
    assert store.calls == []
    with pytest.raises(SessionQueryError) as info:
        query.list_sessions()
    assert (info.value.code, info.value.message) == (
        "SESSION_QUERY_PERSISTENCE_FAILED",
        "session persistence listing failed: list down",
    )
    assert isinstance(info.value.cause, RuntimeError)
    assert codes(lambda: query.list_events("durable")) == "SESSION_QUERY_PERSISTENCE_FAILED"


def test_a_corrupt_log_is_listed_and_its_reads_fail_with_the_stored_error(corpus: Corpus) -> None:
    # T-EX-20: the index keeps the session with the exact error its reads raise.
    path = corpus.write(log_header("durable-corrupt"), [user(0, "x"), user(1, "y")])
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # breaks the last complete frame's checksum
    path.write_bytes(bytes(data))
    corpus.index()
    query = corpus.query()
    assert [r.header["id"] for r in query.list_sessions()] == ["durable-corrupt"]
    reads = [
        lambda: query.read_session("durable-corrupt"),
        lambda: query.list_events("durable-corrupt"),
        lambda: query.filter_events("durable-corrupt", []),
        lambda: query.read_surface("durable-corrupt"),
        lambda: query.read_event({"sessionId": "durable-corrupt", "seq": 0}),
        lambda: query.trace_event({"sessionId": "durable-corrupt", "seq": 0}),
        lambda: query.read_title("durable-corrupt"),
    ]
    for read in reads:
        with pytest.raises(SessionQueryError) as info:
            read()
        assert info.value.code == "SESSION_QUERY_CORRUPT_SESSION"
        assert info.value.message.startswith('stored session "durable-corrupt" is corrupt: ')
    (result,) = query.read_title_snapshots(["durable-corrupt"])
    assert result.status == "rejected" and result.reason.code == "SESSION_QUERY_CORRUPT_SESSION"


def test_missing_sessions_and_failed_inspections(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-EX-21 (the header-changed-between-list-and-inspect case cannot arise:
    # listing and inspection read one row in one transaction).
    assert codes(lambda: SessionQuery(None, live).list_events("absent")) == "SESSION_QUERY_SESSION_NOT_FOUND"
    corpus.write(log_header("durable"), [user(0, "x")])
    corpus.index()
    query, store = corpus.hooked(live)
    with pytest.raises(SessionQueryError) as info:
        query.list_events("absent")
    assert info.value.message == 'session "absent" not found'
    assert store.count("inspect") == 0
    store.hook = fail_on("inspect", OSError("disk I/O error"))
    with pytest.raises(SessionQueryError) as info:
        query.read_session("durable")
    assert (info.value.code, info.value.message) == (
        "SESSION_QUERY_PERSISTENCE_FAILED",
        'failed to inspect session "durable": disk I/O error',
    )


def test_database_errors_are_persistence_failures(corpus: Corpus) -> None:
    # §1.3 with a driver error injected at the listing, then a real one: the
    # index file is overwritten under an open engine.
    import sqlite3

    corpus.write(log_header("durable"), [user(0, "x")])
    corpus.index()
    query, store = corpus.hooked()
    store.hook = fail_on("list", sqlite3.OperationalError("database disk image is malformed"))
    with pytest.raises(SessionQueryError) as info:
        query.list_sessions()
    assert info.value.message == "session persistence listing failed: database disk image is malformed"
    assert codes(lambda: query.read_surface("durable")) == "SESSION_QUERY_PERSISTENCE_FAILED"

    real = corpus.query()
    size = corpus.db.stat().st_size
    with open(corpus.db, "r+b") as handle:
        handle.write(b"\xff" * size)
    with pytest.raises(SessionQueryError) as info:
        real.read_session("durable")
    assert info.value.code == "SESSION_QUERY_PERSISTENCE_FAILED"
    assert isinstance(info.value.cause, sqlite3.DatabaseError)
    assert info.value.message.startswith(("session persistence listing failed: ", 'failed to inspect session "durable": '))


def test_invalid_live_surfaces_and_constructor_config(live: InMemoryLiveSource) -> None:
    # T-EX-22 (live half; the config half is in test_config.py)
    no_op = user(0, "x")
    del no_op["surfaceOp"]
    live.create(live_header("bad"), [no_op])
    query = SessionQuery(None, live)
    with pytest.raises(SessionQueryError) as info:
        query.list_events("bad")
    assert info.value.code == "SESSION_QUERY_INVALID_SURFACE"
    assert info.value.message.startswith("invalid session surface: ")
    for read in (lambda: query.read_surface("bad"), lambda: query.filter_events("bad", []),
                 lambda: query.trace_event({"sessionId": "bad", "seq": 0})):
        assert codes(read) == "SESSION_QUERY_INVALID_SURFACE"
    # readEvent does no surface validation (§2.7).
    assert query.read_event({"sessionId": "bad", "seq": 0}).target["seq"] == 0


def test_an_invalid_persisted_surface_is_a_corrupt_log(corpus: Corpus) -> None:
    # Deliberate difference from the reference's fake backend: sessionq's
    # persistence is the JSONL log, whose inspection validates the surface.
    no_op = user(0, "x")
    del no_op["surfaceOp"]
    corpus.write(log_header("bad"), [no_op])
    corpus.index()
    assert codes(lambda: corpus.query().list_events("bad")) == "SESSION_QUERY_CORRUPT_SESSION"


def test_filter_events_order_of_failures(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # §2.5 and the recommended extras: blank text on a missing session is NOT_FOUND,
    # on a bad surface INVALID_SURFACE, on a valid session INVALID_FILTER (even with no documents).
    corpus.write(log_header("quiet"), [event("turn/start", 0, {"turn": 1}), event("turn/end", 1, {"turn": 1, "reason": {"kind": "completed"}})])
    corpus.index()
    bad = user(0, "x")
    del bad["surfaceOp"]
    live.create(live_header("bad"), [bad])
    query = corpus.query(live)
    blank = [{"kind": "text", "text": " \n "}]
    assert codes(lambda: query.filter_events("missing", blank)) == "SESSION_QUERY_SESSION_NOT_FOUND"
    assert codes(lambda: query.filter_events("bad", blank)) == "SESSION_QUERY_INVALID_SURFACE"
    with pytest.raises(SessionQueryError) as info:
        query.filter_events("quiet", blank)
    assert (info.value.code, info.value.message) == (
        "SESSION_QUERY_INVALID_FILTER",
        "session text filter must contain non-whitespace text",
    )
    # Shape errors come first, before the session is even looked up.
    assert codes(lambda: query.filter_events("missing", "x")) == "SESSION_QUERY_INVALID_FILTER"


def test_filter_events_on_persisted_and_live_sessions(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-EX-13 (events half) and T-SH-8
    corpus.write(log_header("durable", 1), [user(0, "Alpha\n beta"), user(1, "other"), user(2, "current", op=replace(1, 1), sources=[1])])
    corpus.index()
    live.create(live_header("live-filter", 2), [user(0, "live"), user(1, "Alpha\n beta")])
    query = corpus.query(live)
    surfaces = ["current"]
    found = query.filter_events("live-filter", [{"kind": "surface", "values": surfaces}])
    surfaces.append("shadowed")  # the caller's array is copied
    assert [(d.seq, d.text) for d in found] == [(0, "live"), (1, "Alpha\n beta")]
    text = query.filter_events("live-filter", [{"kind": "text", "text": "alpha beta"}])
    assert [(d.seq, d.text) for d in text] == [(1, "Alpha\n beta")]
    durable = query.filter_events("durable", [{"kind": "text", "text": "ALPHA   BETA"}])
    assert to_builtins(durable) == [
        {"sessionId": "durable", "seq": 0, "type": "user/message", "time": 0, "surface": "current", "text": "Alpha\n beta"}
    ]
    shadowed = query.filter_events("durable", [{"kind": "surface", "values": ["shadowed"]}, {"kind": "seq", "from": 1}])
    assert [(d.seq, d.surface) for d in shadowed] == [(1, "shadowed")]
    assert query.filter_events("durable", [{"kind": "surface", "values": []}]) == []
    for filters in ([{"kind": "bogus"}], [{"kind": "time", "from": 2, "to": 1}]):
        assert codes(lambda filters=filters: query.filter_events("durable", filters)) == "SESSION_QUERY_INVALID_FILTER"


def test_documents_with_substituted_characters_keep_their_exact_text(corpus: Corpus) -> None:
    # The index stores U+FFFD for NUL (reserved as a highlight marker); filterEvents
    # must still return the reference's exact text.
    corpus.write(log_header("nul"), [user(0, "a\x00b"), user(1, "plain \ufffd kept")])
    corpus.index()
    documents = corpus.query().filter_events("nul", [])
    assert [d.text for d in documents] == ["a\x00b", "plain \ufffd kept"]


def test_trace_event_on_persisted_and_live_logs_agree(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-TR-6 and T-TR-7 at the service level, through the index and through a live session.
    log = [
        event("turn/start", 0, {"turn": 1}),
        event("step/start", 1, {"turn": 1, "step": 1}),
        log_only(2),
        user(3, "q", sources=[2]),
        assistant(4, "a", op=replace(3, 3), sources=[3, 2]),
        user(5, "more"),
        event("step/end", 6, {"turn": 1, "step": 1}),
        event("step/start", 7, {"turn": 1, "step": 2}),
        assistant(8, "b", op=replace(4, 4), sources=[2, 4]),
    ]
    corpus.write(log_header("traced"), log)
    corpus.index()
    live.create(live_header("traced-live"), log)
    query = corpus.query(live)
    expected = {
        3: ("shadowed", 4, [4, 8], [], [2], [4]),
        4: ("shadowed", 8, [8], [3], [3, 2], [8]),
        2: ("log-only", None, [], [], [], [3, 4, 8]),
        8: ("current", None, [], [4], [2, 4], []),
    }
    for session_id in ("traced", "traced-live"):
        for seq, (surface, by, chain, replaced, sources, derived) in expected.items():
            trace = query.trace_event({"sessionId": session_id, "seq": seq})
            got = to_builtins(trace)
            assert got["target"]["surface"] == surface and got.get("replacedBy") == by
            assert (got["replacementChain"], got["replacedEventSeqs"], got["sourceEventSeqs"], got["derivedEventSeqs"]) == (
                chain, replaced, sources, derived
            )
        target = to_builtins(query.trace_event({"sessionId": session_id, "seq": 3}))["target"]
        assert target == {"sessionId": session_id, "seq": 3, "type": "user/message", "time": 0, "surface": "shadowed"}
        first = query.trace_event({"sessionId": session_id, "seq": 4})
        first.target.time = 77
        for values in (first.replacement_chain, first.replaced_event_seqs, first.source_event_seqs, first.derived_event_seqs):
            values.append(99)
        again = query.trace_event({"sessionId": session_id, "seq": 4})
        assert (again.target.time, again.replacement_chain, again.replaced_event_seqs, again.source_event_seqs, again.derived_event_seqs) == (
            0, [8], [3], [3, 2], [8]
        )


def test_trace_event_call_counts_and_failures(corpus: Corpus, live: InMemoryLiveSource) -> None:
    # T-TR-8
    shared = log_header("shared", cwd="/same")
    corpus.write(shared, [user(0, "x")])
    corpus.index()
    query, store = corpus.hooked(live)
    assert query.trace_event({"sessionId": "shared", "seq": 0}).target.surface == "current"
    assert (store.count("list"), store.count("inspect") > 0) == (1, True)
    counts = list(store.calls)
    live.create(dict(shared), [user(0, "x"), user(1, "y")])
    store.hook = fail_on("list", RuntimeError("down"))
    assert query.trace_event({"sessionId": "shared", "seq": 1}).target.seq == 1
    assert store.calls == counts
    live.remove("shared")
    assert codes(lambda: query.trace_event({"sessionId": "shared", "seq": 0})) == "SESSION_QUERY_PERSISTENCE_FAILED"
    store.hook = fail_on("inspect", RuntimeError("down"))
    assert codes(lambda: query.trace_event({"sessionId": "shared", "seq": 0})) == "SESSION_QUERY_PERSISTENCE_FAILED"


def test_trace_event_target_check_precedes_surface_validation(live: InMemoryLiveSource) -> None:
    # T-TR-9: a replacement of a missing node; seq 9 is missing, seq 0 exists.
    live.create(live_header("broken"), [user(0, "x"), user(1, "y", op=replace(9, 9), sources=[0])])
    query = SessionQuery(None, live)
    assert codes(lambda: query.trace_event({"sessionId": "broken", "seq": 9})) == "SESSION_QUERY_EVENT_NOT_FOUND"
    assert codes(lambda: query.trace_event({"sessionId": "broken", "seq": 0})) == "SESSION_QUERY_INVALID_SURFACE"


@pytest.mark.parametrize(
    "log",
    [
        [event("turn/start", 0, {"turn": 1}, sources=[0])],  # T-TR-10 non-surface event with sources
        [user(0, "x", sources="invalid")],  # T-TR-11
        [user(0, "x", sources=[])],  # T-TR-12
        [log_only(0), user(1, "x", sources=[0, None])],  # T-TR-13 (a hole reads as undefined)
        [log_only(0), user(1, "x", sources=[0, 0])],  # T-TR-14
        [user(0, "x", sources=[-1])],  # T-TR-15
        [user(0, "x", sources=[1]), user(1, "y")],  # T-TR-16
        [user(0, "x"), user(1, "y", op=replace(0, 0))],  # T-TR-17
        [user(0, "x"), user(1, "y"), user(2, "z", op=replace(0, 1), sources=[0])],  # T-TR-18
        [event("turn/start", 0, {"turn": 1}, op="append")],  # T-TR-19
    ],
    ids=["T-TR-10", "T-TR-11", "T-TR-12", "T-TR-13", "T-TR-14", "T-TR-15", "T-TR-16", "T-TR-17", "T-TR-18", "T-TR-19"],
)
def test_invalid_surfaces_fail_trace_event(live: InMemoryLiveSource, log: list) -> None:  # type: ignore[type-arg]
    live.create(live_header("bad"), log)
    assert codes(lambda: SessionQuery(None, live).trace_event({"sessionId": "bad", "seq": 0})) == "SESSION_QUERY_INVALID_SURFACE"


def test_duplicate_sources_fail_list_events(live: InMemoryLiveSource) -> None:
    # T-TR-20
    live.create(live_header("dup"), [log_only(0), user(1, "x", sources=[0, 0])])
    assert codes(lambda: SessionQuery(None, live).list_events("dup")) == "SESSION_QUERY_INVALID_SURFACE"


def test_lone_surrogates_survive_the_index(corpus: Corpus) -> None:
    # A log may carry an escaped lone surrogate; the reference returns it as is.
    import json

    from readmodel.core.jsonout import encode_json
    from tests.logfactory import header_bytes, transcript_path, write_frames

    hdr = log_header("odd")
    event = user(0, "a\ud800b")
    body = json.dumps(event, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"
    write_frames(transcript_path(corpus.root, hdr), [header_bytes(hdr), body])
    corpus.index()
    query = corpus.query()
    assert query.read_session("odd").events == [event]
    (document,) = query.filter_events("odd", [])
    assert document.text == "a\ud800b"
    assert json.loads(encode_json(query.filter_events("odd", [])))[0]["text"] == "a\ud800b"
