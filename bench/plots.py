"""Plots of the benchmark results (PNG, matplotlib's Agg backend).

Reads the JSON lines the suite appended to ``var/bench-results.jsonl`` and
writes, for whatever results are present:

* ``append-latency.png``: append-to-searchable p50/p95/p99 against log size;
* ``build-throughput.png``: cold-build events/s (and the decode floor) and peak
  RSS against corpus size, replicated roots and single logs;
* ``search-latency.png``: p50/p95 of first and deep pages per scope;
* ``readers-latency.png``: per-operation p50/p95/p99 of the concurrent readers.

A later line for the same point (same benchmark and size) replaces an earlier
one, so re-running part of the suite updates its points; ``--run ID`` keeps only
one run's lines.

Usage::

    python -m bench.plots [--results var/bench-results.jsonl] [--out docs/bench] [--run ID]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from bench.common import REPO


def load(path: Path, run: str | None = None) -> list[dict[str, Any]]:
    results = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and "benchmark" in value and (run is None or value.get("run") == run):
            results.append(value)
    return results


def latest(results: list[dict[str, Any]], benchmark: str, key: Any) -> list[dict[str, Any]]:
    """The last record of ``benchmark`` for each ``key(record)``."""
    chosen: dict[Any, dict[str, Any]] = {}
    for result in results:
        if result.get("benchmark") == benchmark:
            try:
                chosen[key(result)] = result
            except (KeyError, TypeError):
                continue
    return list(chosen.values())


def _log_x(ax: Any, sizes: list[float]) -> None:
    """A log-scaled size axis with a tick, in plain numbers, at every measured size."""
    ax.set_xscale("log")
    ax.set_xlim(min(sizes) / 2, max(sizes) * 2)
    ax.set_xticks(sorted(set(sizes)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:.3g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda value, _pos: ""))


def _finish(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _subtitle(records: list[dict[str, Any]]) -> str:
    runs = sorted({str(r.get("run")) for r in records if r.get("run")})
    return f"run {runs[-1]}" if len(runs) == 1 else (f"runs {runs[0]} … {runs[-1]}" if runs else "")


def plot_append(results: list[dict[str, Any]], out: Path) -> Path | None:
    points = latest(results, "append-latency", lambda r: round(float(r["log_mb"]), 1))
    points = [p for p in points if "p50_ms" in p]
    if not points:
        return None
    points.sort(key=lambda r: r["log_mb"])
    sizes = [max(float(p["log_mb"]), 0.01) for p in points]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, style in (("p50_ms", "o-"), ("p95_ms", "s-"), ("p99_ms", "^--")):
        ax.plot(sizes, [p.get(key) for p in points], style, label=key.split("_")[0])
    ax.axhline(100, color="grey", linestyle=":", linewidth=1, label="target p95 100 ms")
    _log_x(ax, sizes)
    ax.set_xlabel("log size (compressed MB, log scale)")
    ax.set_ylabel("append → searchable (ms)")
    ax.set_ylim(bottom=0)
    for p, x in zip(points, sizes, strict=True):
        ax.annotate(f"{p['log_events']:,} ev\n{p.get('appends', '?')} appends", (x, p["p99_ms"]), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    ax.set_title(f"Append-to-searchable latency vs log size\n{_subtitle(points)}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return _finish(fig, out / "append-latency.png")


def plot_build(results: list[dict[str, Any]], out: Path) -> Path | None:
    points = latest(results, "cold-build", lambda r: (r.get("corpus", "root"), r.get("target_mb", r["root"])))
    points = [p for p in points if p.get("events_per_s")]
    if not points:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for corpus, marker in (("root", "o"), ("single", "D")):
        series = sorted((p for p in points if p.get("corpus", "root") == corpus), key=lambda p: p["compressed_mb"])
        if not series:
            continue
        label = "replicated root" if corpus == "root" else "single log"
        sizes = [max(float(p["compressed_mb"]), 0.01) for p in series]
        left.plot(sizes, [p["events_per_s"] for p in series], marker + "-", label=f"build, {label}")
        left.plot(sizes, [p.get("events_per_cpu_s") for p in series], marker + ":", alpha=0.6, label=f"build per CPU-s, {label}")
        floors = [p.get("floor_events_per_s") for p in series]
        if any(floors):
            left.plot(sizes, floors, marker + "--", alpha=0.6, label=f"decode floor, {label}")
        for p, x in zip(series, sizes, strict=True):
            if p.get("floor_ratio"):
                left.annotate(f"{p['floor_ratio']}× floor", (x, p["events_per_s"]), textcoords="offset points", xytext=(0, -12), ha="center", fontsize=7)
        right.plot(sizes, [p.get("peak_rss_mb") for p in series], marker + "-", label=f"peak RSS, {label}")
        for p, x in zip(series, sizes, strict=True):
            offset = 6 if corpus == "root" else -14
            right.annotate(f"index {p.get('index_to_logs')}×", (x, p.get("peak_rss_mb") or 0), textcoords="offset points", xytext=(0, offset), ha="center", fontsize=7)
    every = [max(float(p["compressed_mb"]), 0.01) for p in points]
    for ax in (left, right):
        _log_x(ax, every)
        ax.set_xlabel("corpus size (compressed MB, log scale)")
        ax.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=7)
    right.legend(fontsize=7, loc="lower right")
    right.set_ylim(0, max(p.get("peak_rss_mb") or 0 for p in points) * 1.25 + 1)
    left.set_yscale("log")
    left.set_ylabel("events / s (log scale)")
    left.set_title(f"Cold build throughput vs corpus size\n{_subtitle(points)}", fontsize=10)
    right.set_ylabel("peak RSS of the build process (MB)")
    right.set_title("Build memory (labels: index size / log size)", fontsize=10)
    return _finish(fig, out / "build-throughput.png")


def _bars(ax: Any, groups: list[str], series: dict[str, list[float | None]]) -> None:
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        heights = [v if v is not None else 0 for v in values]
        bars = ax.bar(xs, heights, width, label=label)
        for bar, value in zip(bars, values, strict=True):
            if value is not None:
                ax.annotate(f"{value:g}", (bar.get_x() + bar.get_width() / 2, bar.get_height()), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=6)
    ax.set_xticks(range(len(groups)), groups, fontsize=8)


def plot_search(results: list[dict[str, Any]], out: Path) -> Path | None:
    points = latest(results, "search-latency", lambda r: "search")
    if not points or "sessions_first_p50_ms" not in points[0]:
        return None
    r = points[0]
    scopes = [s for s in ("sessions", "sessions_workspace", "events", "events_long") if f"{s}_first_n" in r or f"{s}_first_p50_ms" in r]
    names = {"sessions": "all sessions", "sessions_workspace": "one workspace", "events": "largest session", "events_long": "long log"}
    groups = [f"{names[s]}\n{page} page" for s in scopes for page in ("first", "deep")]
    series = {
        stat: [r.get(f"{s}_{page}_{stat}_ms") for s in scopes for page in ("first", "deep")]
        for stat in ("p50", "p95")
    }
    fig, ax = plt.subplots(figsize=(11, 4.5))
    _bars(ax, groups, series)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylabel("latency (ms, symlog)")
    ax.set_title(f"Search latency, 50 queries × {r.get('repeat')} ({r.get('events', 0):,} events, {r.get('sessions', 0):,} sessions; deep = page {r.get('depth')})\n{_subtitle(points)}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return _finish(fig, out / "search-latency.png")


def plot_readers(results: list[dict[str, Any]], out: Path) -> Path | None:
    points = latest(results, "concurrent-readers", lambda r: "readers")
    if not points or not points[0].get("by_operation"):
        return None
    r = points[0]
    ops = [op for op, stats in r["by_operation"].items() if stats.get("n")]
    series = {stat: [r["by_operation"][op].get(f"{stat}_ms") for op in ops] for stat in ("p50", "p95", "p99")}
    fig, ax = plt.subplots(figsize=(10, 4.5))
    _bars(ax, [op.replace("_", "\n", 1) for op in ops], series)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylabel("latency (ms, symlog)")
    ax.set_title(
        f"{r.get('readers')} reader processes while the daemon indexes ({r.get('operations', 0):,} operations, "
        f"{r.get('errors')} errors, {r.get('database_locked')} 'database is locked')\n{_subtitle(points)}",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return _finish(fig, out / "readers-latency.png")


PLOTS = (plot_append, plot_build, plot_search, plot_readers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PNG plots of the benchmark results")
    parser.add_argument("--results", type=Path, default=REPO / "var" / "bench-results.jsonl")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "bench")
    parser.add_argument("--run", help="only the lines of this run id")
    args = parser.parse_args(argv)
    results = load(args.results, args.run)
    args.out.mkdir(parents=True, exist_ok=True)
    written = [str(path) for plot in PLOTS if (path := plot(results, args.out)) is not None]
    print(json.dumps({"plots": written}))
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
