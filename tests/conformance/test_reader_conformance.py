"""The inspect view of every corpus log equals the reference's ``readSession`` answer.

Each event is pinned by the golden hash (SHA-256 of its sorted-key compact JSON,
first 16 hex digits).  The one designed difference: synthetic crash-closer
tool results carry sessionq's own wording, so those events (and only those)
are checked field by field instead of by hash.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from indexer.layout import Compression, discover
from indexer.reader import DecodedLog, inspect_session, inspect_view, read_log
from indexer.repair import is_closer_text
from tests.corpus import RAW_ROOT, SYNTHETIC_ROOT, ZSTD_ROOT, golden, golden_by_session, require_corpus

require_corpus()


def event_hash(event: dict[str, Any]) -> str:
    text = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _sessions(root: Path, compression: Compression) -> list[str]:
    return [ref.path for ref in discover(root, compression).transcripts]


def _assert_matches(log: DecodedLog, hashes: dict[str, Any], headers: dict[str, Any]) -> None:
    view = inspect_view(log)
    sid = log.header["id"]
    assert log.header == headers[sid]["header"]
    expected = hashes[sid]["events"]
    assert len(view["events"]) == len(expected) == headers[sid]["eventCount"]
    closer_start = len(view["events"]) - len(log.closers)
    for index, (event, (seq, etype, digest)) in enumerate(zip(view["events"], expected, strict=True)):
        assert (event["seq"], event["type"]) == (seq, etype)
        if event_hash(event) == digest:
            continue
        # Only our own closer wording may differ from the reference.
        assert index >= closer_start and etype == "tool/result", f"{sid} seq {seq} differs"
        text = event["data"]["message"]["content"][0]["content"][0]["text"]
        assert is_closer_text(text)


@pytest.mark.parametrize(
    ("root", "compression"), [(ZSTD_ROOT, Compression.ZSTD), (RAW_ROOT, Compression.NONE)], ids=["zstd", "raw"]
)
def test_every_corpus_log_reads_exactly_as_the_reference(root: Path, compression: Compression) -> None:
    hashes = golden_by_session("read-session-hashes")
    headers = golden_by_session("read-session")
    paths = _sessions(root, compression)
    assert len(paths) == len(hashes) == 125
    for path in paths:
        _assert_matches(read_log(path, compression), hashes, headers)


def test_every_synthetic_log_reads_exactly_as_the_reference_with_its_wording(reference_wording: None) -> None:
    hashes = golden_by_session("read-session-hashes", synthetic=True)
    headers = golden_by_session("read-session", synthetic=True)
    paths = _sessions(SYNTHETIC_ROOT, Compression.ZSTD)
    for path in paths:
        log = read_log(path, Compression.ZSTD)
        view = inspect_view(log)
        expected = hashes[log.header["id"]]["events"]
        assert [[e["seq"], e["type"], event_hash(e)] for e in view["events"]] == expected
        assert log.header == headers[log.header["id"]]["header"]


def test_every_synthetic_log_reads_exactly_as_the_reference() -> None:
    hashes = golden_by_session("read-session-hashes", synthetic=True)
    headers = golden_by_session("read-session", synthetic=True)
    paths = _sessions(SYNTHETIC_ROOT, Compression.ZSTD)
    assert len(paths) == len(hashes) == 40
    closers = 0
    for path in paths:
        log = read_log(path, Compression.ZSTD)
        closers += len(log.closers)
        _assert_matches(log, hashes, headers)
    assert closers > 0, "the synthetic corpus exercises open tails"


def test_zstd_and_raw_roots_give_identical_events() -> None:
    raw = {read_log(p).header["id"]: read_log(p) for p in _sessions(RAW_ROOT, Compression.NONE)}
    for path in _sessions(ZSTD_ROOT, Compression.ZSTD):
        zlog = read_log(path)
        rlog = raw[zlog.header["id"]]
        assert inspect_view(zlog) == inspect_view(rlog)


def test_targeted_inspect_checks_identity_for_every_listed_session() -> None:
    for entry in golden("list-sessions")["sessions"]:
        sid = entry["header"]["id"]
        log = inspect_session(ZSTD_ROOT, sid, Compression.ZSTD)
        assert log.header == entry["header"]


def test_escaped_synthetic_ids_are_located_by_their_id() -> None:
    ids = [entry["header"]["id"] for entry in golden("list-sessions", synthetic=True)["sessions"]]
    odd = [sid for sid in ids if not all(ch.isalnum() or ch in "-_." for ch in sid) or sid in (".", "..")]
    assert odd, "the synthetic corpus holds ids that need escaping"
    for sid in ids:
        assert inspect_session(SYNTHETIC_ROOT, sid, Compression.ZSTD).header["id"] == sid
