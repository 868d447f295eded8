"""Surface fold, event traces and lineage against the reference's answers.

For every session of the real corpus and of the synthetic corpus, the logs are
read through the reader's inspect view (legacy shapes upgraded, crash closers
appended) and compared with the golden ``listEvents`` surfaces, ``readSurface``
order, every ``traceEvent`` and every ``traceSession``.  No session is skipped:
the number of transcripts must equal the number of golden entries.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest

from indexer.reader import inspect_view, read_log
from readmodel.projection.eventtrace import build_event_records, trace_event
from readmodel.projection.lineage import lineage_trace_to_builtins, trace_session
from readmodel.projection.surface import fold_events
from readmodel.core.vocabulary import SessionRecord
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT, golden, golden_by_session, require_corpus

require_corpus()

CORPORA = pytest.mark.parametrize("synthetic", [False, True], ids=["corpus", "synthetic"])


@cache
def observed(synthetic: bool) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Session id -> (header, inspect-view events) for every transcript of a root."""
    root: Path = SYNTHETIC_ROOT if synthetic else ZSTD_ROOT
    out: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for path in sorted(root.glob("*/*/session.jsonl.zstd")):
        view = inspect_view(read_log(path))
        header = view["session"]
        assert header["id"] not in out, f"duplicate session id {header['id']!r}"
        out[header["id"]] = (header, view["events"])
    return out


def sessions(synthetic: bool, golden_name: str) -> list[tuple[str, dict[str, Any], list[dict[str, Any]], Any]]:
    """Every observed session paired with its golden entry (all of them, none missing)."""
    logs = observed(synthetic)
    expected = golden_by_session(golden_name, synthetic)
    assert sorted(logs) == sorted(expected), "transcripts and golden sessions differ"
    return [(sid, header, events, expected[sid]) for sid, (header, events) in logs.items()]


@CORPORA
def test_list_events_surfaces(synthetic: bool) -> None:
    mismatches = []
    for sid, _, events, entry in sessions(synthetic, "list-events"):
        assert entry["columns"] == ["seq", "type", "time", "surface"]
        records = [[r.seq, r.type, r.time, r.surface] for r in build_event_records(sid, events)]
        if records != entry["events"]:
            mismatches.append(sid)
    assert mismatches == []


@CORPORA
def test_read_surface_order(synthetic: bool) -> None:
    mismatches = []
    for _, _, events, entry in sessions(synthetic, "read-surface"):
        nodes = fold_events(events).nodes
        got = {
            "capturedThroughSeq": events[-1]["seq"] if events else None,
            "surfaceSeqs": nodes,
            "surfaceTypes": [events[seq]["type"] for seq in nodes],
        }
        if got != {key: entry[key] for key in got}:
            mismatches.append(entry["sessionId"])
    assert mismatches == []


def shorten_trace(trace: dict[str, Any]) -> dict[str, Any]:
    """The golden file's form of an event trace."""
    target = trace["target"]
    out: dict[str, Any] = {"seq": target["seq"], "target": [target["seq"], target["type"], target["time"],
                                                          target["surface"]]}
    if "replacedBy" in trace:
        out["replacedBy"] = trace["replacedBy"]
    for key in ("replacementChain", "replacedEventSeqs", "sourceEventSeqs", "derivedEventSeqs"):
        out[key] = trace[key]
    return out


@CORPORA
def test_every_event_trace(synthetic: bool) -> None:
    mismatches = []
    traced = 0
    for sid, header, events, entry in sessions(synthetic, "trace-event"):
        for expected in entry["traces"]:
            observation = trace_event(sid, header, events, expected["seq"])
            assert observation.session == header
            traced += 1
            if shorten_trace(msgspec.to_builtins(observation)) != expected:
                mismatches.append((sid, expected["seq"]))
    assert mismatches == []
    assert traced == (2189 if synthetic else 8972)


def short_record(record: dict[str, Any]) -> dict[str, Any]:
    return {"id": record["header"]["id"], "live": record["live"], "persisted": record["persisted"]}


def short_forest(forest: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Golden node form ``{id, live, persisted, descendants}`` (shallow in this corpus)."""
    return [{**short_record(node["session"]), "descendants": short_forest(node["descendants"])} for node in forest]


def short_lineage(trace: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "target": short_record(trace["target"]),
        "ancestors": [short_record(r) for r in trace["ancestors"]],
        "descendants": short_forest(trace["descendants"]),
        "complete": trace["complete"],
    }
    if "root" in trace:
        out["root"] = short_record(trace["root"])
    if "unresolvedParentId" in trace:
        out["unresolvedParentId"] = trace["unresolvedParentId"]
    return out


@CORPORA
def test_every_session_lineage(synthetic: bool) -> None:
    listed = golden("list-sessions", synthetic)["sessions"]
    records = [SessionRecord(header=s["header"], live=s["live"], persisted=s["persisted"]) for s in listed]
    assert {r.header["id"] for r in records} == set(observed(synthetic))
    headers = {sid: header for sid, (header, _) in observed(synthetic).items()}
    assert all(r.header == headers[r.header["id"]] for r in records), "listed headers differ from the logs"
    expected = golden_by_session("trace-session", synthetic)
    assert len(expected) == len(records)
    mismatches = [
        sid for sid, entry in expected.items()
        if short_lineage(lineage_trace_to_builtins(trace_session(records, sid))) != entry["trace"]
    ]
    assert mismatches == []
