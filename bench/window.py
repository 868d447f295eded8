"""Window reads in a large single log: ``SessionQuery.read_event`` with neighbours.

Uses the long single-session log ``DIR/single-<N>`` (built by :mod:`bench.corpus`
and indexed by ``bench.build --single-sizes N``; both are done here when
missing) and times ``read_event({sessionId, seq, before, after})`` — the event
and up to ``before``/``after`` neighbours (50 each by default, the configured
maximum), the exact read an agent's ``session_event_read`` tool makes — at the
start, the middle and the end of the log and at random positions.  Each call
is a fresh read transaction; nothing is cached between calls.

Usage::

    python -m bench.window --mb 100 [--dir var/bench] [--repeat 200] [--window 50]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from bench.common import MB, REPO, emit, note, record, summary, timed_ms
from bench.corpus import ensure_single


def ensure_indexed_single(directory: Path, megabytes: float) -> tuple[dict[str, Any], Path]:
    """The single-log corpus and its index (a cold build when the index is missing)."""
    corpus_dir = directory / f"single-{megabytes:g}"
    info = ensure_single(corpus_dir, megabytes)
    db = corpus_dir / "index.db"
    if not db.exists():
        from bench.build import build_in_process

        note("indexing", root=info["root"])
        build_in_process(Path(info["root"]), str(db))
    return info, db


def _event_count(db: Path, session_id: str) -> int:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute('SELECT "event_count" FROM "sessions" WHERE "id" = ?', (session_id,)).fetchone()[0])
    finally:
        conn.close()


def run(directory: Path, megabytes: float, repeat: int = 200, window: int = 50, seed: int = 3) -> dict[str, Any]:
    from readmodel.query import SessionQuery

    info, db = ensure_indexed_single(directory, megabytes)
    session_id = info["id"]
    rng = random.Random(seed)
    query = SessionQuery.open(str(db))
    try:
        count = _event_count(db, session_id)
        last = count - 1
        positions = {
            "start": lambda: min(last, window),
            "middle": lambda: count // 2,
            "end": lambda: last,
            "random": lambda: rng.randrange(count),
        }
        samples: dict[str, list[float]] = {name: [] for name in positions}
        returned = 0
        # Interleave positions so drifting machine load spreads over all of them.
        for _ in range(repeat):
            for name, pick in positions.items():
                seq = pick()
                ms, result = timed_ms(lambda seq=seq: query.read_event({"sessionId": session_id, "seq": seq, "before": window, "after": window}))
                samples[name].append(ms)
                returned = max(returned, len(result.events))
        single = [timed_ms(lambda: query.read_event({"sessionId": session_id, "seq": rng.randrange(count)}))[0] for _ in range(repeat)]
    finally:
        query.close()
    out = record(
        "window-read",
        target_mb=megabytes,
        log_mb=round(info["bytes"] / MB, 1),
        log_events=count,
        window_before=window,
        window_after=window,
        events_per_window=returned,
        repeat=repeat,
        **summary([ms for values in samples.values() for ms in values], 2),
    )
    for name, values in samples.items():
        out.update(summary(values, 2, prefix=f"{name}_"))
    out.update(summary(single, 2, prefix="single_event_"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="read_event windows in a large single log")
    parser.add_argument("--mb", type=float, action="append", default=None, help="log size (repeatable; default 100)")
    parser.add_argument("--dir", type=Path, default=REPO / "var" / "bench")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--window", type=int, default=50, help="neighbours before and after (at most 50 by default config)")
    args = parser.parse_args(argv)
    for megabytes in args.mb or [100.0]:
        emit(run(args.dir, megabytes, args.repeat, args.window))
    return 0


if __name__ == "__main__":
    sys.exit(main())
