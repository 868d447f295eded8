"""A long new log read by one worker and projected by another builds the index one worker builds.

The split stream (:mod:`indexer.splitstream`) must be invisible in the index:
every table row for row, every failure with its message, every fallback to the
writer.  The end-to-end tests build whole roots three ways (split stream, one
streaming worker, the writer alone); the in-process tests run both stages on
threads of this process and compare their recording with a single worker's,
message for message.
"""

from __future__ import annotations

import logging
import math
import threading
from multiprocessing import Pipe, get_context
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer import projection, reconcile, splitstream, streaming
from indexer.layout import Compression
from indexer.preparation import PrepTask, RecordingCursor, stream_pipe
from indexer.streaming import stream_session
from indexer.projection import SessionProjector
from indexer.packedrows import PackedRow, check_row, expand_row
from indexer.splitstream import Forwarder, _events, _packed_op, _plain_op, project_stage, read_stage
from tests.corpus import RAW_ROOT, SYNTHETIC_ROOT, ZSTD_ROOT, require_corpus
from tests.index.test_parallel_preparation import build, damaged_root, kill_after_first_chunk
from tests.indexstate import connect_ro, index_state
from tests.projection.test_projection_fast_paths import sessions_with_rows
from tests.logfactory import assistant, chunk, header, simple_turn, transcript_path, user, write_log

CORPORA = pytest.mark.parametrize(
    ("root", "compression"),
    [(ZSTD_ROOT, Compression.ZSTD), (SYNTHETIC_ROOT, Compression.ZSTD), (RAW_ROOT, Compression.NONE)],
    ids=["zstd-root", "synthetic", "raw-root"],
)


@pytest.fixture
def every_log_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every log is "long" (streamed), in small chunks and messages: many of each per log;
    the writer indexes a streamed log's texts after every chunk that brings any."""
    monkeypatch.setattr("indexer.reconcile.PREPARE_MAX_BYTES", 0)
    monkeypatch.setattr("indexer.reconcile.STREAM_FTS_CHARS", 0)
    monkeypatch.setattr(streaming, "STREAM_CHUNK_ROWS", 7)
    monkeypatch.setattr(splitstream, "OPS_BYTES", 64)


def three_builds(root: Path, tmp_path: Path, compression: Compression, monkeypatch: pytest.MonkeyPatch, settle: float = 0) -> dict[str, Any]:
    """Index ``root`` split, with one streaming worker, and by the writer alone; the reports."""
    split = build(root, tmp_path / "split.db", compression, workers=2, settle=settle)
    monkeypatch.setenv(splitstream.SPLIT_ENV, "0")
    single = build(root, tmp_path / "single.db", compression, workers=2, settle=settle)
    monkeypatch.delenv(splitstream.SPLIT_ENV)
    alone = build(root, tmp_path / "alone.db", compression, workers=0, settle=settle)
    return {"split": split, "single": single, "alone": alone}


CLOCK_COLUMNS = frozenset({"indexed_at", "observed_at", "first_seen_at", "last_reconcile_at", "last_reconcile_seconds"})


def every_row(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (rowids included; virtual tables through their shadow
    tables), clock times and the index's identity (``index_meta``) left out."""
    conn = connect_ro(str(db))
    try:
        names = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' AND name != 'index_meta' ORDER BY name"
        )]  # fmt: skip
        rows: dict[str, list[tuple[Any, ...]]] = {}
        for name in names:
            columns = ", ".join(f'"{row[1]}"' for row in conn.execute(f'PRAGMA table_info("{name}")') if row[1] not in CLOCK_COLUMNS)
            rowid = "rowid, " if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ? AND sql LIKE '%WITHOUT ROWID%'", (name,)).fetchone() is None else ""
            rows[name] = sorted(conn.execute(f'SELECT {rowid}{columns} FROM "{name}"').fetchall(), key=repr)
        return rows
    finally:
        conn.close()


def assert_same_index(tmp_path: Path) -> None:
    """The split build holds one streaming worker's rows exactly (same boundaries, same
    rowids), and the content of the writer's own build."""
    assert every_row(tmp_path / "split.db") == every_row(tmp_path / "single.db")
    state = index_state(str(tmp_path / "alone.db"))
    assert index_state(str(tmp_path / "split.db")) == state
    assert index_state(str(tmp_path / "single.db")) == state


@CORPORA
@pytest.mark.usefixtures("every_log_streams")
def test_a_split_stream_builds_the_corpus_row_for_row_as_one_worker_and_the_writer_alone(
    tmp_path: Path, root: Path, compression: Compression, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_corpus()
    reports = three_builds(root, tmp_path, compression, monkeypatch)
    split, single, alone = reports["split"], reports["single"], reports["alone"]
    assert split.prepared == single.prepared == split.scanned > 0
    assert {name for name, _, _ in split.stream_stages} == {"read", "project"}  # every log was split
    assert {name for name, _, _ in single.stream_stages} == {"stream"}
    assert (split.events, split.failed, split.held) == (single.events, single.failed, single.held) == (alone.events, alone.failed, alone.held)
    assert_same_index(tmp_path)


@pytest.mark.parametrize("settle", [0, 3600], ids=["settled-tails", "held-tails"])
@pytest.mark.usefixtures("every_log_streams")
def test_bad_logs_torn_tails_and_replacements_split_as_the_writer_writes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settle: float) -> None:
    sessions = damaged_root(tmp_path / "root")
    reports = three_builds(tmp_path / "root", tmp_path, Compression.ZSTD, monkeypatch, settle)
    split = reports["split"]
    assert split.prepared == sessions and split.failed == reports["alone"].failed == 2
    assert split.held == reports["alone"].held == (1 if settle else 0)
    assert_same_index(tmp_path)


@pytest.mark.parametrize("victim", [0, 1], ids=["first-worker", "second-worker"])
@pytest.mark.usefixtures("every_log_streams")
def test_a_split_stream_whose_worker_dies_hands_its_log_back_to_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, victim: int
) -> None:
    damaged_root(tmp_path / "root")
    # After the first chunk, one of the two stages' processes dies mid-stream.
    replayed = kill_after_first_chunk(monkeypatch, lambda pids: [pids[victim]])
    with caplog.at_level(logging.WARNING, logger="sessionq.indexer"):
        report = build(tmp_path / "root", tmp_path / "index.db", Compression.ZSTD, workers=2)
    # The log being streamed goes back to the writer, unless its dead worker had already sent
    # everything (a reading stage ahead of the projecting one): then the next logs do.
    assert replayed and ("ingesting it in the writer" in caplog.text or "no worker to stream it" in caplog.text)
    assert report.reloaded + report.failed == 5
    build(tmp_path / "root", tmp_path / "alone.db", Compression.ZSTD, workers=0)
    assert index_state(str(tmp_path / "index.db")) == index_state(str(tmp_path / "alone.db"))


# -- both stages in this process ------------------------------------------------------


def recorded(run: Any) -> list[Any]:
    """Every message ``run(connection)`` sends to the writer, received as the writer does."""
    receive, send = Pipe(duplex=False)
    messages: list[Any] = []

    def collect() -> None:
        while True:
            try:
                message = receive.recv()
            except EOFError:
                return
            messages.append(message)
            if message[0] != "calls":
                return

    collector = threading.Thread(target=collect)
    collector.start()
    run(send)
    collector.join(timeout=60)
    assert not collector.is_alive()
    return messages


def split_messages(task: PrepTask, root: str, compression: str = "zstd", ops_bytes: int = 64) -> list[Any]:
    def run(connection: Any) -> None:
        source, target = Pipe(duplex=False)
        reading = threading.Thread(target=read_stage, args=(task, compression, root, target, ops_bytes))
        reading.start()
        project_stage(task, root, source, connection, 7, None)
        reading.join(timeout=60)
        assert not reading.is_alive()

    return recorded(run)


def single_messages(task: PrepTask, root: str, compression: str = "zstd") -> list[Any]:
    return recorded(lambda connection: stream_session(task, compression, root, connection, 7, None))


def comparable(messages: list[Any]) -> list[Any]:
    """The messages with the workers' costs (CPU time, memory, which processes) left out."""
    return [message[:3] if message[0] == "done" else message for message in messages]


def task_for(path: Path, session_id: str, settled: bool = True) -> PrepTask:
    return PrepTask(str(path), 11, header(session_id), settled, path.stat().st_size)


def compaction_log(root: Path) -> Path:
    """A long log with a compaction whose replacement shadows nodes flushed long before."""
    events = [user(0, "first question with a key AKIAIOSFODNN7EXAMPLE"), assistant(1, "first answer")]
    events += [chunk(seq, "x") for seq in range(2, 5000)]
    events.append(user(5000, "summary of the above", surface_op={"op": "replace", "start": 0, "end": 1}, sources=[0, 1]))
    events += simple_turn(5001, "after the summary")
    return write_log(root, header("compacted"), [events[:2], events[2:4000], events[4000:]])


@pytest.mark.parametrize("settled", [True, False], ids=["settled", "changing"])
def test_both_stages_send_the_writer_exactly_what_one_worker_sends(tmp_path: Path, settled: bool) -> None:
    path = compaction_log(tmp_path / "root")
    task = task_for(path, "compacted", settled)
    split = split_messages(task, str(tmp_path / "root"))
    assert len(split) > 3 and split[-1][0] == "done"
    assert comparable(split) == comparable(single_messages(task, str(tmp_path / "root")))


def test_a_log_the_reader_refuses_fails_with_the_single_workers_failure(tmp_path: Path) -> None:
    root = tmp_path / "root"
    damaged_root(root)
    for session_id in ("corrupt", "future", "torn"):
        path = transcript_path(root, header(session_id))
        task = task_for(path, session_id)
        split = split_messages(task, str(root))
        assert comparable(split) == comparable(single_messages(task, str(root)))
    assert split[-1][0] == "done"  # the torn log is read, its tail recovered


def test_a_crash_in_the_reading_stage_comes_back_as_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = compaction_log(tmp_path / "root")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(splitstream, "log_reader", broken)
    messages = split_messages(task_for(path, "compacted"), str(tmp_path / "root"))
    assert messages == [("crashed", "StageCrashed: RuntimeError: a bug")]


def test_the_projectors_failure_wins_over_a_later_one_of_the_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The projector fails on the first batch; the reader would fail only at the end of the log.
    path = compaction_log(tmp_path / "root")

    def failing_take(self: SessionProjector, events: Any) -> Any:
        raise ValueError("the projector refuses")

    # Every batch goes through take_events, added whole (add) or by columns (a split stream).
    monkeypatch.setattr(SessionProjector, "take_events", failing_take)
    task = task_for(path, "compacted")
    split = split_messages(task, str(tmp_path / "root"))
    assert split[-1][0] == "failed" and "the projector refuses" in split[-1][1][2]
    assert comparable(split) == comparable(single_messages(task, str(tmp_path / "root")))


# -- what crosses the pipe ------------------------------------------------------------

_TYPES = ["assistant/chunk", "request/header", "step/start", "session/title", "user/message", "assistant/message", "tool/result", "tool/call", "turn/end", "todo/write", "x-unknown/kind"]
def _containers(children: Any) -> Any:
    return st.lists(children, max_size=3) | st.tuples(children, children) | st.dictionaries(st.text(max_size=4), children, max_size=3)


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    _containers,
    max_leaves=8,
)


@st.composite
def batches(draw: Any) -> list[list[dict[str, Any]]]:
    """Consecutive batches of events of many types, times and payloads (valid or not)."""
    seq = draw(st.integers(0, 10))
    out = []
    for _ in range(draw(st.integers(1, 4))):
        batch = []
        for _ in range(draw(st.integers(1, 6))):
            event: dict[str, Any] = {"type": draw(st.sampled_from(_TYPES)), "seq": seq, "time": draw(st.integers(-(2**60), 2**60) | st.floats(allow_nan=False) | st.none())}
            if draw(st.booleans()):
                event["data"] = {"text": draw(st.text(max_size=20)), "extra": draw(_VALUES)}
            if draw(st.integers(0, 5)) == 0:
                event["sourceEventSeqs"] = [max(0, seq - 1)]
            if draw(st.integers(0, 8)) == 0:
                event["time"] = math.inf  # as the standard library reads 1e999
            if draw(st.integers(0, 8)) == 0:
                event["data"] = msgspec.Raw(b'{"system":"s"}')
            batch.append(event)
            seq += 1
        out.append(batch)
    return out


class _Posted:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    def post(self, message: Any) -> None:
        self.messages.append(message)


def _forwarded_calls(outbox: _Posted, flush_events: int, by_columns: bool = True) -> list[Any]:
    """The calls a projector records when fed the ops ``outbox`` received (as the projecting stage
    is; ``by_columns=False``: each op's events built as dicts and added)."""
    cursor = RecordingCursor()
    projector = SessionProjector(cursor, 3, 0, surface_keys={}, flush_events=flush_events)
    for message in outbox.messages:
        for op in message[1]:
            if by_columns:
                splitstream.apply_add(projector, op)
            else:
                projector.add(_events(op), op[3])
    projector.finish()
    return cursor.calls


@given(batches())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_forwarded_batches_project_as_the_reader_s_own_events(events: list[list[dict[str, Any]]]) -> None:
    """The projector's rows from forwarded batches equal its rows from the reader's events."""
    direct = RecordingCursor()
    outbox = _Posted()
    forward = Forwarder(outbox, ops_bytes=1)  # type: ignore[arg-type]
    mine = SessionProjector(direct, 3, 0, surface_keys={}, flush_events=5)
    for batch in events:
        try:
            mine.add([dict(event) for event in batch])
        except (TypeError, ValueError):
            return  # a batch the projector itself refuses: nothing to compare
        forward.add(batch)
    mine.finish()
    assert _forwarded_calls(outbox, flush_events=5) == direct.calls
    assert _forwarded_calls(outbox, flush_events=5, by_columns=False) == direct.calls


@given(sessions_with_rows())
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_batch_with_packed_rows_crosses_as_its_expanded_members_would(session: Any) -> None:
    """The reading stage takes packed chunk rows whole (as the projector does): the op it
    forwards equals the op of the batch with every row expanded, and the projector's rows
    from the forwarded ops equal its rows from the expanded events."""
    packed, expanded, cuts = session
    item_cuts, event_cuts = [item for item, _ in cuts], [event for _, event in cuts]
    packed_batches = [packed[a:b] for a, b in zip([0, *item_cuts], [*item_cuts, len(packed)]) if b > a]
    expanded_batches = [expanded[a:b] for a, b in zip([0, *event_cuts], [*event_cuts, len(expanded)]) if b > a]
    assert len(packed_batches) == len(expanded_batches)
    for items, events in zip(packed_batches, expanded_batches):
        assert repr(_packed_op(items)) == repr(_plain_op(events))  # repr: 1 and 1.0 differ
    outbox = _Posted()
    forward = Forwarder(outbox, ops_bytes=1)  # type: ignore[arg-type]
    direct = RecordingCursor()
    mine = SessionProjector(direct, 3, 0, surface_keys={}, flush_events=4)
    for items, events in zip(packed_batches, expanded_batches):
        mine.add(events)
        forward.add(items)
    mine.finish()
    assert _forwarded_calls(outbox, flush_events=4) == direct.calls


def test_a_packed_batch_whose_seqs_jump_crosses_whole() -> None:
    """Seqs that do not continue (outside the sink's contract) send the expanded events as they are."""
    row = {"type": "text-chunks", "seq0": 5, "time0": 100, "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]}}
    first, times = check_row(row)
    items = [{"type": "user/message", "seq": 1, "time": 1, "data": {"content": []}}, PackedRow(row, first, times)]
    op = _packed_op(items)
    assert op[4] is None and op[7] == [items[0], *expand_row(row)]


@pytest.mark.parametrize("widened", [False, True], ids=["64-KiB-pipe", "stream-pipe"])
def test_frames_carry_each_message_whole_and_end_with_the_pipe(widened: bool) -> None:
    receive, send = stream_pipe(get_context("fork")) if widened else Pipe(duplex=False)
    # Together about 25 MB: several times the reader's buffer and the pipe, in one message.
    lines = [(b'{"seq":%d}\n' % seq) * (1 + seq * 50) for seq in range(300)]
    ops = [(splitstream._ADD, seq, 1, line, ["t"], [1], [], b"") for seq, line in enumerate(lines)]
    messages = [("hello", 7), ("ops", ops[:3]), ("ops", [(splitstream._REPLACE, 5, (1, 2)), *ops[3:]]), ("read", {"torn": None}, (1.5, 9))]

    def write() -> None:
        writer = splitstream.FrameWriter(send)
        for message in messages:
            writer.send(message)
        send.close()

    writing = threading.Thread(target=write)
    writing.start()
    reader = splitstream.FrameReader(receive)
    received = [reader.recv() for _ in messages]
    with pytest.raises(EOFError):
        reader.recv()
    writing.join()
    assert received == messages


@given(batches(), st.data())
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_full_events_lines_taken_from_their_batch_equal_them_encoded_alone(events: list[list[dict[str, Any]]], data: st.DataObject) -> None:
    """``_exact_lines`` answers from the batch's lines what it would from the events' own encoding."""
    from readmodel.store.blocks import encode_events

    batch = [event for part in events for event in part]
    positions = sorted(data.draw(st.sets(st.integers(0, len(batch) - 1), min_size=1)))
    chosen = [batch[at] for at in positions]
    alone = encode_events(chosen)
    try:
        expected: Any = alone if msgspec.json.Decoder().decode_lines(alone) == chosen else chosen
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        expected = chosen
    lines = encode_events(batch)
    assert splitstream.lines_at(lines, positions) == alone
    assert splitstream._full_payload(chosen, lines, positions) == (None if expected is alone else chosen)


@st.composite
def odd_batches(draw: Any) -> list[Any]:
    """One batch of the reader's items, packed rows among them, and now and then what no sink
    hands over (a missing key, seqs that jump, repeat or are not ints, another item type)."""
    packed, expanded, cuts = draw(sessions_with_rows())
    items: list[Any] = list(draw(st.sampled_from([packed, expanded])))
    seq = len(expanded)  # the session's seqs run from 0: the other events continue them
    items += [{**event, "seq": at} for at, event in enumerate((event for part in draw(batches()) for event in part), seq)]
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(items) - 1))
        item = items[at]
        if type(item) is PackedRow:
            oddity = draw(st.sampled_from(["seq", "float", "tuple"]))
            items[at] = {"seq": item.first_seq + 1, "type": "x"} if oddity == "seq" else PackedRow(item.row, float(item.first_seq) if oddity == "float" else item.first_seq, tuple(item.times) if oddity == "tuple" else item.times)  # type: ignore[arg-type]
            continue
        if type(item) is not dict:
            continue  # already made odd (another item type)
        item = dict(item)
        oddity = draw(st.sampled_from(["no seq", "no type", "no time", "bool", "float", "big", "jump", "type", "other"]))
        if oddity in ("no seq", "no type", "no time"):
            item.pop(oddity[3:], None)
        elif oddity == "bool":
            item["seq"] = True
        elif oddity in ("float", "big", "jump"):
            seq = item.get("seq", 0)
            item["seq"] = {"float": float(seq), "big": 2**64 + seq, "jump": seq + 2}[oddity]
        elif oddity == "type":
            item["type"] = draw(st.sampled_from([None, 3, ["tool/result"]]))
        else:
            item = (item,)  # type: ignore[assignment]
        items[at] = item
    return items


@given(odd_batches())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_batch_s_op_in_c_is_the_python_path_s(items: list[Any]) -> None:
    """``_column_op`` (its columns by ``indexer._linescan.batch_columns`` where it takes the batch)
    makes the op ``_column_op_python`` makes, or raises what it raises."""
    if splitstream._batch_columns is None:
        pytest.skip("indexer._linescan is not built")
    try:
        expected: Any = repr(splitstream._column_op_python(items))  # repr: 1, 1.0 and True differ
    except Exception as exc:  # noqa: BLE001 - the C path must fail alike
        with pytest.raises(type(exc)):
            splitstream._column_op(items)
        return
    assert repr(splitstream._column_op(items)) == expected


def test_batch_columns_declines_what_is_not_a_reading_stage_s_batch() -> None:
    from indexer.packedrows import CHUNK_TYPE

    columns = splitstream._batch_columns
    if columns is None:
        pytest.skip("indexer._linescan is not built")
    full = frozenset({"tool/result"})
    event = {"type": "tool/result", "seq": 4, "time": 1}
    assert columns([], PackedRow, CHUNK_TYPE, full) is None
    assert columns((event,), PackedRow, CHUNK_TYPE, full) is None  # not a list
    assert columns([event, {"type": "x", "seq": 6}], PackedRow, CHUNK_TYPE, full) is None  # seqs jump
    assert columns([{"type": "x", "seq": 2**63}], PackedRow, CHUNK_TYPE, full) is None  # past 64 bits
    assert columns([event, {"type": "x", "seq": 5}], PackedRow, CHUNK_TYPE, full) == (4, ["tool/result", "x"], [1, None], [0], [event], False)


@pytest.mark.usefixtures("every_log_streams")
def test_a_streamed_log_s_texts_are_indexed_as_it_streams_into_the_same_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Thirty turns, each after more chunks than the projector holds between its flushes.
    frames, seq = [], 0
    for n in range(30):
        turn = simple_turn(seq, f"turn {n} of a long log, word{n}")
        seq += len(turn)
        frames += [turn, [chunk(at, "x") for at in range(seq, seq + projection.FLUSH_EVENTS)]]
        seq += projection.FLUSH_EVENTS
    write_log(tmp_path / "root", header("long"), frames)
    writes: list[int] = []
    write_search_rows = projection.write_search_rows

    def counted(cur: Any, rows: Any, texts: Any) -> None:
        writes.append(len(texts))
        write_search_rows(cur, rows, texts)

    monkeypatch.setattr(projection, "write_search_rows", counted)
    report = build(tmp_path / "root", tmp_path / "spilled.db", Compression.ZSTD, workers=2)
    assert {name for name, _, _ in report.stream_stages} == {"read", "project"}
    spilled, writes[:] = list(writes), []
    monkeypatch.setattr("indexer.reconcile.STREAM_FTS_CHARS", 10**9)
    build(tmp_path / "root", tmp_path / "held.db", Compression.ZSTD, workers=2)
    # Written piece by piece while the log streamed, instead of all at its commit.
    assert len(writes) == 1 and len(spilled) > 5 and sum(spilled) == sum(writes) >= 30
    assert index_state(str(tmp_path / "spilled.db")) == index_state(str(tmp_path / "held.db"))



@pytest.mark.usefixtures("every_log_streams")
def test_the_writer_replays_a_stream_with_its_collector_off_and_turns_it_back_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    write_log(tmp_path / "root", header("long"), [simple_turn(9 * n, f"turn {n}") for n in range(12)])
    states: list[bool] = []
    replay = reconcile.replay

    def watched(cur: Any, calls: Any, fts: Any) -> None:
        states.append(gc.isenabled())
        replay(cur, calls, fts)

    monkeypatch.setattr(reconcile, "replay", watched)
    report = build(tmp_path / "root", tmp_path / "index.db", Compression.ZSTD, workers=2)
    assert report.prepared == 1 and len(states) > 1 and not any(states)
    assert gc.isenabled()
