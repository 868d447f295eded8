"""Cold-build benchmark: index a whole root from scratch into a fresh database.

For each root it reports events/s and compressed MB/s (per wall second and per
CPU second), wall and CPU time, the peak RSS of the build process (the build
runs in a child process of its own, so the figure is the build's alone), the
index size relative to the logs, and the **floor ratio**: the build's wall time
over the time to only decompress and JSON-decode the same logs
(:func:`bench.decode.floor`, measured in the same run just before the build,
which also leaves the logs in the page cache for both).

What the build's clock (``wall_s``) includes: everything ``sessionq index
--once`` does for a missing index once its modules are imported — starting
the workers, listing the root, training the block dictionary, creating the
schema (from the head's snapshot: :mod:`readmodel.store.headschema`), the pass,
and publishing the file.  It
leaves out the interpreter's start-up and the imports of the indexer and
SQLAlchemy, which the command pays too: ``startup_s`` is that part (the
build process's age when the clock starts; about a third of a second).  The
floor runs in the benchmark's own process with everything imported already,
and its clock covers only the reading.

With ``--stages`` the build instead runs in this process with the main stages
of the pipeline wrapped, and reports the CPU seconds (``time.process_time``)
spent in each, exclusive of the stages nested in it: listing (reading every
header), the reader (decode, validation, fold), projection (Python work per
event), raw-line encoding, block compression and insertion, row inserts,
FTS5 indexing, and the rest of the per-session and per-transaction SQL.  The
wrappers cost a little; compare stages with each other, not with plain runs.

Usage::

    python -m bench.build ROOT [--db PATH]              # one root
    python -m bench.build ROOT --stages [--repeat 3]    # per-stage CPU breakdown (best run)
    python -m bench.build ROOT --repeat 20              # 20 builds, each after its floor, then their summary
    python -m bench.build --dir var/bench --sizes 10 100 [--single-sizes 100]

With ``--repeat N`` (and no ``--stages``) the root is built N times, each
build after its own floor, one line per build, then one ``cold-build-runs``
line (:func:`summarize`): medians and ranges, and how many builds were within
``--ratio-target`` of their floor.  On a small root one run says little: the
10 MB root's ratio spread 2.0–4.1× across 104 builds of the same code on one
day, its floor being 0.15–0.28 s.

``--sizes`` builds (or reuses) replicated roots ``DIR/corpus-<N>`` of N MB and
indexes each into ``DIR/corpus-<N>/index.db`` (kept for the search, listing
and reader benchmarks); ``--single-sizes`` does the same for one long log
``DIR/single-<N>``.  One JSON line per corpus, for the throughput-vs-size plot.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from bench.common import (
    MB,
    REPO,
    db_size,
    emit,
    note,
    peak_rss_mb,
    process_age_s,
    record,
    remove_db,
    run_id,
)


def build_in_process(root: Path, db: str, workers: int | None = None, fresh: bool = True) -> dict[str, Any]:
    """Cold-build ``root`` into ``db`` (removed first) in this process.

    ``cpu_s`` counts the preparation workers too (``writer_cpu_s`` is this
    process alone); ``workers`` is the reconciler's default unless given.
    ``fresh`` builds as ``sessionq index`` builds a missing index (in a file
    of its own, renamed into place: :mod:`indexer.freshbuild`); without it, into
    the final path with the write-ahead log and checkpoints, as the daemon
    writes an existing index.
    """
    from sqlalchemy import event

    from indexer.coldstart import ColdStart
    from indexer.daemon import Checkpointer, disable_autocheckpoint
    from indexer.freshbuild import building
    from indexer.layout import detect_compression, discover
    from indexer.reconcile import Reconciler
    from readmodel.store.database import open_writer
    from readmodel.store.sources import default_source

    remove_db(db)
    compression = detect_compression(root)
    logs = sum(os.path.getsize(ref.path) for ref in discover(root, compression).transcripts)
    startup = process_age_s()  # interpreter start-up and the imports above: before the clock
    if fresh:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        # As `sessionq index --once` builds a missing index (indexer.commands._fresh_build).
        cold_start = ColdStart(root, compression, workers)
        try:
            with building(os.path.abspath(db), root=str(root), compression=compression.value, source=default_source()) as build:
                reconciler = Reconciler(build.engine, root, compression, settle_seconds=0, workers=workers, cold_start=cold_start)
                report = reconciler.reconcile()
                build.complete()
        finally:
            cold_start.close()
        wall, writer_cpu = time.perf_counter() - wall0, time.process_time() - cpu0  # publishing included
    else:
        engine = open_writer(db)
        # As the daemon writes: automatic checkpoints off, passive ones on a thread of their own.
        event.listen(engine, "connect", disable_autocheckpoint)
        engine.dispose()
        checkpointer = Checkpointer(db)
        reconciler = Reconciler(engine, root, compression, settle_seconds=0, workers=workers)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        checkpointer.start()
        report = reconciler.reconcile()
        checkpointer.stop()  # the last checkpoint is part of the build
        wall, writer_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        engine.dispose()
    # Preparation workers are children of the fork server, not of this process:
    # they report their own CPU time.
    cpu = writer_cpu + report.worker_cpu_seconds
    index = db_size(db)
    return record(
        "cold-build",
        root=str(root),
        sessions=report.scanned,
        failed=report.failed,
        events=report.events,
        compressed_mb=round(logs / MB, 2),
        wall_s=round(wall, 2),
        startup_s=startup,
        cpu_s=round(cpu, 2),
        writer_cpu_s=round(writer_cpu, 2),
        workers=reconciler.workers,
        prepared=report.prepared,
        writer_wait_s=round(report.writer_wait_seconds, 2),
        events_per_s=round(report.events / wall) if wall else None,
        events_per_cpu_s=round(report.events / cpu) if cpu else None,
        compressed_mb_per_s=round(logs / MB / wall, 2) if wall else None,
        peak_rss_mb=peak_rss_mb(),
        worker_peak_rss_mb=report.worker_peak_rss_mb,
        stream_stages=report.stream_stages,
        index_mb=round(index / MB, 2),
        index_to_logs=round(index / logs, 2) if logs else None,
        transactions=report.transactions,
        fresh=fresh,
    )


# (owner module, owner attribute or None for a function, name, stage): the wrapped
# pipeline stages.  Nested stages are subtracted from the one calling them.
_STAGES: tuple[tuple[str, str | None, str, str], ...] = (
    ("indexer.reconcile", "Reconciler", "_run", "transactions (commit, FTS5 flush, other)"),
    ("indexer.reconcile", "Reconciler", "_observe", "listing (headers)"),
    ("indexer.reconcile", "Reconciler", "_index_one", "sessions (rows, savepoints)"),
    ("indexer.reader", "LogReader", "read", "reader"),
    ("indexer.projection", "SessionProjector", "add", "projection (python)"),
    ("indexer.projection", None, "encode_events", "raw-line encoding"),
    ("indexer.projection", "SessionProjector", "_insert_block", "blocks (compress, insert)"),
    ("indexer.projection", "SessionProjector", "flush", "row inserts"),
    ("indexer.projection", "DeferredFts", "write", "fts5 indexing"),
)


@contextmanager
def _stage_timers() -> Iterator[dict[str, float]]:
    """Wrap the :data:`_STAGES` for the duration; yields stage -> exclusive CPU seconds."""
    import importlib

    spent: dict[str, float] = {}
    inner: list[float] = []  # CPU seconds of nested stages, per active frame
    restore: list[tuple[Any, str, Any]] = []

    def timed(function: Callable[..., Any], stage: str) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            inner.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                nested = inner.pop()
                total = time.process_time() - start
                spent[stage] = spent.get(stage, 0.0) + total - nested
                if inner:
                    inner[-1] += total

        return wrapper

    for module_name, owner_name, name, stage in _STAGES:
        module = importlib.import_module(module_name)
        owner = getattr(module, owner_name) if owner_name else module
        original = getattr(owner, name)
        restore.append((owner, name, original))
        setattr(owner, name, timed(original, stage))
    try:
        yield spent
    finally:
        for owner, name, original in reversed(restore):
            setattr(owner, name, original)


def stage_breakdown(root: Path, db: str, repeat: int = 1) -> dict[str, Any]:
    """The cold build's CPU seconds per stage (the run with the least CPU of ``repeat``)."""
    best: dict[str, Any] | None = None
    for _ in range(repeat):
        with _stage_timers() as spent:
            # In the writer alone: the timers see only this process.
            result = build_in_process(root, db, workers=0)
        if best is None or result["cpu_s"] < best["cpu_s"]:
            best = dict(result, benchmark="cold-build-stages", stages_cpu_s={k: round(v, 3) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])})
    assert best is not None
    return best


def run(root: Path, db: str, floor: bool = True, floor_repeat: int = 1, workers: int | None = None, fresh: bool = True, **extra: Any) -> dict[str, Any]:
    """The floor in this process, then the build in a child process; one merged record."""
    measured = None
    if floor:
        from bench.decode import floor as decode_floor

        measured = decode_floor(root, floor_repeat)
    child = subprocess.run(
        [sys.executable, "-m", "bench.build", str(root), "--db", str(db), "--in-process", *(["--workers", str(workers)] if workers is not None else []), *([] if fresh else ["--in-place"])],
        cwd=REPO,
        env=dict(os.environ, BENCH_RUN_ID=run_id()),
        stdout=subprocess.PIPE,
        check=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    result.update(extra)
    if measured is not None:
        result["floor_wall_s"] = measured["wall_s"]
        result["floor_cpu_s"] = measured["cpu_s"]
        result["floor_events_per_s"] = measured["events_per_s"]
        result["floor_mb_per_s"] = measured["compressed_mb_per_s"]
        result["floor_ratio"] = round(result["wall_s"] / measured["wall_s"], 2) if measured["wall_s"] else None
        result["floor_cpu_ratio"] = round(result["cpu_s"] / measured["cpu_s"], 2) if measured["cpu_s"] else None
        # The build may hold a few more: synthetic closers of open tails (inspect view).
        result["floor_events"] = measured["events"]
    return result


RATIO_TARGET: Final = 3.0
"""Issue 21's target for a cold build: at most this many times its decode floor."""


def summarize(builds: list[dict[str, Any]], target: float = RATIO_TARGET) -> dict[str, Any]:
    """One ``cold-build-runs`` record over repeated builds of one root (records of :func:`run`).

    Medians and ranges of the wall time, the floor and their ratio (``None``
    where no build measured a floor), and ``within_target``: the builds at or
    under ``target`` times their own floor.
    """
    if not builds:
        raise ValueError("no builds to summarize")

    def measured(key: str) -> list[float]:
        return [build[key] for build in builds if build.get(key) is not None]

    def spread(values: list[float]) -> tuple[float | None, float | None, float | None]:
        return (round(statistics.median(values), 3), min(values), max(values)) if values else (None, None, None)

    ratios = measured("floor_ratio")
    wall, floor, ratio = spread(measured("wall_s")), spread(measured("floor_wall_s")), spread(ratios)
    return record(
        "cold-build-runs",
        root=builds[0].get("root"),
        runs=len(builds),
        wall_s_median=wall[0],
        wall_s_min=wall[1],
        wall_s_max=wall[2],
        floor_wall_s_median=floor[0],
        floor_wall_s_min=floor[1],
        floor_wall_s_max=floor[2],
        floor_ratio_median=ratio[0],
        floor_ratio_min=ratio[1],
        floor_ratio_max=ratio[2],
        ratio_target=target,
        within_target=sum(1 for value in ratios if value <= target) if ratios else None,
    )


def run_sizes(directory: Path, sizes: list[float], singles: list[float], floor: bool, min_sessions: int, workers: int | None = None) -> None:
    from bench.corpus import ensure_root, ensure_single

    for kind, targets in (("root", sizes), ("single", singles)):
        for target in targets:
            label = f"{target:g}"
            corpus_dir = directory / (f"corpus-{label}" if kind == "root" else f"single-{label}")
            if kind == "root":
                info = ensure_root(corpus_dir, target, min_sessions if target >= 100 else 0)
            else:
                info = ensure_single(corpus_dir, target)
            note("cold build", corpus=str(corpus_dir), mb=round(info["bytes"] / MB, 1))
            emit(run(corpus_dir / "root", str(corpus_dir / "index.db"), floor, workers=workers, corpus=kind, target_mb=target))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Cold build of an index from a root")
    parser.add_argument("root", type=Path, nargs="?")
    parser.add_argument("--db", help="database path (default: a temporary file)")
    parser.add_argument("--dir", type=Path, default=REPO / "var" / "bench", help="corpus directory of --sizes/--single-sizes")
    parser.add_argument("--sizes", type=float, nargs="*", default=[], metavar="MB", help="replicated roots to build and index")
    parser.add_argument("--single-sizes", type=float, nargs="*", default=[], metavar="MB", help="single long logs to build and index")
    parser.add_argument("--min-sessions", type=int, default=10_000, help="roots of 100 MB and more hold at least this many sessions")
    parser.add_argument("--no-floor", action="store_true", help="skip the decode-floor measurement")
    parser.add_argument("--floor-repeat", type=int, default=1)
    parser.add_argument("--stages", action="store_true", help="per-stage CPU breakdown of an in-process build")
    parser.add_argument("--repeat", type=int, default=1, help="with --stages: report the cheapest of this many builds; otherwise: this many builds, each after its floor, then their summary")
    parser.add_argument("--ratio-target", type=float, default=RATIO_TARGET, help="with --repeat: count the builds at or under this many times their floor (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=None, help="preparation processes (default: the indexer's, one per core; 0: the writer alone)")
    parser.add_argument("--in-place", action="store_true", help="build at the final path through the write-ahead log, as the daemon writes an existing index (default: as a missing index is built, in a file renamed into place)")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sizes or args.single_sizes:
        run_sizes(args.dir, args.sizes, args.single_sizes, not args.no_floor, args.min_sessions, args.workers)
        return 0
    if args.root is None:
        parser.error("ROOT or --sizes/--single-sizes is required")
    if args.in_process:
        emit(build_in_process(args.root, args.db, args.workers, fresh=not args.in_place))
        return 0
    if args.stages:
        with tempfile.TemporaryDirectory() as tmp:
            emit(stage_breakdown(args.root, args.db or os.path.join(tmp, "index.db"), args.repeat))
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or os.path.join(tmp, "index.db")
        builds = []
        for _ in range(args.repeat):
            builds.append(run(args.root, db, not args.no_floor, args.floor_repeat, args.workers, fresh=not args.in_place))
            emit(builds[-1])
        if args.repeat > 1:
            emit(summarize(builds, args.ratio_target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
