"""Decode-throughput benchmark: the physical floor of reading logs.

Reads every transcript of a root through the full reader pipeline (frame scan,
decompression, line scan, upgrades, validation, surface fold) and reports
compressed MB/s and events/s, on one core.

Usage::

    python -m bench.decode ROOT [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from indexer.layout import detect_compression, discover
from indexer.reader import LogReader


def run(root: Path, repeat: int = 3) -> dict[str, object]:
    compression = detect_compression(root)
    refs = discover(root, compression).transcripts
    total_bytes = sum(os.path.getsize(ref.path) for ref in refs)
    best_wall = best_cpu = float("inf")
    events = 0
    for _ in range(repeat):
        counted = 0

        def count(batch: list) -> None:
            nonlocal counted
            counted += len(batch)

        wall0, cpu0 = time.perf_counter(), time.process_time()
        for ref in refs:
            LogReader(ref.path, compression, sink=count).read()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
        events = counted
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "benchmark": "decode",
        "root": str(root),
        "compression": compression.value,
        "sessions": len(refs),
        "events": events,
        "compressed_mb": round(total_bytes / 2**20, 2),
        "wall_s": round(best_wall, 3),
        "cpu_s": round(best_cpu, 3),
        "events_per_s": round(events / best_wall),
        "compressed_mb_per_s": round(total_bytes / 2**20 / best_wall, 2),
        "peak_rss_mb": round(rss_mb, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Decode throughput of the log reader")
    parser.add_argument("root", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.root, args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
