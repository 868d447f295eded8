"""Concurrent readers: N reader processes querying while the daemon indexes a growing root.

Setup: a scratch root seeded with a copy of the replicated corpus
``DIR/corpus-<base>`` (built when missing) and an empty index; ``sessionq
index`` (the real daemon, inotify) starts on it and runs its initial pass.  As
soon as the index holds its first session, ``--readers`` separate processes
start, each with its own ``SessionQuery.open`` (read-only), and a writer in
this process keeps growing the root: ``--writers`` sessions open at a time,
one harness-style append batch (one zstd frame) at a time, ``--rate`` batches
per second in all, new sessions replacing finished ones — so the daemon is
busy with its initial pass first and then with appends, for ``--duration``
seconds.

Each reader loops over a weighted mix of operations, with a random pause
between them (``--think-ms`` on average): cross-session search (first page;
and first page then page 2 by cursor, timed together),
within-session search, ``read_event`` windows, ``list_events`` of a session,
and ``list_sessions``.  Targets come from the reader's own earlier answers.
Reported per operation: count, p50/p95/p99/max latency; and the failures:
``errors`` (any exception other than a stale cursor, by kind) and
``database_locked`` (must be 0).  A stale cursor (the index moved on between
page 1 and page 2) is the documented answer, counted apart.  After the writer
stops, the time the daemon needs to catch up is reported as ``catch_up_s``.

Usage::

    python -m bench.readers [--dir var/bench] [--base-mb 10] [--readers 8] [--duration 60]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    emit,
    record,
    start_daemon,
    stop_daemon,
    summary,
    wait_until,
)

OPERATIONS = {
    "search_sessions": 30,
    "search_sessions_page2": 10,
    "search_events": 20,
    "read_event": 20,
    "list_events": 10,
    "list_sessions": 10,
}
LOCKED = "database is locked"


# ----------------------------------------------------------------------------- reader


def _reader(db: str, seed: int, duration: float, think_ms: float) -> dict[str, Any]:
    from bench.search import QUERIES
    from readmodel.core.errors import SessionQueryError
    from readmodel.query import SessionQuery

    rng = random.Random(seed)
    names = list(OPERATIONS)
    weights = [OPERATIONS[n] for n in names]
    latencies: dict[str, list[float]] = {name: [] for name in names}
    errors: Counter[str] = Counter()
    stale = 0
    sessions: list[str] = []
    targets: list[tuple[str, int]] = []  # (session id, seq) seen in search hits
    query = SessionQuery.open(db)
    query.list_sessions()  # connected and warm: tell the driver, then wait for "go"
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go")
    end_at = time.monotonic() + duration

    def operation(name: str) -> None:
        if name == "list_sessions" or not sessions:
            listed = query.list_sessions()
            sessions[:] = [record.header["id"] for record in listed[:500]]
            if name != "list_sessions":
                return
        elif name == "search_sessions":
            page = query.search_sessions({"query": rng.choice(QUERIES)})
            targets.extend((hit.best_match.session_id, hit.best_match.seq) for hit in page.items[:5])
            del targets[:-200]
        elif name == "search_sessions_page2":
            word = rng.choice(QUERIES[:10])  # common words: they have a second page
            page = query.search_sessions({"query": word})
            if isinstance(page.next_cursor, str):
                query.search_sessions({"query": word, "cursor": page.next_cursor})
        elif name == "search_events":
            query.search_events({"sessionId": rng.choice(sessions), "query": rng.choice(QUERIES)})
        elif name == "read_event":
            if not targets:  # events this reader has seen in search hits: they exist
                page = query.search_sessions({"query": "the"})
                targets.extend((hit.best_match.session_id, hit.best_match.seq) for hit in page.items[:5])
            if targets:
                session_id, seq = rng.choice(targets)
                query.read_event({"sessionId": session_id, "seq": seq, "before": 10, "after": 10})
        elif name == "list_events":
            query.list_events(rng.choice(sessions))

    try:
        while time.monotonic() < end_at:
            name = rng.choices(names, weights)[0]
            started = time.perf_counter()
            try:
                operation(name)
            except SessionQueryError as exc:
                if exc.code == "SESSION_QUERY_STALE_CURSOR":
                    stale += 1
                else:
                    errors[f"{name}: {exc.code}: {exc.message[:120]}"] += 1
            except Exception as exc:  # noqa: BLE001 - every failure is counted, none stops the reader
                errors[f"{name}: {type(exc).__name__}: {str(exc)[:120]}"] += 1
            else:
                latencies[name].append((time.perf_counter() - started) * 1000)
            if think_ms:
                time.sleep(rng.uniform(0, 2 * think_ms) / 1000)
    finally:
        query.close()
    return {"latencies": latencies, "errors": dict(errors), "stale_cursors": stale}


# ----------------------------------------------------------------------------- writer


class Grower(threading.Thread):
    """Grows the root: ``writers`` sessions open at once, ``rate`` batches/s in all."""

    def __init__(self, root: Path, rate: float, writers: int, seed: int = 5) -> None:
        super().__init__(daemon=True)
        from bench.corpus import SHARED_ROOT, harness_batches, load_sessions

        self.root = root
        self.rate = rate
        self.writers = writers
        self.rng = random.Random(seed)
        self.sources = [(h, list(harness_batches(ev))) for h, ev in load_sessions(SHARED_ROOT) if ev]
        self.stop = threading.Event()
        self.batches = self.sessions = self.events = 0
        self.error: BaseException | None = None

    def _open(self) -> list[Any]:
        import uuid

        from indexer.writer import LogWriter

        header, batches = self.sources[self.rng.randrange(len(self.sources))]
        header = dict(header, id=str(uuid.UUID(int=self.rng.getrandbits(128), version=4)), createdAt=1_800_000_000_000 + self.sessions)
        header.pop("parentSession", None)
        header.pop("origin", None)
        header["delegationDepth"] = 0
        self.sessions += 1
        return [LogWriter.in_root(self.root, header), header, batches, 0]

    def run(self) -> None:
        try:
            open_logs = [self._open() for _ in range(self.writers)]
            interval = 1.0 / self.rate
            due = time.monotonic()
            turn = 0
            while not self.stop.is_set():
                slot = open_logs[turn % len(open_logs)]
                turn += 1
                writer, header, batches, index = slot
                if index == 0:
                    writer.create(header, batches[0])
                else:
                    writer.append(batches[index])
                self.events += len(batches[index])
                self.batches += 1
                slot[3] = index + 1
                if slot[3] >= len(batches):
                    open_logs[(turn - 1) % len(open_logs)] = self._open()
                due += interval
                self.stop.wait(max(0.0, due - time.monotonic()))
        except BaseException as exc:  # noqa: BLE001 - reported by the benchmark
            self.error = exc


# ----------------------------------------------------------------------------- driver


def _index_state(db: Path) -> tuple[int, int]:
    """(sessions, global generation) committed in the index, or (0, 0)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            sessions = conn.execute('SELECT count(*) FROM "sessions"').fetchone()[0]
            generation = conn.execute('SELECT "global_generation" FROM "index_meta"').fetchone()[0]
        finally:
            conn.close()
        return int(sessions), int(generation)
    except (sqlite3.Error, TypeError):
        return 0, 0


def _indexed_bytes(db: Path) -> int:
    """The log bytes the index has caught up with (each session's stored file size)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            return int(conn.execute('SELECT coalesce(sum("size"), 0) FROM "sessions"').fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def run(directory: Path, base_mb: float, readers: int, duration: float, rate: float, writers: int, think_ms: float) -> dict[str, Any]:
    from bench.corpus import ensure_root

    base = ensure_root(directory / f"corpus-{base_mb:g}", base_mb)
    with tempfile.TemporaryDirectory(prefix="sessionq-readers-") as tmp:
        root, db = Path(tmp) / "root", Path(tmp) / "index.db"
        shutil.copytree(base["root"], root)
        started = time.perf_counter()
        daemon = start_daemon(root, db)
        grower = Grower(root, rate, writers)
        procs: list[subprocess.Popen[str]] = []
        try:
            if not wait_until(lambda: _index_state(db)[0] > 0, 600, 0.05):
                raise RuntimeError("the daemon never committed a session")
            first_commit = time.perf_counter() - started
            for n in range(readers):
                spec = json.dumps({"db": str(db), "seed": n, "duration": duration, "think_ms": think_ms})
                procs.append(
                    subprocess.Popen([sys.executable, "-m", "bench.readers", "--worker", spec], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                )
            for proc in procs:  # every reader imported, connected and warm
                assert proc.stdout is not None
                if proc.stdout.readline().strip() != "ready":
                    raise RuntimeError("a reader process failed to start")
            sessions_at_start, generation_at_start = _index_state(db)
            grower.start()
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            outputs = [proc.communicate(timeout=duration + 600)[0] for proc in procs]
            grower.stop.set()
            grower.join(timeout=30)
            if grower.error is not None:
                raise RuntimeError(f"the writer failed: {grower.error!r}")
            failed = [proc.returncode for proc in procs if proc.returncode != 0]
            if failed:
                raise RuntimeError(f"reader processes failed: {failed}")
            sessions_at_end, generation_at_end = _index_state(db)
            stop_writing = time.perf_counter()
            total_bytes = sum(path.stat().st_size for path in root.rglob("session.jsonl.zstd"))
            caught_up = wait_until(lambda: _indexed_bytes(db) >= total_bytes, 300, 0.05)
            catch_up = time.perf_counter() - stop_writing
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            grower.stop.set()
            daemon_info = stop_daemon(daemon)
    merged: dict[str, list[float]] = {name: [] for name in OPERATIONS}
    errors: Counter[str] = Counter()
    stale = 0
    for output in outputs:
        result = json.loads(output.strip().splitlines()[-1])
        for name, values in result["latencies"].items():
            merged[name].extend(values)
        errors.update(result["errors"])
        stale += result["stale_cursors"]
    locked = sum(count for kind, count in errors.items() if LOCKED in kind)
    out = record(
        "concurrent-readers",
        readers=readers,
        duration_s=duration,
        think_ms=think_ms,
        base_sessions=base["sessions"],
        base_mb=round(base["bytes"] / 2**20, 1),
        writer_rate_batches_per_s=rate,
        writer_sessions=grower.sessions,
        writer_batches=grower.batches,
        writer_events=grower.events,
        first_commit_s=round(first_commit, 2),
        index_sessions_at_start=sessions_at_start,
        index_sessions_at_end=sessions_at_end,
        generations_during_run=generation_at_end - generation_at_start,
        catch_up_s=round(catch_up, 2) if caught_up else None,
        operations=sum(len(values) for values in merged.values()),
        errors=sum(errors.values()),
        database_locked=locked,
        stale_cursors=stale,
        error_kinds=dict(errors.most_common(10)),
        **{k: v for k, v in daemon_info.items() if k != "daemon_stderr" or v},
    )
    all_values = [value for values in merged.values() for value in values]
    out.update(summary(all_values, 2))
    out["by_operation"] = {name: summary(values, 2) for name, values in merged.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Concurrent reader processes while the daemon indexes")
    parser.add_argument("--dir", type=Path, default=REPO / "var" / "bench")
    parser.add_argument("--base-mb", type=float, default=10.0, help="the replicated root the scratch root starts from")
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds the readers run")
    parser.add_argument("--rate", type=float, default=20.0, help="append batches per second written to the root")
    parser.add_argument("--writers", type=int, default=4, help="sessions being written at once")
    parser.add_argument("--think-ms", type=float, default=100.0, help="mean pause between a reader's operations (uniform 0..2x)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        spec = json.loads(args.worker)
        print(json.dumps(_reader(spec["db"], spec["seed"], spec["duration"], spec["think_ms"])))
        return 0
    emit(run(args.dir, args.base_mb, args.readers, args.duration, args.rate, args.writers, args.think_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
