"""Crash safety: SIGKILL the daemon at random moments while the root grows.

A writer process (:mod:`tests.daemon.growth`) appends frames (some torn for a
moment), leaves turns open between batches, compacts, creates, replaces and
deletes sessions.  Meanwhile the daemon is started and killed with SIGKILL
over and over, each time after a random 20–350 ms — during its initial pass,
mid-transaction, while watching.  After the writer stops, one final
``index --once`` must leave the index equal, row for row, to a cold rebuild of
the final root (see :mod:`tests.indexstate` for what "equal" means).

The daemon runs in a forked child of this (already warmed-up) test process, so
each cycle costs milliseconds of start-up instead of a fresh interpreter's
second, and most kills land while the daemon is working.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.daemon.support import REPO, query
from tests.indexstate import diff_states, fts_consistent, index_state

KILLS = 55
SEED = int(os.environ.get("SESSIONQ_CRASH_SEED", "20261130"))


def _run_cli(args: list[str], parallel: bool = False) -> None:
    """Child body: run ``sessionq ARGS`` in this forked process, then leave at once.

    With ``parallel`` every pass hands its new sessions to preparation workers.
    """
    code = 1
    if parallel:
        os.environ["SESSIONQ_PARALLEL_MIN_BYTES"] = "0"
    try:
        from indexer.cli import main

        main.main(args=args, prog_name="sessionq", standalone_mode=False)
        code = 0
    except SystemExit as exc:  # click's ctx.exit
        code = int(exc.code or 0)
    finally:
        os._exit(code)


def _warm_up() -> None:
    # Import everything the daemon needs before forking, so children start fast.
    import indexer.cli  # noqa: F401
    import indexer.daemon  # noqa: F401
    import indexer.reconcile  # noqa: F401
    import indexer.watching  # noqa: F401
    import readmodel.store.database  # noqa: F401
    from alembic.runtime.migration import MigrationContext  # noqa: F401
    from alembic.script import ScriptDirectory  # noqa: F401
    from readmodel.projection.grams import document_tokens

    document_tokens("warm")  # the gram fold table (built once per process)


def _once(root: Path, db: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "indexer.cli", "index", "--once", "--root", str(root), "--db", str(db), "--log-level", "warning"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout.strip()


@pytest.mark.slow
def test_sigkill_at_random_moments_then_once_equals_a_cold_rebuild(tmp_path: Path) -> None:
    _warm_up()
    rng = random.Random(SEED)
    root = tmp_path / "root"
    root.mkdir()
    db = tmp_path / "incremental.db"
    stop_file = tmp_path / "stop"
    growth_log = open(tmp_path / "growth.log", "wb")
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.daemon.growth", str(root), "--seed", str(SEED), "--stop-file", str(stop_file), "--max-seconds", "90"],
        cwd=REPO, stdout=growth_log, stderr=subprocess.STDOUT,
    )
    context = multiprocessing.get_context("fork")
    child: multiprocessing.process.BaseProcess | None = None
    args = [
        "index", "--root", str(root), "--db", str(db), "--compression", "zstd",
        "--settle", "0.05", "--rescan", "0.5", "--debounce", "0.005", "--log-level", "error",
    ]
    killed_mid_life = 0
    try:
        time.sleep(0.2)  # let the writer create its first sessions
        for cycle in range(KILLS):
            # Every other daemon prepares new sessions in worker processes.
            child = context.Process(target=_run_cli, args=(args, cycle % 2 == 1), daemon=False)
            child.start()
            time.sleep(rng.uniform(0.02, 0.5))
            if child.exitcode is None:
                killed_mid_life += 1
            assert child.pid is not None
            os.kill(child.pid, signal.SIGKILL)
            child.join(10)
            # Only SIGKILL may end it: an early exit would mean the daemon crashed by itself.
            assert child.exitcode == -signal.SIGKILL, f"daemon exited with {child.exitcode} before the kill"
            child = None
        assert killed_mid_life == KILLS
    finally:
        stop_file.touch()
        writer.wait(30)
        growth_log.close()
        if child is not None and child.exitcode is None and child.pid is not None:
            os.kill(child.pid, signal.SIGKILL)
            child.join(10)
    assert writer.returncode == 0, (tmp_path / "growth.log").read_text()

    # The killed daemons must have committed real work between kills.  Each lives
    # 20-500 ms, of which start-up (imports, opening the index) takes a share that
    # grows with the machine's load, so the bound is loose: one commit per ten
    # lives on average (an idle machine commits in most lives, a loaded one in
    # fewer; either way the kills land before, inside and after transactions).
    generation = query(db, 'SELECT "global_generation" FROM "index_meta"')[0][0]
    assert generation >= KILLS // 10, generation
    final = _once(root, db)
    cold = tmp_path / "cold.db"
    _once(root, cold)

    incremental_state = index_state(str(db))
    cold_state = index_state(str(cold))
    assert incremental_state["consistency"] == [], incremental_state["consistency"]
    assert cold_state["sessions"], "the writer produced no sessions"
    assert all(row["status"] == "ok" for row in cold_state["sessions"].values())
    differences = diff_states(incremental_state, cold_state)
    assert not differences, f"seed {SEED}: incremental != cold:\n" + "\n".join(differences)
    assert fts_consistent(str(db))
    print(f"seed {SEED}: generation {generation} before the final pass; final pass: {final}")
    print(f"seed {SEED}: {KILLS} kills, {len(cold_state['sessions'])} sessions, {len(cold_state['events'])} events; growth {(tmp_path / 'growth.log').read_text().strip()}")
