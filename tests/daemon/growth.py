"""A writer process that grows a log root the way a busy harness does.

Run as ``python -m tests.daemon.growth ROOT --seed N --stop-file PATH``.  Until
the stop file exists it keeps acting on a set of sessions, at random:

* appending a batch as one complete frame (turns are split over batches, so a
  session often ends in an *open* turn between batches);
* appending a frame in two writes with a pause between (a *torn* tail for a
  moment);
* compacting: a ``user/message`` replacement that shadows a range of current
  surface nodes (shadowing rows indexed by earlier reconciles);
* creating a new session; rarely deleting one or atomically replacing one
  with a fresh, shorter log (a reload).

Every log it writes is well-formed, so an index of the final root has no
session in error.  The sequence of actions is a function of the seed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from indexer.layout import Compression, expected_transcript_path
from indexer.writer import LogWriter, batch_bytes, header_line

WORDS = (
    "alpha", "omega", "reconcile", "snapshot", "frame", "zstd", "cursor", "lineage", "surface", "compaction",
    "tokenizer", "parser", "deploy", "rollback", "index", "search", "quartz", "ember", "harbor", "lantern",
)


class GrowingSession:
    """One session's writer state: next seq, clock, open turn/step, surface nodes."""

    def __init__(self, root: Path, session_id: str, rng: random.Random, created: int) -> None:
        self.rng = rng
        self.header: dict[str, Any] = {"version": 0, "id": session_id, "createdAt": created, "cwd": f"/work/{rng.choice(['alpha', 'beta', 'gamma'])}", "delegationDepth": 0}
        self.path = expected_transcript_path(root, self.header, Compression.ZSTD)
        self.writer = LogWriter(self.path, Compression.ZSTD)
        self.reset(created)

    def reset(self, created: int) -> None:
        self.seq = 0
        self.clock = created
        self.turn = 0
        self.open_turn = False
        self.nodes: list[int] = []
        self.compactions = 0

    def _event(self, etype: str, data: Any, **envelope: Any) -> dict[str, Any]:
        self.clock += self.rng.randint(1, 400)
        event = {"type": etype, "seq": self.seq, "time": self.clock, "data": data, **envelope}
        self.seq += 1
        return event

    def _text(self, n: int = 6) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def open_batch(self) -> list[dict[str, Any]]:
        """Start a turn: the session now has an open turn until :meth:`close_batch`."""
        self.turn += 1
        self.open_turn = True
        batch = [self._event("turn/start", {"turn": self.turn})]
        user = self._event(
            "user/message",
            {"id": f"{self.header['id']}-u{self.seq}", "role": "user", "content": [{"type": "text", "text": self._text()}], "source": {"kind": "user"}},
            surfaceOp="append",
        )
        self.nodes.append(user["seq"])
        batch.append(user)
        batch.append(self._event("step/start", {"turn": self.turn, "step": 1}))
        return batch

    def close_batch(self) -> list[dict[str, Any]]:
        """Finish the open turn: chunks (packed rows), an answer with a tool call, its result."""
        turn, batch = self.turn, []
        chunk_seqs = []
        for _ in range(self.rng.randint(0, 5)):
            event = self._event("assistant/chunk", {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": self.rng.choice(WORDS) + " "}})
            chunk_seqs.append(event["seq"])
            batch.append(event)
        call_id = f"call-{self.header['id']}-{self.seq}"
        message = {
            "id": f"{self.header['id']}-a{self.seq}",
            "role": "assistant",
            "content": [{"type": "text", "text": self._text()}, {"type": "tool-call", "id": call_id, "name": "bash", "arguments": "{}"}],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        answer = self._event("assistant/message", {"turn": turn, "step": 1, "message": message}, sourceEventSeqs=chunk_seqs, surfaceOp="append")
        self.nodes.append(answer["seq"])
        batch.append(answer)
        call = self._event("tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": "bash", "arguments": "{}"})
        batch.append(call)
        block = {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": self._text(4)}]}
        result_message = {"id": f"{self.header['id']}-r{self.seq}", "role": "user", "content": [block], "source": {"kind": "tool", "callId": call_id}}
        result = self._event("tool/result", {"turn": turn, "step": 1, "message": result_message}, sourceEventSeqs=[call["seq"]], surfaceOp="append")
        self.nodes.append(result["seq"])
        batch.append(result)
        batch.append(self._event("step/end", {"turn": turn, "step": 1}))
        batch.append(self._event("turn/end", {"turn": turn, "reason": {"kind": "completed"}}))
        if self.rng.random() < 0.2:
            batch.append(self._event("session/title", {"title": self._text(3), "messageSeqs": [self.nodes[0]], "source": {"kind": "fallback"}}))
        self.open_turn = False
        return batch

    def compaction_batch(self) -> list[dict[str, Any]]:
        """Replace a range of current surface nodes with one checkpoint message."""
        i = self.rng.randrange(len(self.nodes))
        j = self.rng.randrange(i, len(self.nodes))
        shadowed = self.nodes[i : j + 1]
        self.compactions += 1
        cid = f"cmp-{self.compactions}"
        start = self._event("compaction/start", {"compactionId": cid, "turn": None})
        summary = self._event(
            "compaction/summary",
            {"compactionId": cid, "summary": [{"type": "text", "text": self._text(5)}], "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]}, "shadowedSeqs": shadowed, "shadowedTokenCount": 100, "provider": "p", "model": "m"},
        )
        checkpoint = self._event(
            "user/message",
            {"id": f"{self.header['id']}-c{self.seq}", "role": "user", "content": [{"type": "text", "text": "checkpoint " + self._text(4)}], "source": {"kind": "plugin", "plugin": "compact", "compactionId": cid}},
            sourceEventSeqs=[start["seq"], summary["seq"], *shadowed],
            surfaceOp={"op": "replace", "start": shadowed[0], "end": shadowed[-1]},
        )
        self.nodes[i : j + 1] = [checkpoint["seq"]]
        end = self._event("compaction/end", {"compactionId": cid, "turn": None})
        return [start, summary, checkpoint, end]

    def next_batch(self) -> list[dict[str, Any]]:
        if self.open_turn:
            return self.close_batch()
        if len(self.nodes) >= 2 and self.rng.random() < 0.25:
            return self.compaction_batch()
        return self.open_batch()

    def create(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.writer.create(self.header, self.open_batch())

    def append(self, torn: bool) -> None:
        data = self.writer.encode(batch_bytes(self.next_batch()))
        if not torn:
            with open(self.path, "ab") as fh:
                fh.write(data)
            return
        cut = self.rng.randrange(1, len(data))
        with open(self.path, "ab") as fh:
            fh.write(data[:cut])
        time.sleep(self.rng.uniform(0.0, 0.12))
        with open(self.path, "ab") as fh:
            fh.write(data[cut:])

    def replace_file(self) -> None:
        """Atomically replace the log with a fresh one (same id): the index must reload it."""
        self.reset(self.header["createdAt"])
        batches = [self.open_batch(), self.close_batch()]
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(self.writer.encode(header_line(self.header)))
            for batch in batches:
                fh.write(self.writer.encode(batch_bytes(batch)))
        os.replace(tmp, self.path)


def grow(root: Path, seed: int, stop_file: Path, initial: int = 6, max_seconds: float = 120.0) -> int:
    rng = random.Random(seed)
    sessions: list[GrowingSession] = []
    created = 1_790_000_000_000
    serial = 0

    def spawn() -> None:
        nonlocal serial
        serial += 1
        session = GrowingSession(root, f"grow-{seed}-{serial}", rng, created + serial * 1000)
        session.create()
        sessions.append(session)

    for _ in range(initial):
        spawn()
    actions = 0
    deadline = time.monotonic() + max_seconds
    while not stop_file.exists() and time.monotonic() < deadline:
        roll = rng.random()
        if roll < 0.06 or not sessions:
            spawn()
        elif roll < 0.075 and len(sessions) > 3:
            victim = sessions.pop(rng.randrange(len(sessions)))
            shutil.rmtree(os.path.dirname(victim.path))
        elif roll < 0.09:
            rng.choice(sessions).replace_file()
        else:
            rng.choice(sessions).append(torn=rng.random() < 0.12)
        actions += 1
        time.sleep(rng.uniform(0.0, 0.02))
    return actions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("root", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stop-file", type=Path, required=True)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    args = parser.parse_args(argv)
    actions = grow(args.root, args.seed, args.stop_file, max_seconds=args.max_seconds)
    print(f"actions={actions}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
