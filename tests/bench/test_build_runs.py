"""``bench.build ROOT --repeat N``: N builds, each after its own floor, then one summary line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.build import summarize
from tests.corpus import replicated_root

REPO = Path(__file__).resolve().parents[2]


def _build(wall: float, floor: float | None) -> dict[str, Any]:
    return {"benchmark": "cold-build", "root": "/r", "wall_s": wall, "floor_wall_s": floor, "floor_ratio": None if floor is None else round(wall / floor, 2)}


def test_the_summary_holds_medians_ranges_and_the_builds_within_the_target() -> None:
    builds = [_build(0.60, 0.20), _build(0.45, 0.15), _build(0.70, 0.20), _build(0.50, 0.25)]
    summary = summarize(builds, 3.0)
    assert summary["benchmark"] == "cold-build-runs" and summary["root"] == "/r" and summary["runs"] == 4
    assert (summary["wall_s_median"], summary["wall_s_min"], summary["wall_s_max"]) == (0.55, 0.45, 0.70)
    assert (summary["floor_wall_s_median"], summary["floor_wall_s_min"], summary["floor_wall_s_max"]) == (0.20, 0.15, 0.25)
    # Ratios 3.0, 3.0, 3.5, 2.0: "at or under" counts the two at exactly 3.
    assert (summary["floor_ratio_median"], summary["floor_ratio_min"], summary["floor_ratio_max"]) == (3.0, 2.0, 3.5)
    assert summary["ratio_target"] == 3.0 and summary["within_target"] == 3
    assert summarize(builds, 2.5)["within_target"] == 1


def test_builds_without_floors_summarize_their_wall_times_only() -> None:
    summary = summarize([_build(0.4, None), _build(0.6, None), _build(0.5, None)])
    assert (summary["wall_s_median"], summary["wall_s_min"], summary["wall_s_max"]) == (0.5, 0.4, 0.6)
    assert summary["floor_ratio_median"] is None and summary["floor_wall_s_max"] is None and summary["within_target"] is None
    with pytest.raises(ValueError):
        summarize([])


def _bench_build(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench.build", *args], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few hundred KB of the shared corpus, replicated as the benchmarks' roots are."""
    return replicated_root(tmp_path_factory.mktemp("runs"), 0.3)


def test_repeated_builds_print_each_build_then_their_summary(root: Path) -> None:
    done = _bench_build(str(root), "--repeat", "2", "--workers", "0", "--ratio-target", "1000")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert [line["benchmark"] for line in lines] == ["cold-build", "cold-build", "cold-build-runs"]
    builds, summary = lines[:2], lines[2]
    assert all(build["sessions"] > 0 and build["failed"] == 0 and build["floor_ratio"] > 0 for build in builds)
    assert builds[0]["sessions"] == builds[1]["sessions"] and builds[0]["events"] == builds[1]["events"]
    assert summary["runs"] == 2 and summary["root"] == str(root)
    assert summary["wall_s_min"] == min(build["wall_s"] for build in builds)
    assert summary["floor_ratio_max"] == max(build["floor_ratio"] for build in builds)
    assert summary["ratio_target"] == 1000 and summary["within_target"] == 2


def test_a_single_build_prints_no_summary_and_zero_builds_is_refused(root: Path) -> None:
    once = _bench_build(str(root), "--no-floor", "--workers", "0")
    assert once.returncode == 0, once.stderr[-3000:]
    assert [json.loads(line)["benchmark"] for line in once.stdout.splitlines() if line.strip()] == ["cold-build"]
    refused = _bench_build(str(root), "--repeat", "0")
    assert refused.returncode == 2 and "--repeat must be at least 1" in refused.stderr and refused.stdout == ""
