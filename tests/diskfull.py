"""Full-disk tests: a tiny tmpfs that really fills (``ENOSPC`` / ``SQLITE_FULL``), a root that outgrows it, a cold build.

Mounting needs root (the test containers run as root); anywhere else the test
is skipped with the reason.  :func:`tiny_tmpfs` unmounts on the way out, also
when the test fails, and :meth:`TinyFs.fill` leaves a chosen number of bytes
free with a filler file that :meth:`TinyFs.free_space` removes again.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


class TinyFs:
    """A mounted tmpfs at :attr:`path`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def free(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave: int) -> None:
        """Add filler until only about ``leave`` bytes are free."""
        extra = self.free() - leave
        if extra > 0:
            with open(self.filler, "ab") as fh:
                fh.write(b"\0" * extra)

    def free_space(self) -> None:
        """Remove the filler: the space is back."""
        self.filler.unlink(missing_ok=True)


@contextmanager
def tiny_tmpfs(path: Path, size: int) -> Iterator[TinyFs]:
    """Mount a ``size``-byte tmpfs at ``path`` for the block (skip the test when not permitted)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield TinyFs(path)
    finally:
        # Lazy: a daemon a failing test left behind may still hold a file open.
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def write_wordy_root(root: Path, sessions: int, words: int = 200) -> None:
    """``sessions`` one-turn sessions of ``words`` distinct words each: about 9.5 KB of index apiece."""
    from indexer.layout import Compression
    from indexer.writer import LogWriter
    from tests.logfactory import header, simple_turn

    for number in range(sessions):
        hdr = header(f"s{number:04d}", created_at=1_700_000_000_000 + number, cwd="/work/demo")
        text = f"session {number} talks about reconcile deploy parser " + " ".join(f"word{number}x{j}" for j in range(words))
        LogWriter.in_root(root, hdr, Compression.ZSTD).write_session(hdr, [simple_turn(0, text)])


def cold_build(root: Path, db: Path) -> None:
    """Index ``root`` from scratch into ``db`` (the reference a recovered index must equal)."""
    from indexer.layout import Compression
    from indexer.reconcile import Reconciler
    from readmodel.store.database import open_writer

    engine = open_writer(str(db))
    try:
        Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, workers=0).reconcile()
    finally:
        engine.dispose()
