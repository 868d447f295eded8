"""A daemon killed while its preparation workers run leaves a quiet stderr and nothing behind.

The workers' pool holds named semaphores; when the daemon is SIGKILLed
mid-pass, multiprocessing's resource tracker unlinks them and used to warn
"There appear to be 5 leaked semaphore objects to clean up at shutdown" on the
daemon's stderr.  The daemon runs in a fresh interpreter here (the tracker is
its own child), so the warning, if any, lands in the captured stderr.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.corpus import ZSTD_ROOT, require_corpus
from tests.daemon.support import Processes, wait_for
from tests.proctree import children_by_parent, command_line, descendants, running


def _workers(daemon_pid: int) -> list[int]:
    """The preparation workers below the daemon (the fork server's children)."""
    tree = children_by_parent()
    servers = [pid for pid in tree.get(daemon_pid, []) if "forkserver" in command_line(pid)]
    return [worker for server in servers for worker in tree.get(server, [])]


def _named_semaphores(pid: int) -> set[str]:
    """The POSIX named semaphores ``pid`` has mapped (files under ``/dev/shm``)."""
    with open(f"/proc/{pid}/maps") as fh:
        return {row.split(maxsplit=5)[5].strip() for row in fh if "/dev/shm/sem." in row}


def test_sigkill_while_workers_prepare_prints_no_resource_tracker_warning(tmp_path: Path, processes: Processes, monkeypatch: pytest.MonkeyPatch) -> None:
    require_corpus()
    monkeypatch.setenv("SESSIONQ_PARALLEL_MIN_BYTES", "0")  # the cold pass over 125 sessions uses the workers
    daemon = processes.start("index", "--root", str(ZSTD_ROOT), "--db", str(tmp_path / "index.db"), "--workers", "2", "--rescan", "0")
    wait_for(lambda: _workers(daemon.pid), timeout=30, interval=0.005, what="the preparation workers")
    helpers = descendants(daemon.pid)  # resource tracker, fork server, workers
    semaphores = _named_semaphores(daemon.pid)
    os.kill(daemon.pid, signal.SIGKILL)
    assert daemon.wait() == -signal.SIGKILL
    # Workers follow the daemon out; the tracker cleans up once the last of them is gone.
    wait_for(lambda: not any(running(pid) for pid in helpers), timeout=15, what="the daemon's helper processes to end")
    stderr = daemon.stderr()
    assert "resource_tracker" not in stderr and "leaked" not in stderr, stderr
    assert "Traceback" not in stderr, stderr
    # The pool was alive when the daemon died (its semaphores were mapped), and the
    # tracker still unlinked them: quiet, and nothing left behind.
    assert semaphores
    assert not [path for path in semaphores if os.path.exists(path)]
