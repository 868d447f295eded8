"""Smoke test of the benchmark suite: ``TINY=1 bench/run.sh`` on a few hundred KB.

Runs every benchmark script once through the suite's own driver (corpora,
results and plots all under ``tmp_path``) and checks that each printed the
JSON it documents, with sane values, and that the plots are real PNGs.  The
figures themselves mean nothing at this size; only the shape is checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHROMIUM = Path("/usr/bin/chromium")  # bench.live drives it; without it the benchmark skips


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("bench")
    env = dict(
        os.environ,
        TINY="1",
        PYTHON=sys.executable,
        BENCH_DIR=str(tmp / "corpora"),
        BENCH_OUT=str(tmp / "results.jsonl"),
        BENCH_PLOTS=str(tmp / "plots"),
        BENCH_RUN_ID="smoke",
    )
    env.pop("FULL", None)
    done = subprocess.run(["bash", str(REPO / "bench" / "run.sh")], check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"bench/run.sh failed ({done.returncode}):\n{done.stderr[-6000:]}"
    results = [json.loads(line) for line in (tmp / "results.jsonl").read_text().splitlines() if line.strip()]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        assert result["run"] == "smoke"
        by_name.setdefault(result["benchmark"], []).append(result)
    return {"results": by_name, "plots": tmp / "plots", "stdout": done.stdout}


def _percentiles_ordered(result: dict[str, Any], prefix: str = "") -> None:
    assert 0 < result[f"{prefix}p50_ms"] <= result[f"{prefix}p95_ms"] <= result[f"{prefix}p99_ms"] <= result[f"{prefix}max_ms"]


@pytest.mark.slow
def test_every_benchmark_reported(suite: dict[str, Any]) -> None:
    assert set(suite["results"]) == {
        "machine", "cold-build", "decode-floor", "decode", "search-latency", "listing",
        "window-read", "export", "append-latency", "concurrent-readers",
        "browse-keystroke", "browse-keystroke-settled", "browse-engine", "browse-startup", "search-modes-latency",
    } | ({"live-latency"} if CHROMIUM.is_file() else set())
    machine = suite["results"]["machine"][0]
    assert machine["cpus"] >= 1 and machine["python"] and machine["sqlite"]


@pytest.mark.slow
def test_cold_build_and_floor(suite: dict[str, Any]) -> None:
    builds = suite["results"]["cold-build"]
    assert sorted((b["corpus"], b["target_mb"]) for b in builds) == [("root", 0.3), ("root", 0.6), ("single", 0.3)]
    for build in builds:
        assert build["events"] > 0 and build["sessions"] > 0 and build["failed"] == 0
        assert 0.2 < build["compressed_mb"] < 1.5
        assert build["events_per_s"] > 0 and build["compressed_mb_per_s"] > 0 and build["events_per_cpu_s"] > 0
        assert build["wall_s"] > 0 and build["cpu_s"] > 0
        assert 20 < build["peak_rss_mb"] < 2000
        assert build["index_to_logs"] > 0
        # The floor is measured over the same logs: the same events, but for the
        # synthetic closers the build adds to open tails.
        assert 0 < build["floor_events"] <= build["events"] <= build["floor_events"] * 1.01
        assert build["floor_wall_s"] > 0 and build["floor_ratio"] > 1
    floor, reader = suite["results"]["decode-floor"][0], suite["results"]["decode"][0]
    assert floor["events"] == reader["events"] > 0
    # Both rates are reported; which is faster on a few hundred KB is timing noise, not a property.
    assert floor["events_per_s"] > 0 and reader["events_per_s"] > 0 and reader["events_per_cpu_s"] > 0


@pytest.mark.slow
def test_search_scopes_and_pages(suite: dict[str, Any]) -> None:
    search = suite["results"]["search-latency"][0]
    assert search["queries"] == 50 and search["events"] > 0
    for scope in ("sessions", "events", "events_long"):
        assert search[f"{scope}_first_n"] == 50
        assert 0 < search[f"{scope}_first_p50_ms"] <= search[f"{scope}_first_p95_ms"]
        assert set(search[f"{scope}_by_kind"]) == {"common", "rare", "phrase", "cjk", "no-hit", "operators"}
        assert search[f"{scope}_by_kind"]["no-hit"]["queries_with_hits"] == 0
    # Common words have a third page in both scopes that have enough events.  A
    # tiny long log chains only a few sessions, so not every common word need occur.
    for scope in ("sessions", "events_long"):
        assert search[f"{scope}_deep_n"] > 0
        assert 0 < search[f"{scope}_deep_p50_ms"] <= search[f"{scope}_deep_p95_ms"]
        assert search[f"{scope}_by_kind"]["common"]["queries_with_hits"] >= 8


@pytest.mark.slow
def test_listing_window_export(suite: dict[str, Any]) -> None:
    listing = suite["results"]["listing"][0]
    assert listing["sessions"] > 0 and 0 < listing["warm"]["median_ms"] <= listing["warm"]["p95_ms"]
    window = suite["results"]["window-read"][0]
    assert window["log_events"] > 0 and window["events_per_window"] == 101
    for prefix in ("", "start_", "middle_", "end_", "random_", "single_event_"):
        _percentiles_ordered(window, prefix)
    exports = {e["via"]: e for e in suite["results"]["export"]}
    assert set(exports) == {"cli", "http"}
    assert exports["cli"]["zip_mb"] == exports["http"]["zip_mb"] > 0
    assert exports["cli"]["plaintext_mb"] > exports["cli"]["zip_mb"]
    assert exports["cli"]["peak_rss_mb"] > 0 and exports["http"]["server_peak_rss_mb"] > 0
    assert all(e["mb_per_s"] > 0 for e in exports.values())


@pytest.mark.slow
def test_append_latency(suite: dict[str, Any]) -> None:
    (append,) = suite["results"]["append-latency"]
    assert append["appends"] == append["n"] == 10
    assert append["log_events"] > 0 and append["initial_index_s"] > 0
    _percentiles_ordered(append)
    assert append["daemon_exit"] == 0


@pytest.mark.slow
def test_live_latency(suite: dict[str, Any]) -> None:
    if not CHROMIUM.is_file():
        pytest.skip("bench.live needs /usr/bin/chromium")
    (live,) = suite["results"]["live-latency"]
    assert live["appends"] == live["n"] == live["indexed_n"] == 5
    assert live["watched_events"] == 50 and live["sessions"] == 6
    _percentiles_ordered(live)
    _percentiles_ordered(live, "indexed_")
    assert 0 <= live["within_1s"] <= 1 and len(live["load_before"]) == 3
    assert live["daemon_exit"] == 0


@pytest.mark.slow
def test_concurrent_readers(suite: dict[str, Any]) -> None:
    (readers,) = suite["results"]["concurrent-readers"]
    assert readers["readers"] == 2 and readers["operations"] > 0
    assert readers["database_locked"] == 0
    assert readers["errors"] == 0, readers["error_kinds"]
    assert readers["writer_batches"] > 0 and readers["generations_during_run"] > 0
    assert readers["index_sessions_at_end"] > readers["index_sessions_at_start"] > 0
    assert readers["catch_up_s"] is not None
    _percentiles_ordered(readers)
    assert set(readers["by_operation"]) >= {"search_sessions", "search_events", "read_event", "list_sessions"}
    assert readers["daemon_exit"] == 0


@pytest.mark.slow
def test_plots_written(suite: dict[str, Any]) -> None:
    names = sorted(p.name for p in suite["plots"].iterdir())
    assert names == ["append-latency.png", "build-throughput.png", "readers-latency.png", "search-latency.png"]
    for name in names:
        data = (suite["plots"] / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000


@pytest.mark.slow
def test_search_modes_reported_per_mode_and_scope(suite: dict[str, Any]) -> None:
    result = suite["results"]["search-modes-latency"][0]
    for mode in ("phrase", "words", "substring"):
        for scope in ("sessions", "sessions_workspace", "events"):
            assert 0 < result[f"{mode}_{scope}_p50_ms"] <= result[f"{mode}_{scope}_p95_ms"]
            assert set(result[f"{mode}_{scope}_by_kind"]) == {"cjk-short", "identifier", "punctuation", "prefix-2", "common", "examples"}
    assert len(result["load_before"]) == 3 and result["refused"]["phrase"] == []
