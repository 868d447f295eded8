"""Append-to-searchable latency through the real indexer daemon.

Builds one long session log of the requested size, starts ``sessionq index``
on its root, then repeatedly appends one frame holding a user message with a
unique word and measures the time until a search (a separate read-only
connection, as any client) finds it.

Usage::

    python -m bench.append --mb 1 --mb 100 [--appends 200]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.corpus import build_single
from indexer.writer import LogWriter
from readmodel.search import SessionSearch

REPO = Path(__file__).resolve().parents[1]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _wait_until(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.002)
    return False


def measure(megabytes: float, appends: int, workdir: Path) -> dict[str, Any]:
    root = workdir / f"root-{megabytes}"
    info = build_single(root, megabytes)
    db = workdir / f"index-{megabytes}.db"
    daemon = subprocess.Popen(
        [sys.executable, "-m", "indexer.cli", "index", "--root", str(root), "--db", str(db), "--log-level", "warning"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        search = SessionSearch(str(db))
        header = {"version": 0, "id": info["id"], "createdAt": 1_790_000_000_000, "cwd": "/home/dev/long-running", "delegationDepth": 0}
        writer = LogWriter.in_root(root, header)
        seq = info["events"]

        if not _wait_until(lambda: db.exists() and _indexed(search, info["id"]), 600):
            raise RuntimeError("the daemon did not index the log")
        latencies = []
        for n in range(appends):
            word = f"appendmarker{n}x"
            event = {"type": "user/message", "seq": seq, "time": 1_790_000_000_000 + n, "data": {"id": f"bench-{n}", "role": "user", "content": [{"type": "text", "text": f"probe {word}"}], "source": {"kind": "user"}}, "surfaceOp": "append"}
            start = time.perf_counter()
            writer.append([event])
            found = _wait_until(lambda: bool(search.search_events({"sessionId": info["id"], "query": word}).items), 10)
            if not found:
                raise RuntimeError(f"append {n} never became searchable")
            latencies.append((time.perf_counter() - start) * 1000)
            seq += 1
            time.sleep(0.01)
        return {
            "benchmark": "append-latency",
            "log_mb": round(info["bytes"] / 2**20, 1),
            "log_events": info["events"],
            "appends": appends,
            "p50_ms": round(statistics.median(latencies), 1),
            "p95_ms": round(_percentile(latencies, 0.95), 1),
            "p99_ms": round(_percentile(latencies, 0.99), 1),
            "max_ms": round(max(latencies), 1),
        }
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)


def _indexed(search: SessionSearch, session_id: str) -> bool:
    try:
        return search.search_events({"sessionId": session_id, "query": "the"}).session["id"] == session_id
    except Exception:
        search.close()
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Append-to-searchable latency")
    parser.add_argument("--mb", type=float, action="append", default=None)
    parser.add_argument("--appends", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for megabytes in args.mb or [1.0, 100.0]:
            print(json.dumps(measure(megabytes, args.appends, Path(tmp))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
