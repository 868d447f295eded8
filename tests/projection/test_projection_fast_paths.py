"""Properties: every fast path of the index writer equals its plain, slow form.

The cold-build optimisations each replace a simple computation with a faster
one: document sanitising, batched JSON encoding of raw lines, block splitting
by pieces, run and link-span compaction of event rows, grouped inserts with
NULL literals.  Each property compares the fast path with a straightforward
reference, and the compacted rows with what the read side must return for
them (``IndexReader``), on random inputs.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from indexer.preparation import RecordingCursor
from indexer.projection import SessionProjector, insert_event_rows, link_spans
from indexer.storedtexts import sanitize_document
from indexer.packedrows import PackedRow, check_row, expand_row
from readmodel.store.blocks import (
    BLOCK_BYTES,
    BLOCK_EVENTS,
    decompress_block,
    encode_event,
    encode_events,
    pack_run_times,
    pack_run_types,
    unpack_run_times,
    unpack_run_types,
)
from readmodel.store.database import open_writer
from readmodel.core.jsvalues import MAX_SAFE_INTEGER
from readmodel.store.schema import MAX_LINK_SPAN
from readmodel.store.interface import EventRow
from readmodel.store.sqlite import SqliteIndexReader
from tests import indexdb

# Text with the characters the fast paths special-case: NUL, the highlight
# markers, lone surrogates, non-ASCII and plain ASCII.
_SPECIAL = st.sampled_from(["\x00", "\ufdd0", "\ufdd1", "\ud800", "\udfff", "é", "😀", "\n", '"', "a", " "])


def _as_decoded(text: str) -> str:
    """``text`` as a JSON decoder can produce it: an adjacent high and low
    surrogate always decode as the one astral character they encode."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


texts = st.lists(st.one_of(_SPECIAL, st.text(max_size=4)), max_size=12).map("".join).map(_as_decoded)


def _sanitize_reference(text: str) -> str:
    text = text.translate(str.maketrans({"\x00": "\ufffd", "\ufdd0": "\ufffd", "\ufdd1": "\ufffd"}))
    return re.sub("[\ud800-\udfff]", "\ufffd", text)


@given(texts)
def test_sanitize_document_equals_translate_then_surrogate_replacement(text: str) -> None:
    assert sanitize_document(text) == _sanitize_reference(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


@given(st.lists(st.dictionaries(texts, json_values, max_size=4), max_size=8))
def test_batched_encoding_equals_one_line_per_event(events: list[dict[str, Any]]) -> None:
    assert encode_events(events) == b"".join(encode_event(event) + b"\n" for event in events)
    for line in encode_events(events).split(b"\n")[:-1]:
        assert json.loads(line) == json.loads(encode_event(json.loads(line)))  # each line stands alone


@given(st.lists(st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER), min_size=1, max_size=40))
def test_run_times_round_trip(times: list[int]) -> None:
    assert unpack_run_times(bytes(pack_run_times(times))) == times


@given(st.lists(st.sampled_from(["assistant/chunk", "step/start", "tool/call", "x/y"]), min_size=1, max_size=40))
def test_run_types_round_trip(types: list[str]) -> None:
    assert unpack_run_types(bytes(pack_run_types(types))) == types


@given(st.lists(st.integers(0, 3 * MAX_LINK_SPAN), min_size=1, max_size=60) | st.lists(st.integers(0, 5000), min_size=1, max_size=5).map(lambda s: list(range(min(s), max(s) + 1))))
def test_link_spans_cover_exactly_the_cited_seqs(sources: list[int]) -> None:
    spans = link_spans(sources)
    covered = [first + offset for first, span in spans for offset in range(span)]
    assert covered == sorted(set(sources))  # ascending, disjoint, nothing more or less
    assert all(1 <= span <= MAX_LINK_SPAN for _, span in spans)


def test_link_spans_keep_one_row_per_value_for_non_integers() -> None:
    assert link_spans([2.0, 1, 2.0]) == [(2.0, 1), (1, 1)]


# -- the projector against the read side ------------------------------------------------------

_NULLABLE_ROW = st.tuples(
    st.integers(1, 3),
    st.integers(0, 10**6),
    st.sampled_from(["a", "b"]),
    st.none() | st.integers(0, 10) | st.just(1.5),
    st.integers(0, 2),
    st.none() | st.integers(0, 5),
    st.none() | st.binary(max_size=3).map(bytearray),
    st.none() | st.binary(max_size=3),
    st.integers(0, 1),
    st.none() | st.integers(0, 9),
    st.none() | st.binary(max_size=3).map(bytearray),
)


@given(st.lists(_NULLABLE_ROW, max_size=20, unique_by=lambda row: (row[0], row[1])))
def test_grouped_event_inserts_equal_binding_every_column(rows: list[tuple[Any, ...]]) -> None:
    schema = (
        'CREATE TABLE "events" ("sid", "seq", "type", "time" INTEGER, "surface", "replaced_by", "sources", "replaced", '
        '"synthetic", "surface_key", "digest", PRIMARY KEY ("sid", "seq")) WITHOUT ROWID'
    )
    fast, slow = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    for conn in (fast, slow):
        conn.execute(schema)
    insert_event_rows(fast.cursor(), rows)
    slow.executemany('INSERT INTO "events" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', rows)
    query = 'SELECT *, typeof("time"), typeof("sources") FROM "events" ORDER BY "sid", "seq"'
    assert fast.execute(query).fetchall() == slow.execute(query).fetchall()


_TYPES = ("assistant/chunk", "step/start", "step/end", "tool/call", "turn/end", "session/title", "x-ext/thing", "user/message")


@st.composite
def sessions(draw: Any) -> tuple[list[dict[str, Any]], list[int]]:
    """Events of one session (valid for the projector: no replacements) and a split into batches."""
    count = draw(st.integers(1, 60))
    events: list[dict[str, Any]] = []
    for seq in range(count):
        etype = draw(st.sampled_from(_TYPES))
        time: Any = draw(st.integers(0, 10**13) | st.sampled_from([1.5, 2**60, -(2**55)]))
        data: Any = {"n": seq}
        if etype == "tool/call":
            data = {"name": "read", "arguments": draw(texts)}
        elif etype == "user/message":
            data = {"content": [{"type": "text", "text": draw(texts)}]}
        elif etype == "turn/end":
            data = {"reason": {"kind": draw(st.sampled_from(["completed", "aborted"]))}}
        event: dict[str, Any] = {"type": etype, "seq": seq, "time": time, "data": data}
        if seq and draw(st.integers(0, 4)) == 0:
            event["sourceEventSeqs"] = draw(st.lists(st.integers(0, seq - 1), min_size=1, max_size=8))
        events.append(event)
    cuts = sorted(draw(st.sets(st.integers(1, count - 1), max_size=6))) if count > 1 else []
    return events, cuts


_TEMPLATES: dict[str, Path] = {}


def _template(tmp_path_factory: Any) -> Path:
    """An empty, migrated index with one session row (sid 1), made once per run."""
    if "db" not in _TEMPLATES:
        db = tmp_path_factory.mktemp("fast-paths-template") / "index.db"
        open_writer(str(db)).dispose()
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute(
            'INSERT INTO "sessions" ("sid", "id", "path", "header_json", "id_key", "revision", "size", "event_count", '
            "\"stored_count\", \"tail_state\", \"status\", \"generation\", \"indexed_at\") VALUES (1, 's', '/s', x'7b7d', x'00', '', 0, 0, 0, 'clean', 'ok', 1, 0)"
        )
        conn.close()
        _TEMPLATES["db"] = db
    return _TEMPLATES["db"]


@contextmanager
def _index(tmp_path_factory: Any) -> Iterator[sqlite3.Cursor]:
    """A fresh copy of the template, inside an open write transaction (rolled back)."""
    conn = indexdb.connect(":memory:", isolation_level=None)  # the documents view needs its functions
    with sqlite3.connect(_template(tmp_path_factory)) as template:
        template.backup(conn)
    try:
        cur = conn.cursor()
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute("BEGIN IMMEDIATE")
        yield cur
        cur.execute("ROLLBACK")
    finally:
        conn.close()


def _stored_time(time: Any) -> Any:
    """A time as an INTEGER column returns it (integral floats become integers)."""
    return int(time) if type(time) is float and time.is_integer() else time


@given(sessions(), st.booleans(), st.sampled_from([3, 4096]))
def test_projected_rows_read_back_as_one_row_per_event(tmp_path_factory: Any, session: Any, synthetic: bool, flush_events: int) -> None:
    events, cuts = session
    with _index(tmp_path_factory) as cur:
        projector = SessionProjector(cur, 1, 0, synthetic=synthetic, flush_events=flush_events)
        for start, end in zip([0, *cuts], [*cuts, len(events)]):
            projector.add(events[start:end])
        projector.finish()
        assert projector.written == len(events)
        reader = SqliteIndexReader(cur)
        surface = {seq: 1 if event["type"] == "user/message" else 0 for seq, event in enumerate(events)}
        expected = [(e["seq"], e["type"], _stored_time(e["time"]), surface[e["seq"]]) for e in events]
        assert reader.event_records(1) == expected
        for first in range(0, len(events), 7):
            last = min(len(events) - 1, first + 9)
            assert reader.event_range_records(1, first, last) == [(seq, surface[seq], None, []) for seq in range(first, last + 1)]
        for event in events:
            seq = event["seq"]
            sources = event.get("sourceEventSeqs")
            packed = msgspec.msgpack.encode(sources) if sources is not None else None
            assert reader.event_row(1, seq) == EventRow(seq, event["type"], _stored_time(event["time"]), surface[seq], None, packed, None)
            derived = sorted({e["seq"] for e in events if seq in e.get("sourceEventSeqs", ())})
            assert reader.derived_seqs(1, seq) == derived
        assert reader.event_row(1, len(events)) is None
        assert reader.raw_all(1) == events
        titles = [e["seq"] for e in events if e["type"] == "session/title"]
        assert projector.title_seq == (titles[-1] if titles else None)


@given(st.lists(st.integers(0, 3000), min_size=1, max_size=700), st.lists(st.integers(1, 300), max_size=30))
def test_block_boundaries_equal_appending_line_by_line(tmp_path_factory: Any, sizes: list[int], batch_sizes: list[int]) -> None:
    events = [{"type": "x-ext/pad", "seq": seq, "time": 0, "data": "p" * size} for seq, size in enumerate(sizes)]
    lines = [encode_event(event) for event in events]
    expected: list[tuple[int, int]] = []  # (first seq, count) of each block, closed line by line
    first = size = 0
    for index, line in enumerate(lines):
        size += len(line)
        if index + 1 - first >= BLOCK_EVENTS or size >= BLOCK_BYTES:
            expected.append((first, index + 1 - first))
            first, size = index + 1, 0
    if first < len(lines):
        expected.append((first, len(lines) - first))
    with _index(tmp_path_factory) as cur:
        projector = SessionProjector(cur, 1, 0)
        start = 0
        for batch in [*batch_sizes, len(events)]:
            projector.add(events[start : start + batch])
            start += batch
            if start >= len(events):
                break
        projector.finish()
        blocks = cur.execute('SELECT "first_seq", "count", "data" FROM "event_blocks" ORDER BY "first_seq"').fetchall()
    assert [(row[0], row[1]) for row in blocks] == expected
    assert [line for row in blocks for line in decompress_block(row[2])] == lines


@st.composite
def sessions_with_rows(draw: Any) -> tuple[list[Any], list[Any], list[tuple[int, int]]]:
    """One session as a pipeline with ``packed_rows`` hands it over (packed chunk rows as
    :class:`PackedRow` items), the same events with every row expanded, and batch cuts
    (item and event offsets alike)."""
    packed: list[Any] = []
    expanded: list[Any] = []
    cuts: list[tuple[int, int]] = []
    seq = 0
    for _ in range(draw(st.integers(1, 14))):
        if packed and draw(st.integers(0, 3)) == 0:
            cuts.append((len(packed), len(expanded)))
        if draw(st.booleans()):
            tag = draw(st.sampled_from(["text-chunks", "reasoning-chunks", "tool-call-chunks"]))
            fragments = draw(st.lists(texts, min_size=1, max_size=5))
            data: dict[str, Any] = {"turn": draw(st.sampled_from([1, 2.5])), "step": 1, "index": draw(st.sampled_from([0, 3]))}
            if tag == "tool-call-chunks":
                data.update({"id": "c1", "dt": [], "args": fragments})
                if draw(st.booleans()):
                    data["name"] = "bash"
            else:
                data.update({"dt": [], "texts": fragments})
            data["dt"] = draw(st.lists(st.integers(-5, 10**6), min_size=len(fragments) - 1, max_size=len(fragments) - 1))
            row = {"type": tag, "seq0": seq, "time0": draw(st.integers(0, 10**13)), "data": data}
            first, times = check_row(row)
            packed.append(PackedRow(row, first, times))
            members = expand_row(row)
            expanded += members
            seq += len(members)
        else:
            etype = draw(st.sampled_from(_TYPES))
            time: Any = draw(st.integers(0, 10**13) | st.sampled_from([1.5, 2**60]))
            data = {"content": [{"type": "text", "text": draw(texts)}]} if etype == "user/message" else {"n": seq}
            event: dict[str, Any] = {"type": etype, "seq": seq, "time": time, "data": data}
            packed.append(event)
            expanded.append(event)
            seq += 1
    return packed, expanded, cuts


def _project(items: list[Any], cuts: list[int], synthetic: bool, flush_events: int) -> tuple[list[Any], int]:
    cursor = RecordingCursor()
    projector = SessionProjector(cursor, 1, 0, synthetic=synthetic, flush_events=flush_events, surface_keys={})
    for start, end in zip([0, *cuts], [*cuts, len(items)]):
        projector.add(items[start:end])
    projector.finish()
    return cursor.calls, projector.written


@given(sessions_with_rows(), st.booleans(), st.sampled_from([3, 4096]))
def test_projecting_packed_rows_equals_projecting_their_members(session: Any, synthetic: bool, flush_events: int) -> None:
    packed, expanded, cuts = session
    fast = _project(packed, [item for item, _ in cuts], synthetic, flush_events)
    slow = _project(expanded, [event for _, event in cuts], synthetic, flush_events)
    assert fast == slow
