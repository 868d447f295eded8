"""A prepared session's last activity read off its recording equals what the index query finds (indexer.recordedactivity).

The writer stores a prepared session's ``last_activity`` with its row instead
of querying the events it just wrote and updating the row: the value must be
the query's, for every shape of session (runs of plain events, event rows,
extreme times, open tails closed by synthetic
events), and any recording the reader cannot vouch for must send the writer
back to the query.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer.layout import Compression
from indexer.preparation import PrepTask, prepare_chunk, replay
from indexer.projection import DeferredFts
from indexer.recordedactivity import UNKNOWN, recorded_last_activity
from readmodel.store.activity import _ONE, last_event_time
from readmodel.store.database import open_writer
from tests.logfactory import assistant, chunk, header, step_end, step_start, tool_call, tool_result, turn_end, turn_start, user, write_log

_TIMES = st.one_of(
    st.integers(min_value=0, max_value=2_000_000_000_000),
    st.sampled_from([-(2**53 - 1), 2**53 - 1]),  # the extremes a log may hold
)


@st.composite
def _turns(draw: Any) -> list[list[dict[str, Any]]]:
    """Batches of a session: turns of chunks, messages and tool calls at drawn times, the last one perhaps open."""
    seq = count()
    batches: list[list[dict[str, Any]]] = []
    for turn in range(1, draw(st.integers(1, 3)) + 1):
        events = [turn_start(next(seq), turn), user(next(seq), draw(st.sampled_from(["hi", "run the tests", "数据库"])))]
        events.append(step_start(next(seq), turn))
        for _ in range(draw(st.integers(0, 6))):
            kind = draw(st.sampled_from(["chunk", "assistant", "tool"]))
            if kind == "chunk":
                events.append(chunk(next(seq), "x"))
            elif kind == "assistant":
                events.append(assistant(next(seq), "an answer", turn=turn))
            else:
                call = f"c{turn}-{len(events)}"
                events.append(tool_call(next(seq), call, turn=turn))
                events.append(tool_result(next(seq), call, "output", turn=turn))
        events += [step_end(next(seq), turn), turn_end(next(seq), turn)]
        for event in events:
            event["time"] = draw(_TIMES)
        batches.append(events)
    if draw(st.booleans()):
        batches[-1] = batches[-1][: draw(st.integers(1, len(batches[-1])))]  # an open tail
    return batches


@pytest.fixture(scope="module")
def index() -> Iterator[tuple[sqlite3.Cursor, Path]]:
    with tempfile.TemporaryDirectory() as tmp:
        engine = open_writer(str(Path(tmp) / "index.db"))
        with engine.connect() as conn:
            cur = conn.connection.driver_connection.cursor()
            cur.execute("BEGIN IMMEDIATE")
            yield cur, Path(tmp)
            cur.execute("ROLLBACK")
        engine.dispose()


_sids = count(1)


def _stored_last_activity(cur: sqlite3.Cursor, sid: int, calls: list[Any]) -> Any:
    """Replay ``calls`` under a session row and ask the index, as ``store_last_activity`` does."""
    cur.execute(
        'INSERT INTO "sessions" ("sid", "id", "path", "header_json", "id_key", "revision", "size", "event_count", "stored_count", '
        '"tail_state", "status", "generation", "indexed_at") VALUES (?, ?, ?, x\'\', x\'\', \'r\', 0, 0, 0, \'clean\', \'ok\', 0, 0)',
        (sid, f"s{sid}", f"/p/{sid}"),
    )
    replay(cur, calls, DeferredFts())
    return last_event_time(cur.execute(_ONE, (sid,)).fetchone())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=_turns(), settled=st.booleans())
def test_the_last_activity_read_off_a_recording_is_the_one_the_index_query_finds(index: tuple[sqlite3.Cursor, Path], batches: list[list[dict[str, Any]]], settled: bool) -> None:
    cur, tmp = index
    sid = next(_sids)
    root = tmp / f"root-{sid}"
    hdr = header(f"s{sid}")
    path = write_log(root, hdr, batches)
    (prepared,) = prepare_chunk([PrepTask(str(path), sid, hdr, settled, path.stat().st_size)], "zstd", str(root)).sessions
    assert prepared.outcome is not None, prepared.failure
    recorded = recorded_last_activity(prepared.calls)
    assert recorded is not UNKNOWN
    assert recorded == _stored_last_activity(cur, sid, prepared.calls)


def test_a_recording_that_deletes_or_rewrites_event_rows_is_left_to_the_query() -> None:
    insert = ('INSERT INTO "events" ("sid", "seq", "type", "time", "surface", "synthetic") VALUES (?, ?, ?, ?, ?, ?)', [(1, 0, "t", 5, 0, 0)], True)
    assert recorded_last_activity([insert]) == 5
    for other in (
        ('DELETE FROM "events" WHERE "sid" = ? AND "seq" >= ?', (1, 0), False),
        ('UPDATE "event_runs" SET "count" = ?, "types" = ?, "times" = ? WHERE "sid" = ? AND "first_seq" = ?', (1, b"", b"", 1, 0), False),
        ('INSERT OR IGNORE INTO "events" ("sid", "seq", "type", "time", "surface", "synthetic") VALUES (?, ?, ?, ?, ?, ?)', [(1, 1, "t", 6, 0, 0)], True),
        ('INSERT INTO "events" ("sid", "seq", "type", "time", "surface", "synthetic") VALUES (?, ?, ?, 7, ?, ?)', [(1, 1, "t", 0, 0)], True),
    ):
        assert recorded_last_activity([insert, other]) is UNKNOWN


def test_a_recording_without_events_has_no_last_activity() -> None:
    assert recorded_last_activity([]) is None
    assert recorded_last_activity([(None, [], True), ('INSERT INTO "event_blocks" ("sid") VALUES (?)', (1,), False)]) is None
