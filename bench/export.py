"""Export benchmark: the session-log ZIP of a large single log.

Uses the long single-session log ``DIR/single-<N>`` and its index (built here
when missing, as in :mod:`bench.window`) and times its export two ways:

* ``cli``: ``sessionq export ID -o FILE`` in a child process (the same
  ``Exporter`` the HTTP endpoint streams); wall and CPU time from the child's
  rusage, its peak RSS (``ru_maxrss`` of that process alone);
* ``http``: ``sessionq serve`` on a free loopback port, the archive streamed by
  ``GET /api/session.export`` (after one untimed ``HEAD``) and discarded by the
  client; wall time, time to the first byte, the server's CPU time during the
  GET (``/proc/PID/stat``) and its peak RSS (``VmHWM``).

The ``cli`` wall time includes the child's interpreter start-up (about a second).

MB/s is the compressed log size over the wall time, ``cpu_s_per_mb`` the CPU
seconds (user + system, all threads) per MB of compressed log, which a busy
machine disturbs far less than the wall time; ``load`` is the 1-minute load
average at the end of the run; ``zip_mb`` is the archive
and ``plaintext_mb`` the uncompressed ``session.jsonl`` inside it.

Usage::

    python -m bench.export --mb 100 [--dir var/bench] [--via cli --via http]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from bench.common import MB, REPO, emit, proc_cpu_s, proc_peak_rss_mb, record, wait_until
from bench.corpus import write_attachment_store
from bench.window import ensure_indexed_single


def _cli(db: Path, info: dict[str, Any], workdir: Path, repo: Path = REPO) -> dict[str, Any]:
    out = workdir / "export.zip"
    attachments = workdir / "attachments"
    argv = [sys.executable, "-m", "indexer.cli", "export", info["id"], "--db", str(db.resolve()), "--root", info["root"], "--attachments", str(attachments), "-o", str(out)]
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    err = child.stderr.read().decode("utf-8", "replace") if child.stderr else ""
    if child.returncode != 0:
        raise RuntimeError(f"sessionq export failed ({child.returncode}): {err.strip()}")
    with zipfile.ZipFile(out) as archive:
        plaintext = sum(entry.file_size for entry in archive.infolist())
    zip_bytes = out.stat().st_size
    out.unlink()
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "zip_mb": round(zip_bytes / MB, 2),
        "plaintext_mb": round(plaintext / MB, 2),
    }


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _http(db: Path, info: dict[str, Any], workdir: Path, repo: Path = REPO) -> dict[str, Any]:
    attachments = workdir / "attachments"
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "indexer.cli", "serve", "--db", str(db.resolve()), "--root", info["root"], "--attachments", str(attachments), "--port", str(port)],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(base + "/api/openapi.json", timeout=2) as response:
                return response.status == 200
        except OSError:
            return server.poll() is not None

    try:
        if not wait_until(ready, 60, 0.1) or server.poll() is not None:
            raise RuntimeError("sessionq serve did not start")
        url = f"{base}/api/session.export?sessionId={urllib.request.quote(info['id'])}&includeDescendants=false"
        # One HEAD first (it prepares the export without streaming it): the timed GET
        # then measures the steady state, not the server's lazy imports.
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as response:
            response.read()
        received = 0
        cpu_before = proc_cpu_s(server.pid)
        started = time.perf_counter()
        first_byte = None
        with urllib.request.urlopen(url, timeout=600) as response:
            if response.status != 200:
                raise RuntimeError(f"export answered {response.status}")
            while chunk := response.read(1 << 20):
                if first_byte is None:
                    first_byte = time.perf_counter() - started
                received += len(chunk)
        wall = time.perf_counter() - started
        cpu_after = proc_cpu_s(server.pid)
        peak = proc_peak_rss_mb(server.pid)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return {
        "wall_s": round(wall, 2),
        "first_byte_ms": round((first_byte or wall) * 1000, 1),
        "cpu_s": round(cpu_after - cpu_before, 2) if cpu_before is not None and cpu_after is not None else None,
        "server_peak_rss_mb": peak,
        "zip_mb": round(received / MB, 2),
    }


def run(directory: Path, megabytes: float, vias: list[str], against: Path | None = None, repeat: int = 1) -> list[dict[str, Any]]:
    info, db = ensure_indexed_single(directory, megabytes)
    codes = [("this", REPO)] + ([("against", against.resolve())] if against is not None else [])
    plan = [(via, code, repo) for _ in range(repeat) for via in vias for code, repo in codes]  # interleaved: both see the same load
    log_mb = info["bytes"] / MB
    results = []
    with tempfile.TemporaryDirectory(prefix="sessionq-export-") as tmp:
        write_attachment_store(Path(tmp) / "attachments")
        for via, code, repo in plan:
            measured = (_cli if via == "cli" else _http)(db, info, Path(tmp), repo)
            results.append(
                record(
                    "export",
                    **({"code": code} if against is not None else {}),
                    via=via,
                    target_mb=megabytes,
                    log_mb=round(log_mb, 1),
                    log_events=info["events"],
                    mb_per_s=round(log_mb / measured["wall_s"], 2) if measured["wall_s"] else None,
                    cpu_s_per_mb=round(measured["cpu_s"] / log_mb, 4) if measured.get("cpu_s") is not None else None,
                    load=round(os.getloadavg()[0], 2),
                    **measured,
                )
            )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Export of a large single log")
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--dir", type=Path, default=REPO / "var" / "bench")
    parser.add_argument("--via", choices=["cli", "http"], action="append", default=None, help="repeatable; default both")
    parser.add_argument("--against", type=Path, default=None, help="another checkout (e.g. `git archive main` unpacked) measured in the same run, interleaved")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    for result in run(args.dir, args.mb, args.via or ["cli", "http"], args.against, args.repeat):
        emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
