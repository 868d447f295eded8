"""Listing benchmark: ``SessionQuery.list_sessions`` over a large index.

Builds (or reuses) an index of at least ``--min-sessions`` sessions (10,000 by
default) — the shared corpus replicated with fresh ids by :mod:`bench.corpus`
into ``DIR/root``, then reconciled into ``DIR/index.db`` (the same layout
``bench.build --sizes`` leaves, so ``--dir var/bench/corpus-100`` reuses its
index) — and times ``list_sessions`` end to end (one read transaction, header decoding,
result structs).  Two figures:

* ``warm``: repeated calls while the index generation is unchanged (the
  decoded listing is reused; each call still returns private copies);
* ``cold``: the first call after a generation change (the listing cache is
  dropped before every call), i.e. the full SQL scan and decode.

Usage::

    python -m bench.listing [--dir DIR] [--mb 100] [--min-sessions 10000] [--repeat 50]

Prints one JSON object; the target is a warm median under 50 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import REPO, emit, record

TARGET_MS = 50.0


def _build(directory: Path, megabytes: float, min_sessions: int) -> Path:
    """The benchmark index, built once: replicate the corpus, then reconcile it."""
    from bench.corpus import ensure_root

    ensure_root(directory, megabytes, min_sessions)
    db = directory / "index.db"
    if not db.exists():
        from bench.build import build_in_process

        print(json.dumps({"note": "indexing", "db": str(db)}), file=sys.stderr)
        build_in_process(directory / "root", str(db))
    return db


def _timings(call: Callable[[], Any], repeat: int, before: Callable[[], None] | None = None) -> list[float]:
    samples = []
    for _ in range(repeat):
        if before is not None:
            before()
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_ms": round(statistics.median(ordered), 2), "p95_ms": round(p95, 2), "min_ms": round(ordered[0], 2)}


def run(db: Path, repeat: int) -> dict[str, Any]:
    from readmodel.query import SessionQuery

    query = SessionQuery.open(str(db))
    try:
        sessions = len(query.list_sessions())  # also warms the connection and page cache
        warm = _timings(query.list_sessions, repeat)
        assert query.store is not None
        listing = query.store._listing
        cold = _timings(query.list_sessions, max(5, repeat // 5), before=lambda: setattr(listing, "entry", None))
    finally:
        query.close()
    report: dict[str, Any] = record("listing", index=str(db), sessions=sessions, repeat=repeat)
    report["warm"] = _summary(warm)
    report["cold"] = _summary(cold)
    report["target_ms"] = TARGET_MS
    report["meets_target"] = report["warm"]["median_ms"] < TARGET_MS
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=REPO / "var" / "bench" / "corpus-100")
    parser.add_argument("--db", type=Path, help="An existing index to measure instead of building one.")
    parser.add_argument("--mb", type=float, default=100.0, help="Size of the replicated root.")
    parser.add_argument("--min-sessions", type=int, default=10_000, help="Sessions the root holds at least.")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args(argv)
    db = args.db
    if db is None:
        args.dir.mkdir(parents=True, exist_ok=True)
        db = _build(args.dir, args.mb, args.min_sessions)
    emit(run(db, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
