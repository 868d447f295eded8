"""A readers–writer lock over the whole machine for the workers of one pytest-xdist run.

``scripts/test`` runs the suite on every core (pytest-xdist, one process per
worker).  A few tests bound a wall time tightly and must not share the cores
with another worker's test: they are marked ``exclusive``, and tests/conftest.py
wraps every test of a worker in :meth:`MachineLock.held` — shared for ordinary
tests, exclusive for those.

Two ``flock`` files in a directory all workers of the run share: ``tests``
(shared or exclusive, held for the test's whole run, fixtures included) and
``gate`` (a turnstile).  An ordinary test passes the gate before taking the
shared lock; an exclusive test holds the gate while it waits for the others to
finish, so a worker that starts test after test cannot starve it.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pytest

_KEY: Final = pytest.StashKey["MachineLock | None"]()


class MachineLock:
    """The two lock files of one run, opened by one worker (``flock`` locks belong to the open file)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._gate = os.open(directory / "gate", os.O_RDWR | os.O_CREAT, 0o600)
        self._tests = os.open(directory / "tests", os.O_RDWR | os.O_CREAT, 0o600)

    @contextmanager
    def held(self, exclusive: bool) -> Iterator[None]:
        """Hold the machine shared (an ordinary test) or alone (``exclusive``) for the block."""
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._tests, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(self._gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self._tests, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(self._gate, fcntl.LOCK_UN)


def for_worker(config: pytest.Config) -> MachineLock | None:
    """This xdist worker's lock (made on first use), or None outside xdist (a serial run, or a
    fresh pytest process a test starts, which must never wait for its parent's lock)."""
    if _KEY not in config.stash:
        workerinput = getattr(config, "workerinput", None)
        if workerinput is None:
            config.stash[_KEY] = None
        else:
            # xdist gives each worker the basetemp <run's basetemp>/<worker id>: the parent is the run's.
            config.stash[_KEY] = MachineLock(Path(config.option.basetemp).parent / "machine-lock")
    return config.stash[_KEY]
