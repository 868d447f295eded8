"""The read interface's contract (readmodel.store.interface), for every backend.

Each backend's :class:`IndexReader` must answer what the logs themselves say:
the oracle here is the indexer's reader and the pure projection rules applied
to each log straight from disk, never another backend.  The suite runs once
per entry of tests/backends.py.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from indexer.layout import Compression, locate
from indexer.storedtexts import sanitize_document
from indexer.reader import inspect_view, read_log
from readmodel.projection.extraction import TEXT_EVENT_TYPES, extract_event_text
from readmodel.projection.surface import fold_events
from readmodel.store.interface import IndexReader, IndexSource
from readmodel.store.rowkeys import SURFACE_CODES
from tests.backends import Backend
from tests.corpus import SYNTHETIC_ROOT, require_corpus

require_corpus()


@pytest.fixture(scope="module")
def source(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexSource]:
    db = backend.build(SYNTHETIC_ROOT, backend.database(tmp_path_factory.mktemp("contract"), "synthetic"))
    opened = backend.open_source(db)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def logs(source: IndexSource) -> dict[str, list[dict[str, Any]]]:
    """Every readable indexed session's events, as the inspect view of its log on disk."""
    with source.read() as reader:
        ids = [header["id"] for header in reader.list_headers()]
        rows = reader.lookup_many(ids)
    views = {}
    for session_id, row in rows.items():
        if row.status == "ok":
            views[session_id] = inspect_view(read_log(locate(SYNTHETIC_ROOT, session_id, Compression.ZSTD)))["events"]
    assert len(views) >= 20, "the synthetic corpus should hold many readable sessions"
    return views


def _sid(reader: IndexReader, session_id: str) -> int:
    row = reader.lookup(session_id)
    assert row is not None
    return row.sid


def _json(value: Any) -> bytes:
    return msgspec.json.encode(value)


def test_listing_order_and_keyed_listing_agree(source: IndexSource) -> None:
    with source.read() as reader:
        plain = [header["id"] for header in reader.list_headers()]
        keyed = reader.list_keyed_headers()
    assert [header["id"] for header, _, _ in keyed] == plain
    # Listing order: createdAt descending, then the id's collation key ascending.
    keys = [(-created, id_key) for _, created, id_key in keyed]
    assert keys == sorted(keys)
    assert len(set(plain)) == len(plain)


def test_lookup_finds_each_listed_session_and_nothing_else(source: IndexSource) -> None:
    with source.read() as reader:
        ids = [header["id"] for header in reader.list_headers()]
        many = reader.lookup_many([*ids, "no-such-session"])
        assert set(many) == set(ids)
        for session_id in ids:
            row = reader.lookup(session_id)
            assert row is not None and row.id == session_id and many[session_id] == row
            assert row.header()["id"] == session_id
        assert reader.lookup("no-such-session") is None


def test_a_snapshot_keeps_one_generation(source: IndexSource) -> None:
    with source.read() as reader:
        first = reader.generation()
        reader.list_headers()
        assert reader.generation() == first


def test_raw_events_are_the_logs_events_exactly(source: IndexSource, logs: dict[str, list[dict[str, Any]]]) -> None:
    rng = random.Random(7)
    with source.read() as reader:
        for session_id, events in logs.items():
            sid = _sid(reader, session_id)
            assert [_json(e) for e in reader.raw_all(sid)] == [_json(e) for e in events], session_id
            if not events:
                continue
            first = rng.randrange(len(events))
            last = rng.randrange(first, len(events))
            assert [_json(e) for e in reader.raw_range(sid, first, last)] == [_json(e) for e in events[first : last + 1]]
            assert reader.raw_range(sid, last + 1, last) == []
            wanted = rng.sample(range(len(events)), min(5, len(events)))
            at = reader.raw_at(sid, wanted)
            assert {seq: _json(e) for seq, e in at.items()} == {seq: _json(events[seq]) for seq in wanted}


def test_event_records_and_rows_match_the_surface_fold(source: IndexSource, logs: dict[str, list[dict[str, Any]]]) -> None:
    with source.read() as reader:
        for session_id, events in logs.items():
            sid = _sid(reader, session_id)
            fold = fold_events(events)
            records = reader.event_records(sid)
            assert [(seq, etype, time) for seq, etype, time, _ in records] == [
                (e["seq"], e["type"], e["time"]) for e in events
            ], session_id
            assert [code for *_, code in records] == [SURFACE_CODES[s] for s in fold.surfaces]
            assert reader.surface(sid) == fold.nodes
            replaced_by = fold.replaced_by()
            removed = fold.replaced_event_seqs()
            for event in events:
                seq = event["seq"]
                row = reader.event_row(sid, seq)
                assert row is not None and (row.seq, row.type) == (seq, event["type"])
                assert row.surface == SURFACE_CODES[fold.surfaces[seq]]
                assert reader.replaced_by(sid, seq) == replaced_by.get(seq)
                assert row.source_seqs() == list(event.get("sourceEventSeqs") or [])
                assert row.replaced_seqs() == list(removed.get(seq, ()))
            assert reader.event_row(sid, len(events)) is None
            ranged = reader.event_range_records(sid, 0, len(events) - 1)
            assert [(seq, code, by) for seq, code, by, _ in ranged] == [
                (e["seq"], SURFACE_CODES[fold.surfaces[e["seq"]]], replaced_by.get(e["seq"])) for e in events
            ]


def test_derived_seqs_are_the_later_events_citing_a_source(source: IndexSource, logs: dict[str, list[dict[str, Any]]]) -> None:
    with source.read() as reader:
        for session_id, events in logs.items():
            citing: dict[int, list[int]] = {}
            for event in events:
                for cited in set(event.get("sourceEventSeqs") or []):
                    citing.setdefault(cited, []).append(event["seq"])
            if not citing:
                continue
            sid = _sid(reader, session_id)
            for seq in range(len(events)):
                assert reader.derived_seqs(sid, seq) == sorted(citing.get(seq, [])), (session_id, seq)


def test_documents_are_the_extracted_texts(source: IndexSource, logs: dict[str, list[dict[str, Any]]]) -> None:
    with source.read() as reader:
        for session_id, events in logs.items():
            sid = _sid(reader, session_id)
            documents = {seq: (etype, text) for seq, etype, _, _, text in reader.documents(sid)}
            expected = {}
            for event in events:
                if event["type"] in TEXT_EVENT_TYPES:
                    text = extract_event_text(event)
                    if text:
                        expected[event["seq"]] = (event["type"], text)
            assert documents.keys() == expected.keys(), session_id
            for seq, (etype, text) in expected.items():
                assert documents[seq][0] == etype
                # Stored documents are sanitised (NUL, lone surrogates and the
                # snippet markers become U+FFFD); otherwise they are the text itself.
                assert documents[seq][1] == sanitize_document(text), (session_id, seq)
