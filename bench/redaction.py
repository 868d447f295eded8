"""Cold-build cost of secret redaction: the same roots built with ``--redact off`` and the default.

Builds alternate between the two policies (off, index, off, index, …) so a
change of machine load falls on both alike; each build is a child process of
its own (``bench.build --in-process``) with ``SESSIONQ_REDACT`` set.  Reported
per root: events per CPU second (writer plus workers: the least noisy figure on
a shared machine) and per wall second, the median of each policy, the ratio
index/off of the medians, and the load average before and after.  Then one
more build in this process (the writer alone) with the indexer's redaction
call timed: ``redact_share`` is its CPU time over the build's, the cost
without the noise of comparing two builds.

Usage::

    python -m bench.redaction ROOT [ROOT ...] [--repeat 3] [--workers 0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import REPO, emit, note, record


def _build(root: Path, db: str, policy: str, workers: int | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.build", str(root), "--db", db, "--in-process"]
    if workers is not None:
        command += ["--workers", str(workers)]
    env = {**os.environ, "SESSIONQ_REDACT": policy}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def redact_share(root: Path) -> dict[str, Any]:
    """One in-process build (writer alone, default policy) timing every document's redaction."""
    import time

    import indexer.projection as projection
    from bench.build import build_in_process

    spent = [0.0]
    original = projection.redact

    def timed(text: str) -> str:
        started = time.process_time()
        try:
            return original(text)
        finally:
            spent[0] += time.process_time() - started

    os.environ["SESSIONQ_REDACT"] = "index"
    projection.redact = timed  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            result = build_in_process(root, os.path.join(tmp, "share.db"), 0)
    finally:
        projection.redact = original  # type: ignore[assignment]
    return {"redact_cpu_s": round(spent[0], 3), "build_cpu_s": result["cpu_s"], "redact_share": round(spent[0] / result["cpu_s"], 3)}


def compare(root: Path, repeat: int, workers: int | None) -> dict[str, Any]:
    """``repeat`` alternating builds of ``root`` under each policy; medians and their ratio."""
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "index": []}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for attempt in range(repeat):
            for policy in ("off", "index") if attempt % 2 == 0 else ("index", "off"):
                result = _build(root, os.path.join(tmp, f"{policy}.db"), policy, workers)
                note("build", root=str(root), policy=policy, events_per_cpu_s=result["events_per_cpu_s"], events_per_s=result["events_per_s"])
                runs[policy].append(result)
    load_after = os.getloadavg()

    def median(policy: str, field: str) -> float:
        return statistics.median(run[field] for run in runs[policy])

    return record(
        "redaction-cost",
        root=str(root),
        events=runs["off"][0]["events"],
        workers=runs["off"][0]["workers"],
        repeat=repeat,
        off_events_per_cpu_s=median("off", "events_per_cpu_s"),
        index_events_per_cpu_s=median("index", "events_per_cpu_s"),
        cpu_ratio=round(median("index", "events_per_cpu_s") / median("off", "events_per_cpu_s"), 3),
        off_events_per_s=median("off", "events_per_s"),
        index_events_per_s=median("index", "events_per_s"),
        wall_ratio=round(median("index", "events_per_s") / median("off", "events_per_s"), 3),
        load_before=[round(value, 2) for value in load_before],
        load_after=[round(value, 2) for value in load_after],
        **redact_share(root),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Cold-build cost of secret redaction (off vs index)")
    parser.add_argument("roots", type=Path, nargs="+")
    parser.add_argument("--repeat", type=int, default=3, help="builds per policy (alternating)")
    parser.add_argument("--workers", type=int, default=None, help="preparation processes (default: the indexer's; 0: the writer alone)")
    args = parser.parse_args(argv)
    for root in args.roots:
        emit(compare(root, args.repeat, args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
