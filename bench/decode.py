"""Decode benchmarks: the physical floor of reading logs, and the full reader.

Two measurements over every transcript of a root, on one core:

* ``floor`` (benchmark ``decode-floor``): only decompress the zstd frames and
  decode every JSONL line to Python objects (msgspec), counting events (a
  packed chunk row counts as the events it holds).  Nothing is validated,
  folded or stored: this is the physical minimum any indexer of these logs
  pays, and ``bench.build`` reports its wall time as a multiple of it.
* ``reader`` (benchmark ``decode``): the full reader pipeline (frame scan,
  decompression, line scan, legacy upgrades, validation, surface fold) as the
  indexer runs it (``lazy_payloads``: request-header payloads left raw), without
  the database.

Usage::

    python -m bench.decode ROOT [--repeat 3] [--mode floor|reader|both] [--eager-payloads]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import zstandard

from bench.common import MB, emit, peak_rss_mb, record
from indexer.layout import Compression, detect_compression, discover
from indexer.reader import LogReader

_ROWS = frozenset({b"text-chunks", b"reasoning-chunks", b"tool-call-chunks"})
_CHUNK = 1 << 20


def _transcripts(root: Path) -> tuple[Compression, list[str]]:
    compression = detect_compression(root)
    return compression, [ref.path for ref in discover(root, compression).transcripts]


def floor_events(path: str, compression: Compression) -> int:
    """Decompress and JSON-decode one transcript; the number of events it holds."""
    decode = msgspec.json.decode
    events = 0
    pending = b""
    with open(path, "rb") as fh:
        if compression is Compression.ZSTD:
            stream: Any = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
        else:
            stream = fh
        first = True
        while True:
            chunk = stream.read(_CHUNK)
            if not chunk:
                break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if not line:
                    continue
                value = decode(line)
                if first:  # the header line
                    first = False
                    continue
                events += _count(value)
        if pending.strip():
            events += _count(decode(pending))
    return events


def _count(value: Any) -> int:
    if isinstance(value, dict):
        kind = value.get("type")
        if isinstance(kind, str) and kind.encode() in _ROWS:
            data = value.get("data")
            if isinstance(data, dict) and isinstance(data.get("dt"), list):
                return len(data["dt"]) + 1
    return 1


def floor(root: Path, repeat: int = 1) -> dict[str, Any]:
    """The decode floor over ``root``: best of ``repeat`` passes."""
    compression, paths = _transcripts(root)
    return _best_of(
        "decode-floor", root, paths, repeat, lambda: sum(floor_events(path, compression) for path in paths)
    )


def run(root: Path, repeat: int = 3, lazy_payloads: bool = True) -> dict[str, Any]:
    """The full reader pipeline over ``root``: best of ``repeat`` passes.

    ``lazy_payloads`` as the indexer reads (request-header payloads left raw);
    ``False`` measures the reader as inspect and replay use it.
    """
    compression, paths = _transcripts(root)

    def one_pass() -> int:
        counted = 0

        def count(batch: list) -> None:
            nonlocal counted
            counted += len(batch)

        for path in paths:
            LogReader(path, compression, sink=count, lazy_payloads=lazy_payloads).read()
        return counted

    return _best_of("decode", root, paths, repeat, one_pass, compression=compression.value, lazy_payloads=lazy_payloads)


def _best_of(name: str, root: Path, paths: list[str], repeat: int, one_pass: Callable[[], int], **extra: Any) -> dict[str, Any]:
    """Time ``one_pass`` (which returns its event count) ``repeat`` times; report the best."""
    total_bytes = sum(os.path.getsize(p) for p in paths)
    best_wall = best_cpu = float("inf")
    events = 0
    for _ in range(max(1, repeat)):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        events = one_pass()
        best_wall = min(best_wall, time.perf_counter() - wall0)
        best_cpu = min(best_cpu, time.process_time() - cpu0)
    return record(
        name,
        root=str(root),
        **extra,
        sessions=len(paths),
        events=events,
        compressed_mb=round(total_bytes / MB, 2),
        wall_s=round(best_wall, 3),
        cpu_s=round(best_cpu, 3),
        events_per_s=round(events / best_wall) if best_wall else None,
        # The machine is shared: CPU time is the steadier figure to compare runs by.
        events_per_cpu_s=round(events / best_cpu) if best_cpu else None,
        compressed_mb_per_s=round(total_bytes / MB / best_wall, 2) if best_wall else None,
        peak_rss_mb=peak_rss_mb(),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Decode throughput: the floor and the full reader")
    parser.add_argument("root", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mode", choices=["floor", "reader", "both"], default="both")
    parser.add_argument("--eager-payloads", action="store_true", help="decode request-header payloads (the reader's default; the indexer leaves them raw)")
    args = parser.parse_args(argv)
    if args.mode in ("floor", "both"):
        emit(floor(args.root, args.repeat))
    if args.mode in ("reader", "both"):
        emit(run(args.root, args.repeat, lazy_payloads=not args.eager_payloads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
