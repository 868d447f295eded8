"""Shared helpers of the benchmark scripts: percentiles, result records, the machine.

Every script prints one JSON object per result on stdout (``bench/run.sh``
appends them to ``var/bench-results.jsonl``).  :func:`record` stamps each one
with the run id (``$BENCH_RUN_ID``, set by ``run.sh``; else the time) so
``bench/plots.py`` can tell the latest run from older ones.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MB = 2**20


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1) of a non-empty sample."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of an empty sample")
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(len(ordered), rank) - 1]


def summary(values: list[float], digits: int = 2, prefix: str = "") -> dict[str, Any]:
    """``{n, p50_ms, p95_ms, p99_ms, max_ms}`` of millisecond samples (``prefix`` prepended)."""
    if not values:
        return {f"{prefix}n": 0}
    return {
        f"{prefix}n": len(values),
        f"{prefix}p50_ms": round(statistics.median(values), digits),
        f"{prefix}p95_ms": round(percentile(values, 0.95), digits),
        f"{prefix}p99_ms": round(percentile(values, 0.99), digits),
        f"{prefix}max_ms": round(max(values), digits),
    }


def timed_ms(call: Callable[[], Any]) -> tuple[float, Any]:
    """``(milliseconds, result)`` of one call."""
    start = time.perf_counter()
    result = call()
    return (time.perf_counter() - start) * 1000, result


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.002) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (Linux ``ru_maxrss`` is KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def process_age_s() -> float | None:
    """Seconds since this process started (Linux ``/proc``, 10 ms resolution; ``None`` elsewhere):
    what an interpreter's start-up and imports cost before a benchmark's clock starts."""
    try:
        with open("/proc/self/stat") as fh:
            started_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return round(uptime - started_ticks / os.sysconf("SC_CLK_TCK"), 2)


_RUN_ID = os.environ.get("BENCH_RUN_ID") or time.strftime("%Y%m%dT%H%M%S")


def run_id() -> str:
    """The run this process belongs to (``$BENCH_RUN_ID``, else its start time)."""
    return _RUN_ID


def record(benchmark: str, **fields: Any) -> dict[str, Any]:
    """A result object: the benchmark name and run id first, then ``fields``."""
    return {"benchmark": benchmark, "run": run_id(), **fields}


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result), flush=True)


def note(message: str, **fields: Any) -> None:
    """A progress line on stderr (never mixed into the results on stdout)."""
    print(json.dumps({"note": message, **fields}), file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    import sqlite3

    import zstandard

    return record(
        "machine",
        cpus=os.cpu_count(),
        cpu_model=cpu,
        memory_gib=memory,
        load_avg_1m=round(os.getloadavg()[0], 2),
        platform=platform.platform(),
        python=platform.python_version(),
        sqlite=sqlite3.sqlite_version,
        zstandard=zstandard.__version__,
    )


def dir_size(path: str | os.PathLike[str]) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass
    return total


def db_size(path: str | os.PathLike[str]) -> int:
    """The database file plus its WAL (what the index occupies on disk)."""
    path = os.fspath(path)
    return sum(os.path.getsize(path + suffix) for suffix in ("", "-wal") if os.path.exists(path + suffix))


def remove_db(path: str | os.PathLike[str]) -> None:
    path = os.fspath(path)
    for suffix in ("", "-wal", "-shm", ".lock"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)


if __name__ == "__main__":  # ``python -m bench.common``: the machine record
    emit(machine())


def proc_peak_rss_mb(pid: int) -> float | None:
    """Another live process's peak RSS (``VmHWM``) in MiB, or ``None``."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def proc_cpu_s(pid: int) -> float | None:
    """Another live process's CPU time so far (user + system, all threads) in seconds, or ``None``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_daemon(root: str | os.PathLike[str], db: str | os.PathLike[str], *extra: str, log: str | os.PathLike[str] | None = None) -> Any:
    """``sessionq index`` (the real daemon, inotify) on ``root`` in a process of its own;
    its stderr goes to ``log`` (default ``DB.daemon.log``)."""
    import subprocess

    log = open(os.fspath(db) + ".daemon.log" if log is None else log, "wb")  # noqa: SIM115 - closed by stop_daemon
    daemon = subprocess.Popen(
        [sys.executable, "-m", "indexer.cli", "index", "--root", os.fspath(root), "--db", os.fspath(db), "--log-level", "warning", "--no-progress", *extra],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    daemon.bench_log = log  # type: ignore[attr-defined]
    return daemon


def stop_daemon(daemon: Any, timeout: float = 60) -> dict[str, Any]:
    """SIGTERM the daemon; its peak RSS, exit status and any stderr it wrote."""
    import signal
    import subprocess

    peak = proc_peak_rss_mb(daemon.pid)
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
    log = daemon.bench_log
    log.close()
    text = Path(log.name).read_text(encoding="utf-8", errors="replace").strip()
    return {"daemon_peak_rss_mb": peak, "daemon_exit": daemon.returncode, "daemon_stderr": text[-2000:] if text else ""}
