"""Benchmark corpora: the shared corpus replicated (with fresh ids) to a chosen size.

Sessions are re-encoded with sessionq's harness-compatible writer, one frame
per batch, batches split at every ``turn/start`` and ``step/start`` as the
harness does.  Parent links are remapped to the replica's own ids so lineage
stays meaningful.  Nothing here is committed; corpora are built on demand.

Usage::

    python -m bench.corpus root OUT_DIR --mb 100
    python -m bench.corpus single OUT_DIR --mb 100
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from indexer.layout import Compression, discover
from indexer.reader import read_log
from indexer.writer import LogWriter

REPO = Path(__file__).resolve().parents[1]
SHARED_ROOT = Path(os.environ.get("SESSIONQ_SHARED", REPO.parent / "shared")) / "corpus" / "zstd-root"


def load_sessions(source: Path = SHARED_ROOT) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every readable session of a source root as ``(header, stored events)``."""
    sessions = []
    for ref in discover(source, Compression.ZSTD).transcripts:
        log = read_log(ref.path)
        sessions.append((log.header, log.events))
    return sessions


def harness_batches(events: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Split events into append batches at every turn/start and step/start."""
    batch: list[dict[str, Any]] = []
    for event in events:
        if event.get("type") in ("turn/start", "step/start") and batch:
            yield batch
            batch = []
        batch.append(event)
    if batch:
        yield batch


def _fresh_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def build_root(out: Path, megabytes: float, seed: int = 7, source: Path = SHARED_ROOT) -> dict[str, Any]:
    """Replicate the source corpus into ``out`` until it holds ``megabytes`` of logs."""
    rng = random.Random(seed)
    sessions = load_sessions(source)
    target = int(megabytes * 1024 * 1024)
    written = replicas = count = events = 0
    while written < target:
        ids = {header["id"]: _fresh_id(rng) for header, _ in sessions}
        for header, log_events in sessions:
            new_header = dict(header, id=ids[header["id"]])
            if "parentSession" in header and header["parentSession"] in ids:
                new_header["parentSession"] = ids[header["parentSession"]]
            writer = LogWriter.in_root(out, new_header)
            writer.write_session(new_header, harness_batches(log_events))
            written += os.path.getsize(writer.path)
            count += 1
            events += len(log_events)
        replicas += 1
    return {"root": str(out), "bytes": written, "sessions": count, "events": events, "replicas": replicas}


def _renumber(events: list[dict[str, Any]], offset: int, turn_offset: int) -> list[dict[str, Any]]:
    out = []
    for event in events:
        copy = dict(event, seq=event["seq"] + offset)
        if "sourceEventSeqs" in copy:
            copy["sourceEventSeqs"] = [s + offset for s in copy["sourceEventSeqs"]]
        op = copy.get("surfaceOp")
        if isinstance(op, dict):
            copy["surfaceOp"] = dict(op, start=op["start"] + offset, end=op["end"] + offset)
        data = copy.get("data")
        if isinstance(data, dict) and isinstance(data.get("turn"), int):
            copy["data"] = dict(data, turn=data["turn"] + turn_offset)
        out.append(copy)
    return out


def build_single(out: Path, megabytes: float, seed: int = 11, source: Path = SHARED_ROOT) -> dict[str, Any]:
    """One long session: balanced sessions of the corpus concatenated with renumbered seqs."""
    rng = random.Random(seed)
    pieces = [events for _, events in load_sessions(source) if _balanced(events)]
    header = {"version": 0, "id": _fresh_id(rng), "createdAt": 1_790_000_000_000, "cwd": "/home/dev/long-running", "delegationDepth": 0}
    writer = LogWriter.in_root(out, header)
    target = int(megabytes * 1024 * 1024)
    seq = turns = 0
    first = True
    while first or os.path.getsize(writer.path) < target:
        piece = pieces[rng.randrange(len(pieces))]
        shifted = _renumber(piece, seq, turns)
        for batch in harness_batches(shifted):
            if first:
                writer.create(header, batch)
                first = False
            else:
                writer.append(batch)
        seq += len(piece)
        turns += sum(1 for e in piece if e.get("type") == "turn/start")
    return {"path": writer.path, "bytes": os.path.getsize(writer.path), "events": seq, "id": header["id"]}


def _balanced(events: list[dict[str, Any]]) -> bool:
    """Sessions safe to concatenate: no replacements (their ranges name old seqs) and turns closed."""
    opened = sum(1 for e in events if e.get("type") == "turn/start")
    closed = sum(1 for e in events if e.get("type") == "turn/end")
    return opened == closed and not any(isinstance(e.get("surfaceOp"), dict) for e in events)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["root", "single"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    build = build_root if args.kind == "root" else build_single
    import json

    print(json.dumps(build(args.out, args.mb, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
