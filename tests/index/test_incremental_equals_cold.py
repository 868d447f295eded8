"""Property: whatever happens to a root between reconciles, the incremental index
equals a cold rebuild of the final root, row for row.

Operations are drawn at random: whole batches appended (as new frames), torn
frames written and later completed by the same writer, new sessions, deleted
sessions, files replaced by different content, and reconciles in between, with
tails either held (still changing) or settled.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from indexer.writer import LogWriter, batch_bytes
from readmodel.store.database import open_writer
from tests.indexstate import fts_consistent, index_state
from tests.logfactory import assistant, chunk, ev, header, step_end, step_start, tool_call, tool_result, turn_end, turn_start, user


def session_events(variant: int) -> list[dict[str, Any]]:
    """A session with tool calls, a compaction replacement, a prune and an open final turn."""
    events: list[dict[str, Any]] = []

    def add(event: dict[str, Any]) -> int:
        event = dict(event, seq=len(events))
        events.append(event)
        return event["seq"]

    for turn in range(1, 3 + variant % 2):
        add(turn_start(0, turn))
        first_user = add(user(0, f"turn {turn} asks about reconcile variant {variant}", msg_id=f"u-{turn}"))
        add(step_start(0, turn))
        chunks = [add(chunk(0, f"part {i} ")) for i in range(3)]
        add(assistant(0, "", calls=[(f"c{turn}", "grep", '{"q":"needle"}')], turn=turn, sources=chunks) | {"data": {"turn": turn, "step": 1, "message": {"id": f"a-{turn}", "role": "assistant", "content": [{"type": "tool-call", "id": f"c{turn}", "name": "grep", "arguments": '{"q":"needle"}'}], "source": {"kind": "model", "provider": "p", "model": "m"}}}})
        call = add(tool_call(0, f"c{turn}", turn=turn))
        result = add(tool_result(0, f"c{turn}", f"needle found {variant} times", turn=turn, sources=[call], msg_id=f"r-{turn}"))
        add(step_end(0, turn))
        add(turn_end(0, turn))
        if turn == 2:
            prune = add(ev("compaction/prune", 0, {"shadowedRange": {"start": result, "end": result}, "shadowedSeqs": [result], "shadowedTokenCount": 9}))
            add(tool_result(0, f"c{turn}", "pruned", turn=turn, msg_id=f"r-{turn}", surface_op={"op": "replace", "start": result, "end": result}, sources=[result]))
            del prune
            start = add(ev("compaction/start", 0, {"compactionId": "k", "turn": None}))
            add(user(0, "summary of the work so far", msg_id="ck", surface_op={"op": "replace", "start": first_user, "end": first_user}, sources=[start, first_user]))
    add(turn_start(0, 9))
    add(user(0, "an unfinished request", msg_id="u-open"))
    add(step_start(0, 9))
    add(ev("assistant/message", 0, {"turn": 9, "step": 1, "message": {"id": "a-open", "role": "assistant", "content": [{"type": "tool-call", "id": "open-call", "name": "bash", "arguments": "{}"}], "source": {"kind": "model", "provider": "p", "model": "m"}}}, surfaceOp="append", sourceEventSeqs=[]))
    add(tool_call(0, "open-call", turn=9))
    return events


def batches_of(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = [[]]
    for event in events:
        if event["type"] in ("turn/start", "step/start") and out[-1]:
            out.append([])
        out[-1].append(event)
    return out


class World:
    """A root being written by several harness writers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.next_batch: dict[str, int] = {}
        self.variant: dict[str, int] = {}
        self.torn: dict[str, bytes] = {}

    def _writer(self, sid: str) -> LogWriter:
        return LogWriter.in_root(self.root, header(sid, created_at=len(sid)))

    def append(self, sid: str, torn: int) -> None:
        """Append the next batch; ``torn`` 1 writes half its frame, 2 all but the
        checksum (so a reader recovers the whole batch from the torn frame)."""
        batches = batches_of(session_events(self.variant.setdefault(sid, len(self.variant))))
        writer = self._writer(sid)
        if sid in self.torn:  # the writer completes the frame it was writing
            with open(writer.path, "ab") as fh:
                fh.write(self.torn.pop(sid))
            return
        index = self.next_batch.get(sid, 0)
        if index >= len(batches):
            return
        if index == 0:
            writer.create(header(sid, created_at=len(sid)), batches[0])
            self.next_batch[sid] = 1
            return
        frame = writer.encode(batch_bytes(batches[index]))
        self.next_batch[sid] = index + 1
        if torn:
            cut = len(frame) // 2 if torn == 1 else len(frame) - 4
            with open(writer.path, "ab") as fh:
                fh.write(frame[:cut])
            self.torn[sid] = frame[cut:]
        else:
            with open(writer.path, "ab") as fh:
                fh.write(frame)

    def rollback(self, sid: str) -> None:
        """The writer's failed append is rolled back: the torn bytes are cut off
        and the batch will be written again later."""
        rest = self.torn.pop(sid, None)
        if rest is None:
            return
        path = Path(self._writer(sid).path)
        frame_len = len(self._writer(sid).encode(batch_bytes(batches_of(session_events(self.variant[sid]))[self.next_batch[sid] - 1])))
        with open(path, "r+b") as fh:
            fh.truncate(path.stat().st_size - (frame_len - len(rest)))
        self.next_batch[sid] -= 1

    def delete(self, sid: str) -> None:
        path = Path(self._writer(sid).path)
        if path.exists():
            shutil.rmtree(path.parent)
        self.next_batch.pop(sid, None)
        self.torn.pop(sid, None)

    def replace(self, sid: str) -> None:
        if sid not in self.next_batch:
            return
        self.variant[sid] = self.variant.get(sid, 0) + 7
        self.torn.pop(sid, None)
        batches = batches_of(session_events(self.variant[sid]))
        count = max(1, self.next_batch[sid] - 1)
        writer = self._writer(sid)
        writer.write_session(header(sid, created_at=len(sid)), batches[:count])
        self.next_batch[sid] = count

    def finish_torn(self) -> None:
        for sid in list(self.torn):
            self.append(sid, torn=0)


SESSION_IDS = ["alpha", "beta", "gamma-session"]
operation = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(SESSION_IDS), st.sampled_from([0, 0, 1, 2])),
    st.tuples(st.just("delete"), st.sampled_from(SESSION_IDS), st.just(False)),
    st.tuples(st.just("rollback"), st.sampled_from(SESSION_IDS), st.just(False)),
    st.tuples(st.just("replace"), st.sampled_from(SESSION_IDS), st.just(False)),
    st.tuples(st.just("reconcile"), st.just(""), st.booleans()),
)


@settings(max_examples=25)
@given(ops=st.lists(operation, min_size=1, max_size=30), finish=st.booleans())
def test_incremental_index_equals_cold_rebuild(tmp_path_factory: Any, ops: list[tuple[str, str, Any]], finish: bool) -> None:
    check_incremental_equals_cold(tmp_path_factory, ops, finish, workers=0)


@settings(max_examples=12)
@given(ops=st.lists(operation, min_size=1, max_size=30), finish=st.booleans())
def test_sessions_prepared_by_workers_then_continued_equal_a_cold_rebuild(tmp_path_factory: Any, ops: list[tuple[str, str, Any]], finish: bool) -> None:
    # Every pass hands its new sessions to a worker process; the cold rebuild is the writer's alone.
    check_incremental_equals_cold(tmp_path_factory, ops, finish, workers=1)


def check_incremental_equals_cold(tmp_path_factory: Any, ops: list[tuple[str, str, Any]], finish: bool, workers: int) -> None:
    base = tmp_path_factory.mktemp("world")
    world = World(base / "root")
    (base / "root").mkdir()
    engine = open_writer(str(base / "incremental.db"))
    held = Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=3600, workers=workers, parallel_min_bytes=0)
    settled = Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=0, workers=workers, parallel_min_bytes=0)
    for name, sid, flag in ops:
        if name == "append":
            world.append(sid, torn=flag)
        elif name == "delete":
            world.delete(sid)
        elif name == "rollback":
            world.rollback(sid)
        elif name == "replace":
            world.replace(sid)
        else:
            (settled if flag else held).reconcile()
    if finish:
        world.finish_torn()
    settled.reconcile()
    engine.dispose()
    cold_engine = open_writer(str(base / "cold.db"))
    Reconciler(cold_engine, world.root, Compression.ZSTD, settle_seconds=0, workers=0).reconcile()
    cold_engine.dispose()
    incremental = index_state(str(base / "incremental.db"))
    cold = index_state(str(base / "cold.db"))
    assert incremental == cold
    assert incremental["consistency"] == [], incremental["consistency"]  # grams included: none stale or missing
    assert fts_consistent(str(base / "incremental.db"))
    assert os.path.exists(base / "cold.db")
