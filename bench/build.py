"""Cold-build benchmark: index a whole root from scratch into a fresh database.

Reports events/s and compressed MB/s (wall and CPU), peak RSS of the process,
and the index size relative to the logs.  Run it in a fresh process so the
peak RSS is the build's own.

Usage::

    python -m bench.build ROOT [--db PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from indexer.layout import detect_compression, discover
from indexer.reconcile import Reconciler
from readmodel.database import open_writer


def _size(path: str) -> int:
    return sum(os.path.getsize(path + suffix) for suffix in ("", "-wal") if os.path.exists(path + suffix))


def run(root: Path, db: str) -> dict[str, object]:
    compression = detect_compression(root)
    logs = sum(os.path.getsize(ref.path) for ref in discover(root, compression).transcripts)
    engine = open_writer(db)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    report = Reconciler(engine, root, compression, settle_seconds=0).reconcile()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    engine.dispose()
    return {
        "benchmark": "cold-build",
        "root": str(root),
        "sessions": report.scanned,
        "events": report.events,
        "compressed_mb": round(logs / 2**20, 2),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "events_per_s": round(report.events / wall),
        "events_per_cpu_s": round(report.events / cpu),
        "compressed_mb_per_s": round(logs / 2**20 / wall, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "index_mb": round(_size(db) / 2**20, 2),
        "index_to_logs": round(_size(db) / logs, 2),
        "transactions": report.transactions,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Cold build of an index from a root")
    parser.add_argument("root", type=Path)
    parser.add_argument("--db", help="database path (default: a temporary file)")
    args = parser.parse_args(argv)
    if args.db:
        print(json.dumps(run(args.root, args.db)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run(args.root, os.path.join(tmp, "index.db"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
