"""The fast path's plain lines taken in C (``indexer._linescan.plain_run``) exactly as the
Python loop of ``Pipeline.consume_region`` takes them: the same items in the same batches,
the same fold, closers and errors, whatever a line's spelling near the rules' edges."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer import pipeline
from indexer.layout import Compression
from indexer.packedrows import PackedRow
from indexer.reader import LogReader
from indexer.records import LogFormatError
from indexer.projection import encode_items
from readmodel.core.jsvalues import MAX_SAFE_INTEGER
from tests.logfactory import chunk, ev, header, simple_turn, step_end, step_start, tool_call, write_log

_EDGE_VALUES = [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2**64, 1.0, True, None, "1", -0.0]

# (key, value) changes to one line: a value at an edge of a rule, a key added or taken away.
_CHANGES = st.one_of(
    st.tuples(st.sampled_from(["time", "seq", "type"]), st.sampled_from(_EDGE_VALUES)),
    st.tuples(st.just("type"), st.sampled_from(["session/title", "step/start", "tool/call", "turn/start", "x-unknown", "text-chunks"])),
    st.tuples(st.sampled_from(["drop data", "drop time", "extra key", "data null"]), st.none()),
)


def _events(turns: int) -> list[dict[str, Any]]:
    """Turns with plain lines of every kind: inert chunks and titles, walked steps and tool calls."""
    events: list[dict[str, Any]] = []
    for n in range(turns):
        for event in simple_turn(len(events), f"turn {n}"):
            events.append(dict(event, seq=len(events)))
        events.append(ev("session/title", len(events), {"title": f"t{n}"}))
        events.append(step_start(len(events), step=2))
        events.append(tool_call(len(events), f"c{n}"))
        events += [chunk(len(events) + k, "y", time=2000 + k) for k in range(3)]
        events.append(step_end(len(events), step=2))
    return events


def _changed(event: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    event = dict(event)
    if key == "drop data":
        event.pop("data", None)
    elif key == "drop time":
        event.pop("time", None)
    elif key == "extra key":
        event["extra"] = 1
    elif key == "data null":
        event["data"] = None
    else:
        event[key] = value
    return event


def _read(path: Path, c_loop: bool, packed: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    batches: list[tuple[bytes, bytes | None, list[str]]] = []

    def take(items: list[Any], lines: bytes | None = None) -> None:
        batches.append((encode_items(items), lines, ["row" if type(item) is PackedRow else "event" for item in items]))

    with monkeypatch.context() as patch:
        if not c_loop:
            patch.setattr(pipeline, "_plain_run", None)
        reader = LogReader(path, Compression.ZSTD, sink=take, packed_rows=packed, raw_lines=packed)
        try:
            log = reader.read()
        except LogFormatError as exc:
            return ("error", exc.message, exc.kind, exc.stage, batches)
    return (batches, log.replacements, encode_items(log.closers), log.resume is None)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    changes=st.lists(st.tuples(st.integers(min_value=0, max_value=80), _CHANGES), max_size=3),
    pack=st.booleans(),
    packed=st.booleans(),
)
def test_the_c_plain_run_takes_lines_as_the_python_loop_does(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, changes: list[tuple[int, tuple[str, Any]]], pack: bool, packed: bool
) -> None:
    if pipeline._plain_run is None:
        pytest.skip("indexer._linescan is not built (or switched off)")
    events = _events(5)
    for at, (key, value) in changes:
        if at < len(events):
            events[at] = _changed(events[at], key, value)
    path = write_log(tmp_path_factory.mktemp("plain") / "root", header("plain"), [events], pack=pack)
    assert _read(path, True, packed, monkeypatch) == _read(path, False, packed, monkeypatch)


@pytest.mark.parametrize("time", [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 1.5, True])
def test_a_plain_line_s_time_at_the_safe_range_s_edges_is_taken_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, time: Any) -> None:
    if pipeline._plain_run is None:
        pytest.skip("indexer._linescan is not built (or switched off)")
    events = _events(1)
    events[-2] = dict(events[-2], time=time)  # a chunk: an inert line
    events[-1] = dict(events[-1], time=time)  # a step end: a walked line
    path = write_log(tmp_path / "root", header("edges"), [events], pack=False)
    assert _read(path, True, True, monkeypatch) == _read(path, False, True, monkeypatch)


def test_an_accelerator_built_before_a_function_was_added_leaves_that_function_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    # A stale build (its source changed since, bootstrap not yet run) lacks the new function:
    # the caller takes its Python path instead of failing at import.
    import sys
    import types

    from readmodel.core.accelerators import accelerated

    stale = types.ModuleType("stale_accelerator")
    monkeypatch.setitem(sys.modules, "stale_accelerator", stale)
    assert accelerated(("stale_accelerator", "SESSIONQ_STALE_C"), "plain_run") is None
    stale.plain_run = len  # type: ignore[attr-defined]
    assert accelerated(("stale_accelerator", "SESSIONQ_STALE_C"), "plain_run") is len
    monkeypatch.setenv("SESSIONQ_STALE_C", "0")
    assert accelerated(("stale_accelerator", "SESSIONQ_STALE_C"), "plain_run") is None


# -- the appended-surface checks in C -------------------------------------------------------

_MESSAGE_CHANGES = st.sampled_from(
    [
        ("role", "system"), ("role", None), ("id", ""), ("id", 5), ("source", None), ("source", {"kind": ""}),
        ("source", {"kind": "tool"}), ("source", {"kind": "model", "provider": "p"}), ("source", {"kind": "tool", "callId": "other"}),
        ("source", {"kind": "tool", "callId": ""}), ("content", "text"), ("content", []), ("content", [{"type": "tool-result", "toolCallId": "c1", "content": "x"}]),
        ("content", [{"type": "tool-result", "toolCallId": "c2", "content": []}]), ("content", [{"type": "tool-result", "toolCallId": 1, "content": []}]),
        ("content", [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]), ("drop", "id"), ("drop", "source"), ("drop", "content"),
    ]
)
_EVENT_CHANGES = st.sampled_from(
    [
        ("surfaceOp", "Append"), ("surfaceOp", {"op": "replace", "start": 1, "end": 1}), ("time", 1.0), ("time", MAX_SAFE_INTEGER + 1),
        ("time", -MAX_SAFE_INTEGER), ("seq", MAX_SAFE_INTEGER + 1), ("seq", True), ("extra", 1), ("ignorable", True), ("sourceEventSeqs", [0]),
        ("data", None), ("data", []), ("drop", "data"), ("drop", "surfaceOp"), ("type", "steering/message"),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    which=st.integers(min_value=0, max_value=2),
    message_changes=st.lists(_MESSAGE_CHANGES, max_size=2),
    event_changes=st.lists(_EVENT_CHANGES, max_size=2),
)
def test_the_c_append_checks_pass_only_what_the_python_ones_pass(which: int, message_changes: list[tuple[str, Any]], event_changes: list[tuple[str, Any]]) -> None:
    from tests.logfactory import assistant, tool_result, user

    c_check = pipeline._appendable
    if c_check is None:
        pytest.skip("indexer._linescan is not built (or switched off)")
    event = [user(4, "hi"), assistant(4, "x", calls=[("c1", "bash", "{}")], sources=[1, 2]), tool_result(4, "c1", "out", sources=[3])][which]
    event = json.loads(json.dumps(event))
    message = event["data"] if which == 0 else event["data"]["message"]
    for key, value in message_changes:
        if key == "drop":
            message.pop(value, None)
        else:
            message[key] = value
    for key, value in event_changes:
        if key == "drop":
            event.pop(value, None)
        else:
            event[key] = value
    answer = c_check(event)
    assert answer is True or answer is None
    expected = pipeline.appendable_python(event) if type(event.get("seq")) is int else None
    if answer is True:
        assert expected is True
    if not message_changes and not event_changes:
        assert answer is True  # the harness's own spelling is checked in C
