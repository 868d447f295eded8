"""PostgreSQL operations against SQLite, same run (issue 18): append → searchable, and concurrent daemons.

``append``: :mod:`bench.append`'s measurement (a copy of a single-log corpus,
the real ``sessionq index`` daemon, one zstd frame appended at a time, the
time until a within-session search finds its word) with the daemon indexing
into SQLite and then into a database of a throwaway PostgreSQL cluster, the
search a client's (:func:`readmodel.search.postgres.postgres_search`).

``daemons``: the throughput of three indexers of three sources, each with a
third of a root's project directories, writing one PostgreSQL database at
once (cold builds, ``sessionq index --once`` in three processes) against one
indexer of the union root into another database, alternating ``--repeat``
times.  Both end with the same rows (checked: sessions, events, postings); the
indexers' own CPU seconds tell contention from extra work.

The cluster lives under ``--dir`` (default ``var/pg-ops``) and is stopped at
the end; the load average is reported with every result.

Usage::

    python -m bench.pg_ops append [--mb 1] [--appends 100] [--corpora /work/bench]
    python -m bench.pg_ops daemons [--root /work/bench/corpus-10/root] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import REPO, emit, note, record
from readmodel.search.engine import SessionSearch


@contextmanager
def cluster(directory: Path) -> Iterator[Any]:
    """A throwaway PostgreSQL cluster whose data directory is under ``directory`` (fsync off, as the tests')."""
    from tests.postgres import start_cluster

    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o755)  # the cluster's own user (postgres, when run as root) enters it
    held, tempfile.tempdir = tempfile.tempdir, str(directory)
    try:
        server = start_cluster()
    finally:
        tempfile.tempdir = held
    try:
        yield server
    finally:
        server.stop()


def load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


# -- append → searchable -----------------------------------------------------------------------


def _pg_searcher(url: str) -> Callable[[], SessionSearch | None]:
    """A client's search over the PostgreSQL index ``url``, once its schema exists."""
    from readmodel.search.postgres import postgres_search
    from readmodel.store.pgreader import PostgresIndexStore

    def opened() -> SessionSearch | None:
        try:
            store = PostgresIndexStore.open(url)
        except Exception:  # noqa: BLE001 - not created yet
            return None
        return postgres_search(store)

    return opened


def appends(server: Any, megabytes: list[float], count: int, corpora: Path) -> None:
    from bench.append import measure

    with tempfile.TemporaryDirectory(prefix="sessionq-pg-append-") as tmp:
        for size in megabytes:
            results = {}
            for backend in ("sqlite", "postgresql"):
                url = server.database() if backend == "postgresql" else None
                before = load()
                kwargs: dict[str, Any] = {"db": url, "searcher": _pg_searcher, "backend": backend} if url else {}
                result = measure(size, count, corpora, Path(tmp), **kwargs)
                result.update(load_before=before, load_after=load())
                emit(result)
                results[backend] = result
                if url:
                    server.drop(url)
            emit(record(
                "append-latency-ratio",
                target_mb=size,
                p50_ratio=round(results["postgresql"]["p50_ms"] / results["sqlite"]["p50_ms"], 1),
                p95_ratio=round(results["postgresql"]["p95_ms"] / results["sqlite"]["p95_ms"], 1),
            ))


# -- three daemons against one ---------------------------------------------------------------------


def split_root(root: Path, into: Path, parts: int) -> list[Path]:
    """Copies of ``root``'s project directories dealt into ``parts`` roots of about equal bytes."""
    projects = sorted((sum(f.stat().st_size for f in p.rglob("*") if f.is_file()), p.name) for p in root.iterdir() if p.is_dir())
    sizes = [0] * parts
    roots = [into / f"part-{n}" for n in range(parts)]
    for size, name in reversed(projects):
        n = sizes.index(min(sizes))
        sizes[n] += size
        shutil.copytree(root / name, roots[n] / name)
    return roots


def _index(root: Path, url: str, source: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "indexer.cli", "index", "--once", "--root", str(root), "--db", url, "--source", source, "--no-progress"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finish(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        _, err = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"an indexer failed: {err.decode(errors='replace')[-500:]}")


def _totals(url: str) -> tuple[int, int, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            'SELECT (SELECT count(*) FROM "sessions"), (SELECT coalesce(sum("event_count"), 0) FROM "sessions"), (SELECT count(*) FROM "postings")'
        ).fetchone()
        return int(row[0]), int(row[1]), int(row[2])


def _children_cpu() -> float:
    """User + system CPU seconds the finished child processes report: the indexers (their
    preparation workers, children of a fork server, may be missing)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def daemons(server: Any, root: Path, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="sessionq-pg-daemons-") as tmp:
        parts = split_root(root, Path(tmp), 3)
        union_s, three_s = [], []
        for turn in range(repeat):
            for kind in ("one", "three") if turn % 2 == 0 else ("three", "one"):
                url = server.database()
                before = load()
                cpu = _children_cpu()
                started = time.perf_counter()
                if kind == "one":
                    _finish([_index(root, url, "union")])
                else:
                    _finish([_index(part, url, f"host-{n}") for n, part in enumerate(parts)])
                wall = time.perf_counter() - started
                cpu = _children_cpu() - cpu
                totals = _totals(url)
                server.drop(url)
                (union_s if kind == "one" else three_s).append(wall)
                note("cold build", indexers=kind, seconds=round(wall, 1), totals=totals, load=load())
                emit(record(
                    "pg-daemons",
                    indexers=1 if kind == "one" else 3,
                    wall_s=round(wall, 2),
                    writer_cpu_s=round(cpu, 1),
                    sessions=totals[0],
                    events=totals[1],
                    postings=totals[2],
                    events_per_s=round(totals[1] / wall),
                    load_before=before,
                    load_after=load(),
                ))
        emit(record(
            "pg-daemons-ratio",
            root=str(root),
            one_median_s=round(statistics.median(union_s), 2),
            three_median_s=round(statistics.median(three_s), 2),
            speedup=round(statistics.median(union_s) / statistics.median(three_s), 2),
        ))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["append", "daemons"])
    parser.add_argument("--dir", type=Path, default=REPO / "var" / "pg-ops", help="where the throwaway cluster lives")
    parser.add_argument("--mb", type=float, action="append", default=None, help="append: log size (repeatable; default 1)")
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--corpora", type=Path, default=Path("/work/bench"), help="append: where single-<N> corpora are kept")
    parser.add_argument("--root", type=Path, default=Path("/work/bench/corpus-10/root"), help="daemons: the root split in three")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    with cluster(args.dir) as server:
        if args.what == "append":
            appends(server, args.mb or [1.0], args.appends, args.corpora)
        else:
            daemons(server, args.root, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
