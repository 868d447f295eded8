"""Benchmark corpora: the shared corpus replicated and perturbed to a chosen size.

Sessions are re-encoded with sessionq's harness-compatible writer, one frame
per batch, batches split at every ``turn/start`` and ``step/start`` as the
harness does.  Each replica gets fresh session ids (parent links remapped to the
replica's own ids so lineage stays meaningful) and its own clock: the header's
``createdAt`` and every event time are shifted by a per-replica offset, so
listing order and time filters see distinct sessions rather than ties.  A root
stops as soon as it holds the requested bytes (and, optionally, a minimum
number of sessions), mid-replica if need be, parents always before children.

The source is the shared corpus's real sessions; every replica also takes two
sessions of its synthetic corpus (``synthetic/zstd-root``: CJK, Japanese and
Korean text, legacy shapes, compactions, open tails, large tool outputs) in
rotation, so those features are present but rare.  A single long log
concatenates balanced sessions of the corpus with renumbered
seqs and turns and a monotonic clock.

Nothing here is committed; corpora are built on demand (``ensure_root`` and
``ensure_single`` reuse a corpus already built in a directory: ``DIR/root`` holds
the transcripts, ``DIR/corpus.json`` describes them).

Usage::

    python -m bench.corpus root OUT_ROOT --mb 100 [--min-sessions 10000]
    python -m bench.corpus single OUT_ROOT --mb 100
    python -m bench.corpus ensure-root DIR --mb 100 [--min-sessions 10000]   # DIR/root, reused
    python -m bench.corpus ensure-single DIR --mb 100
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from indexer.layout import Compression, discover
from indexer.reader import read_log
from indexer.writer import LogWriter

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = Path(os.environ.get("SESSIONQ_SHARED", REPO.parent / "shared")) / "corpus"
SHARED_ROOT = SHARED_CORPUS / "zstd-root"
SYNTHETIC_ROOT = SHARED_CORPUS / "synthetic" / "zstd-root"
# Each replica of the real sessions also takes a few synthetic ones (CJK and
# other scripts, legacy shapes, compactions, open tails, large tool outputs),
# in rotation: ~2% of the sessions, enough for those queries to find something.
SYNTHETIC_PER_REPLICA = 2
SYNTHETIC_PIECE_SHARE = 0.05
DAY_MS = 86_400_000
SINGLE_CWD = "/home/dev/long-running"


def load_sessions(source: Path | Sequence[Path] = SHARED_ROOT) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every readable session of the source roots as ``(header, stored events)``."""
    sessions = []
    for root in [source] if isinstance(source, Path) else source:
        if not root.is_dir():
            continue
        for ref in discover(root, Compression.ZSTD).transcripts:
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


def _shift_times(events: list[dict[str, Any]], shift: int) -> list[dict[str, Any]]:
    if not shift:
        return events
    return [dict(e, time=e["time"] + shift) if type(e.get("time")) is int else e for e in events]


def build_root(
    out: Path,
    megabytes: float,
    seed: int = 7,
    source: Path | Sequence[Path] = SHARED_ROOT,
    min_sessions: int = 0,
    synthetic: int = SYNTHETIC_PER_REPLICA,
) -> dict[str, Any]:
    """Replicate the source corpus into ``out`` until it holds ``megabytes`` of logs
    and at least ``min_sessions`` sessions; each replica also takes ``synthetic``
    sessions of the synthetic corpus, in rotation."""
    rng = random.Random(seed)
    base = load_sessions(source)
    extras = load_sessions(SYNTHETIC_ROOT) if synthetic else []
    if not base:
        raise RuntimeError(f"no readable sessions under {source}")
    target = int(megabytes * 1024 * 1024)
    written = replicas = count = events = 0
    while written < target or count < min_sessions:
        chosen = base + [extras[(replicas * synthetic + k) % len(extras)] for k in range(synthetic if extras else 0)]
        # Parents before children, so a root cut mid-replica has no dangling links.
        chosen.sort(key=lambda s: s[0].get("delegationDepth") or 0)
        ids = {header["id"]: _fresh_id(rng) for header, _ in chosen}
        shift = replicas * 7 * DAY_MS + (rng.randrange(DAY_MS) if replicas else 0)
        for header, log_events in chosen:
            new_header = dict(header, id=ids[header["id"]])
            if type(header.get("createdAt")) is int:
                new_header["createdAt"] = header["createdAt"] + shift
            if "parentSession" in header and header["parentSession"] in ids:
                new_header["parentSession"] = ids[header["parentSession"]]
            writer = LogWriter.in_root(out, new_header)
            writer.write_session(new_header, harness_batches(_shift_times(log_events, shift)))
            written += os.path.getsize(writer.path)
            count += 1
            events += len(log_events)
            if written >= target and count >= min_sessions:
                break
        replicas += 1
    return {"kind": "root", "root": str(out), "bytes": written, "sessions": count, "events": events, "replicas": replicas}


def _renumber(events: list[dict[str, Any]], offset: int, turn_offset: int, time_shift: int) -> list[dict[str, Any]]:
    out = []
    for event in events:
        copy = dict(event, seq=event["seq"] + offset)
        if type(copy.get("time")) is int:
            copy["time"] += time_shift
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


def single_header(seed: int = 11) -> dict[str, Any]:
    rng = random.Random(seed)
    return {"version": 0, "id": _fresh_id(rng), "createdAt": 1_790_000_000_000, "cwd": SINGLE_CWD, "delegationDepth": 0}


def build_single(
    out: Path, megabytes: float, seed: int = 11, source: Path | Sequence[Path] = SHARED_ROOT, synthetic: float = SYNTHETIC_PIECE_SHARE
) -> dict[str, Any]:
    """One long session: balanced sessions of the corpus concatenated with renumbered
    seqs and turns, each piece's clock continuing after the previous one's (a
    ``synthetic`` share of the pieces comes from the synthetic corpus)."""
    header = single_header(seed)
    rng = random.Random(seed + 1)
    pieces = [events for _, events in load_sessions(source) if _balanced(events) and _ordinary_clock(events)]
    extras = [events for _, events in load_sessions(SYNTHETIC_ROOT) if _balanced(events) and _ordinary_clock(events)] if synthetic else []
    writer = LogWriter.in_root(out, header)
    target = int(megabytes * 1024 * 1024)
    seq = turns = 0
    clock = header["createdAt"]
    first = True
    while first or os.path.getsize(writer.path) < target:
        pool = extras if extras and rng.random() < synthetic else pieces
        piece = pool[rng.randrange(len(pool))]
        times = [e["time"] for e in piece if type(e.get("time")) is int]
        shift = clock - min(times) + 1000 if times else 0
        shifted = _renumber(piece, seq, turns, shift)
        for batch in harness_batches(shifted):
            if first:
                writer.create(header, batch)
                first = False
            else:
                writer.append(batch)
        seq += len(piece)
        turns += sum(1 for e in piece if e.get("type") == "turn/start")
        if times:
            clock = max(times) + shift
    return {
        "kind": "single",
        "root": str(out),
        "path": writer.path,
        "bytes": os.path.getsize(writer.path),
        "events": seq,
        "id": header["id"],
        "header": header,
    }


def _ordinary_clock(events: list[dict[str, Any]]) -> bool:
    """Integer times spanning under a year: a piece whose clock can be moved along.

    Some synthetic sessions probe the edges of the time range; chained one
    after another, their shifts would push later times past the safe-integer
    range and make the long log corrupt.
    """
    times = [e.get("time") for e in events]
    if not times or not all(type(t) is int for t in times):
        return False
    return max(times) - min(times) < 365 * DAY_MS


def _balanced(events: list[dict[str, Any]]) -> bool:
    """Sessions safe to concatenate: no replacements (their ranges name old seqs) and turns closed."""
    opened = sum(1 for e in events if e.get("type") == "turn/start")
    closed = sum(1 for e in events if e.get("type") == "turn/end")
    return opened == closed and not any(isinstance(e.get("surfaceOp"), dict) for e in events)


def _attachment_refs(value: Any, out: dict[str, dict[str, Any]]) -> None:
    if isinstance(value, dict):
        ident = value.get("attachmentId")
        if isinstance(ident, str) and ident.startswith("sha256:"):
            out.setdefault(ident, value)
        for item in value.values():
            _attachment_refs(item, out)
    elif isinstance(value, list):
        for item in value:
            _attachment_refs(item, out)


def write_attachment_store(directory: Path, sources: Sequence[Path] = (SHARED_ROOT, SYNTHETIC_ROOT)) -> int:
    """An attachment store (``objects/<2 hex>/<sha256>``) holding a stand-in image of
    the declared size for every attachment the source corpora reference (the
    shared corpus ships the references, not the images); exports of corpora
    built from them then include their media.  Returns the number of images."""
    refs: dict[str, dict[str, Any]] = {}
    for _header, events in load_sessions(sources):
        _attachment_refs(events, refs)
    for ident, ref in refs.items():
        digest = ident.split(":", 1)[1]
        path = Path(directory) / "objects" / digest[:2] / digest
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        size = ref.get("bytes") if type(ref.get("bytes")) is int and 8 <= ref["bytes"] <= 1 << 24 else 4096
        path.write_bytes((b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * (size // 256 + 1))[:size])
    return len(refs)


def _ensure(directory: Path, build: Any, **options: Any) -> dict[str, Any]:
    directory = Path(directory)
    info_path = directory / "corpus.json"
    if info_path.exists():
        info = json.loads(info_path.read_text())
        built = info.get("options", {})
        # A corpus built with a larger session minimum serves a smaller one too.
        if all(built.get(k) == v or (k == "min_sessions" and built.get(k, 0) >= v) for k, v in options.items()):
            return info
    root = directory / "root"
    if root.exists():
        import shutil

        shutil.rmtree(root)
    for suffix in ("", "-wal", "-shm", ".lock"):  # an index of the old corpus is stale
        (directory / f"index.db{suffix}").unlink(missing_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    print(json.dumps({"note": "building corpus", "dir": str(directory), **options}), file=sys.stderr, flush=True)
    info = build(root, **options)
    info["options"] = options
    info_path.write_text(json.dumps(info))
    return info


def ensure_root(directory: Path, megabytes: float, min_sessions: int = 0, seed: int = 7) -> dict[str, Any]:
    """The root corpus under ``directory/root``, built unless already there with these options."""
    return _ensure(directory, build_root, megabytes=megabytes, min_sessions=min_sessions, seed=seed)


def ensure_single(directory: Path, megabytes: float, seed: int = 11) -> dict[str, Any]:
    """The single-log corpus under ``directory/root``, built unless already there."""
    return _ensure(directory, build_single, megabytes=megabytes, seed=seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["root", "single", "ensure-root", "ensure-single"])
    parser.add_argument("out", type=Path, help="root/single: the root to write transcripts into; ensure-*: a corpus directory (DIR/root, DIR/corpus.json), reused when built")
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--min-sessions", type=int, default=0, help="root: keep replicating until this many sessions")
    args = parser.parse_args(argv)
    if args.kind == "ensure-root":
        info = ensure_root(args.out, args.mb, args.min_sessions, 7 if args.seed is None else args.seed)
    elif args.kind == "ensure-single":
        info = ensure_single(args.out, args.mb, 11 if args.seed is None else args.seed)
    elif args.kind == "root":
        info = build_root(args.out, args.mb, 7 if args.seed is None else args.seed, min_sessions=args.min_sessions)
    else:
        info = build_single(args.out, args.mb, 11 if args.seed is None else args.seed)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
