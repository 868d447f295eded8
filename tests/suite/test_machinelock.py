"""The machine lock of a parallel run (tests/machinelock.py): exclusive tests run alone."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.machinelock import MachineLock


def _entered_within(lock: MachineLock, exclusive: bool, seconds: float, release: threading.Event) -> threading.Event:
    """Start a thread that takes ``lock`` and holds it until ``release``; the event it sets on entry."""
    entered = threading.Event()

    def hold() -> None:
        with lock.held(exclusive):
            entered.set()
            release.wait(10)

    threading.Thread(target=hold, daemon=True).start()
    entered.wait(seconds)
    return entered


def test_ordinary_tests_share_the_machine(tmp_path: Path) -> None:
    first, second, release = MachineLock(tmp_path), MachineLock(tmp_path), threading.Event()
    try:
        assert _entered_within(first, False, 5, release).is_set()
        assert _entered_within(second, False, 5, release).is_set()
    finally:
        release.set()


def test_an_exclusive_test_waits_for_running_tests_and_holds_off_new_ones(tmp_path: Path) -> None:
    worker_a, worker_b, worker_c = MachineLock(tmp_path), MachineLock(tmp_path), MachineLock(tmp_path)
    release_a, release_b, release_c = threading.Event(), threading.Event(), threading.Event()
    try:
        assert _entered_within(worker_a, False, 5, release_a).is_set()
        exclusive = _entered_within(worker_b, True, 0.3, release_b)
        assert not exclusive.is_set()  # worker a's test is still running
        late = _entered_within(worker_c, False, 0.3, release_c)
        assert not late.is_set()  # the gate: no new test starts while the exclusive one waits
        release_a.set()
        assert exclusive.wait(5) and not late.is_set()
        release_b.set()
        assert late.wait(5)
    finally:
        release_a.set(), release_b.set(), release_c.set()
