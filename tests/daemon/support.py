"""Running the indexer daemon in tests: subprocesses, read-only polling, sessions.

Every process started here is registered with a :class:`Processes` owner
(the ``processes`` fixture) that kills whatever is still running at teardown,
so a failing test never leaves a daemon behind.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from indexer.layout import Compression
from indexer.writer import LogWriter, batch_bytes, header_line
from tests.logfactory import header, simple_turn, transcript_path
from tests import indexdb

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 8.0, interval: float = 0.01, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def query(db: str | Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Run one read-only query (``mode=ro``, as any reader process would)."""
    for _ in range(50):
        try:
            conn = indexdb.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        except sqlite3.OperationalError:
            time.sleep(0.02)  # the daemon may not have created the file yet
            continue
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc) and "locked" not in str(exc):
                raise
            time.sleep(0.02)
        finally:
            conn.close()
    raise AssertionError(f"cannot query {db}")


def fts_hits(db: str | Path, term: str) -> list[tuple[str, int]]:
    """(session id, seq) of the documents matching ``term``."""
    rows = query(db, 'SELECT s."id", d."seq" FROM "texts_fts" f JOIN "document_rows" d ON d."text_id" = f.rowid '
                     'JOIN "sessions" s ON s."sid" = d."sid" WHERE "texts_fts" MATCH ?', term)
    return sorted(rows)


class Proc:
    """One ``sessionq`` subprocess with its stdout and stderr captured to files."""

    def __init__(self, args: Sequence[str], workdir: Path, name: str) -> None:
        self.args = list(args)
        self.out_path = workdir / f"{name}.out"
        self.err_path = workdir / f"{name}.err"
        self._out = open(self.out_path, "wb")
        self._err = open(self.err_path, "wb")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "indexer.cli", *self.args],
            stdout=self._out,
            stderr=self._err,
            stdin=subprocess.DEVNULL,
            cwd=REPO,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stderr(self) -> str:
        # The child writes straight to the file descriptor: nothing to flush here.
        return self.err_path.read_text(errors="replace")

    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Until the initial full pass has been logged (the daemon is watching)."""
        def ready() -> bool:
            if self.popen.poll() is not None:
                raise AssertionError(f"daemon exited early with {self.popen.returncode}: {self.stderr()}")
            log = self.stderr()
            return "reason=start" in log or '"reason": "start"' in log  # text or JSON logs

        wait_for(ready, timeout, 0.02, "the daemon's initial pass")

    def send(self, signum: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signum)

    def wait(self, timeout: float = 15.0) -> int:
        try:
            return self.popen.wait(timeout)
        finally:
            self._close()

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        self.send(signum)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)
        self._close()

    def _close(self) -> None:
        for fh in (self._out, self._err):
            if not fh.closed:
                fh.close()


class Processes:
    """Owns subprocesses started by a test and kills the survivors at teardown."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[Proc] = []

    def start(self, *args: str, name: str | None = None) -> Proc:
        proc = Proc(args, self.workdir, name or f"proc{len(self.started)}")
        self.started.append(proc)
        return proc

    def daemon(self, root: Path, db: Path, *extra: str, name: str | None = None) -> Proc:
        """A watching ``sessionq index`` (no periodic rescan unless asked), ready to use."""
        args = ["index", "--root", str(root), "--db", str(db), "--rescan", "0", "--log-level", "debug", *extra]
        proc = self.start(*args, name=name or f"daemon{len(self.started)}")
        proc.wait_ready()
        return proc

    def run(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run a short command to completion."""
        return subprocess.run(
            [sys.executable, "-m", "indexer.cli", *args],
            capture_output=True, text=True, cwd=REPO, timeout=timeout, stdin=subprocess.DEVNULL,
        )

    def cleanup(self) -> None:
        for proc in self.started:
            proc.kill()


def new_session(root: Path, session_id: str, text: str, created_at: int = 1_700_000_000_000) -> tuple[Path, int]:
    """Write a well-formed session with one complete turn; returns (path, next seq)."""
    hdr = header(session_id, created_at=created_at, cwd="/work/demo")
    writer = LogWriter.in_root(root, hdr, Compression.ZSTD)
    writer.write_session(hdr, [simple_turn(0, text)])
    return Path(writer.path), 9


def append_turn(path: Path, start: int, text: str) -> int:
    """Append one complete turn as one frame; returns the next seq."""
    LogWriter(path, Compression.ZSTD).append(simple_turn(start, text))
    return start + 9


def frames_of(hdr: dict[str, Any], batches: Sequence[Sequence[dict[str, Any]]]) -> list[bytes]:
    """The physical frames the harness would write for a header and batches."""
    writer = LogWriter("unused", Compression.ZSTD)
    return [writer.encode(header_line(hdr)), *(writer.encode(batch_bytes(batch)) for batch in batches)]


def write_corrupt_session(root: Path, session_id: str) -> Path:
    """A four-frame session whose second batch frame (a middle frame) fails its checksum."""
    hdr = header(session_id, created_at=1_700_000_500_000, cwd="/work/demo")
    frames = frames_of(hdr, [simple_turn(0, "first"), simple_turn(9, "second"), simple_turn(18, "third")])
    middle = bytearray(frames[2])
    middle[-1] ^= 0xFF  # the last byte of the frame's 4-byte content checksum
    frames[2] = bytes(middle)
    path = transcript_path(root, hdr)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(frames))
    return path
