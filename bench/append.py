"""Append-to-searchable latency through the real indexer daemon.

For each log size: copies a long single-session log of that size (built once by
:mod:`bench.corpus` under ``DIR/single-<N>`` and reused) into a scratch root,
starts ``sessionq index`` on it (inotify, default settings), waits for the
initial pass (reported as ``initial_index_s``), then repeatedly appends one
zstd frame holding a user message with a unique word, exactly as the harness
appends, and measures the time until a within-session search from a separate
read-only connection (as any client) finds that word.  Reported: p50, p95,
p99 and max over ``--appends`` appends, and the daemon's peak RSS; with
``--idle S``, the daemon's CPU seconds over S idle seconds after the appends.

Usage::

    python -m bench.append --mb 1 --mb 100 [--appends 200] [--dir var/bench]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

from bench.common import (
    MB,
    REPO,
    emit,
    note,
    record,
    start_daemon,
    stop_daemon,
    summary,
    wait_until,
)
from bench.corpus import ensure_single
from indexer.writer import LogWriter
from readmodel.search.engine import SessionSearch
from readmodel.search.sqlite import sqlite_search


def _indexed(search: SessionSearch, session_id: str) -> bool:
    try:
        return search.search_events({"sessionId": session_id, "query": "zzzbenchprobe"}).session["id"] == session_id
    except Exception:  # noqa: BLE001 - not there yet (no database, no schema, no session)
        search.close()
        return False


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far (``/proc/PID/stat``)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sqlite_searcher(db: str) -> Callable[[], SessionSearch | None]:
    """Search over the SQLite index ``db`` once its file exists (``None`` before)."""
    search = sqlite_search(db)
    return lambda: search if os.path.exists(db) else None


def measure(
    megabytes: float,
    appends: int,
    corpus_dir: Path,
    workdir: Path,
    pause: float = 0.01,
    idle: float = 0.0,
    *,
    db: str | None = None,
    searcher: Callable[[str], Callable[[], SessionSearch | None]] = _sqlite_searcher,
    backend: str = "sqlite",
) -> dict[str, Any]:
    """Append → searchable on a copy of the ``megabytes`` log, through a daemon indexing into ``db``
    (default: a SQLite file in ``workdir``); ``searcher(db)`` gives a function returning the search
    clients use, or ``None`` while the index cannot be opened yet (bench.pg_ops: PostgreSQL)."""
    info = ensure_single(corpus_dir / f"single-{megabytes:g}", megabytes)
    root = workdir / f"root-{megabytes:g}-{backend}"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(info["root"], root)
    db = db or str(workdir / f"index-{megabytes:g}.db")
    header = info["header"]
    started = time.perf_counter()
    daemon = start_daemon(root, db, log=workdir / f"daemon-{megabytes:g}-{backend}.log")
    opened = searcher(db)
    search: SessionSearch | None = None

    def ready() -> bool:
        nonlocal search
        search = search or opened()
        return search is not None and _indexed(search, header["id"])

    try:
        if not wait_until(ready, 3600, 0.05):
            raise RuntimeError("the daemon did not index the log")
        assert search is not None
        initial = time.perf_counter() - started
        note("initial pass done", mb=megabytes, seconds=round(initial, 1))
        writer = LogWriter.in_root(root, header)
        seq = info["events"]
        latencies = []
        for n in range(appends):
            word = f"appendmarker{n}x"
            event = {
                "type": "user/message",
                "seq": seq,
                "time": 1_800_000_000_000 + n,
                "data": {"id": f"bench-{n}", "role": "user", "content": [{"type": "text", "text": f"probe {word}"}], "source": {"kind": "user"}},
                "surfaceOp": "append",
            }
            start = time.perf_counter()
            writer.append([event])
            found = wait_until(lambda word=word: bool(search.search_events({"sessionId": header["id"], "query": word}).items), 30)
            if not found:
                raise RuntimeError(f"append {n} never became searchable")
            latencies.append((time.perf_counter() - start) * 1000)
            seq += 1
            time.sleep(pause)
        idle_cpu = None
        if idle > 0:  # the daemon's CPU while nothing changes (timers, polling)
            time.sleep(1.0)
            before = _cpu_seconds(daemon.pid)
            time.sleep(idle)
            idle_cpu = _cpu_seconds(daemon.pid) - before
    finally:
        if search is not None:
            search.close()
        daemon_info = stop_daemon(daemon)
    return record(
        "append-latency",
        backend=backend,
        target_mb=megabytes,
        log_mb=round(info["bytes"] / MB, 1),
        log_events=info["events"],
        appends=appends,
        initial_index_s=round(initial, 1),
        mean_ms=round(statistics.fmean(latencies), 1),
        **summary(latencies, 1),
        **({"idle_s": idle, "idle_cpu_s": round(idle_cpu, 3)} if idle_cpu is not None else {}),
        **{k: v for k, v in daemon_info.items() if k != "daemon_stderr" or v},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Append-to-searchable latency")
    parser.add_argument("--mb", type=float, action="append", default=None, help="log size (repeatable; default 1 and 100)")
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=REPO / "var" / "bench", help="where the single-log corpora are kept")
    parser.add_argument("--idle", type=float, default=0.0, metavar="S", help="then measure the daemon's CPU over S idle seconds")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sessionq-append-") as tmp:
        for megabytes in args.mb or [1.0, 100.0]:
            emit(measure(megabytes, args.appends, args.dir, Path(tmp), idle=args.idle))
            shutil.rmtree(Path(tmp) / f"root-{megabytes:g}-sqlite", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
