"""Appended event → visible in an open web page: the live path end to end.

A scratch root holds ``--sessions`` sessions and one watched session of
``--events`` events.  The real daemon (``sessionq index``, inotify, default
settings) indexes it, the real server (``sessionq serve``) serves it, and
Chromium (Playwright, Debian's ``/usr/bin/chromium``) opens the watched
session's page.  Then, ``--appends`` times, one zstd frame holding a user
message is appended exactly as the harness appends, and the time is taken
from just before the write to the first animation frame after the event's row
entered the page (a ``MutationObserver`` and ``requestAnimationFrame`` in the
page, on the same clock: ``performance.timeOrigin + now()`` against
``time.time()``).  Between appends a pause of ``--pause`` seconds plus a
uniform jitter of up to 0.25 s (a fixed seed) samples every phase of the
server's 250 ms generation poll.

Also reported: when the daemon's commit made the event readable (the
index generation moved, polled every 5 ms from a read-only connection), so
the figure splits into indexing and delivery (SSE poll + page read + render);
the share of appends visible within 1 s (the target of issue 19); the load
average before and after (the machine is shared: read the figures with it).

Usage::

    python -m bench.live [--appends 100] [--events 500] [--sessions 50]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, emit, note, record, start_daemon, stop_daemon, summary, wait_until
from indexer.writer import LogWriter

CHROMIUM = Path("/usr/bin/chromium")
WATCHED = "live-bench-session"
BASE_TIME = 1_800_000_000_000

ARRIVALS = """
window.__arrivals = {};
new MutationObserver((records) => {
  for (const r of records) for (const n of r.addedNodes) {
    if (n.nodeType !== 1 || !n.id || !n.id.startsWith("seq-")) continue;
    const seq = n.id.slice(4);
    if (!(seq in window.__arrivals)) {
      window.__arrivals[seq] = null;
      requestAnimationFrame(() => { window.__arrivals[seq] = performance.timeOrigin + performance.now(); });
    }
  }
}).observe(document, { childList: true, subtree: true });
"""


def _message(kind: str, seq: int, text: str, when: int) -> dict[str, Any]:
    role = "user" if kind == "user/message" else "assistant"
    data: dict[str, Any] = {"id": f"m{seq}", "role": role, "content": [{"type": "text", "text": text}]}
    data["source"] = {"kind": "user"} if role == "user" else {"kind": "model", "provider": "p", "model": "m"}
    body = data if role == "user" else {"turn": 1, "step": 1, "message": data}
    return {"type": kind, "seq": seq, "time": when, "data": body, "surfaceOp": "append"}


def _session(root: Path, session_id: str, created: int, events: int, cwd: str) -> LogWriter:
    header = {"version": 0, "id": session_id, "createdAt": created, "cwd": cwd, "delegationDepth": 0}
    writer = LogWriter.in_root(root, header)
    batch = [
        _message("user/message" if seq % 2 == 0 else "assistant/message", seq, f"message {seq} of {session_id}: **markdown** and `code`", created + seq)
        for seq in range(events)
    ]
    writer.write_session(header, [batch])
    return writer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _generation(engine: Any) -> int | None:
    from readmodel.http.events import read_generation

    try:
        return read_generation(engine)
    except Exception:  # noqa: BLE001 - not there yet
        return None


def measure(appends: int, events: int, sessions: int, pause: float, workdir: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from readmodel.query import SessionQuery

    root = workdir / "root"
    db = workdir / "index.db"
    for n in range(sessions):
        _session(root, f"background-{n:04d}", BASE_TIME + n * 1000, 20, f"/home/bench/project-{n % 7}")
    _session(root, WATCHED, BASE_TIME + sessions * 1000, events, "/home/bench/watched")
    writer = LogWriter.in_root(root, {"version": 0, "id": WATCHED, "createdAt": BASE_TIME + sessions * 1000, "cwd": "/home/bench/watched", "delegationDepth": 0})
    load_before = os.getloadavg()
    daemon = start_daemon(root, db)
    server = None
    engine = None
    log: Any = None
    try:
        if not wait_until(lambda: db.exists() and _count(db) == sessions + 1, 600, 0.05):
            raise RuntimeError("the daemon did not index the root")
        port = _free_port()
        log = open(workdir / "serve.log", "wb")  # noqa: SIM115 - closed with the server
        server = subprocess.Popen(
            [sys.executable, "-m", "indexer.cli", "serve", "--db", str(db), "--port", str(port), "--root", str(root)],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=log,
        )
        base = f"http://127.0.0.1:{port}"
        if not wait_until(lambda: _answers(base), 60, 0.05):
            raise RuntimeError("sessionq serve did not start")
        engine = SessionQuery.open(str(db))
        rng = random.Random(19)
        total: list[float] = []
        indexed: list[float] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.add_init_script(ARRIVALS)
                page.goto(f"{base}/#session={WATCHED}")
                page.wait_for_selector("#seq-0", state="attached", timeout=60_000)
                more = page.locator("main > .more-row button")
                while more.count():  # rendered in batches of 2,000: show them all, as a reader at the end would
                    more.first.click()
                page.wait_for_selector(f"#seq-{events - 1}", state="attached", timeout=60_000)
                page.wait_for_function("document.getElementById('live') && !document.getElementById('live').hidden", timeout=30_000)
                seq = events
                for n in range(appends):
                    time.sleep(pause + rng.uniform(0, 0.25))
                    before = _generation(engine)
                    event = _message("user/message", seq, f"live probe {n}", BASE_TIME + 10_000_000 + n)
                    written = time.time() * 1000
                    writer.append([event])
                    if wait_until(lambda: _generation(engine) != before, 30, 0.005):
                        indexed.append(time.time() * 1000 - written)
                    page.wait_for_function(f"window.__arrivals && window.__arrivals['{seq}']", timeout=30_000)
                    total.append(page.evaluate(f"window.__arrivals['{seq}']") - written)
                    seq += 1
            finally:
                browser.close()
    finally:
        if engine is not None:
            engine.close()
        if server is not None:
            server.terminate()
            server.wait(30)
        if log is not None:
            log.close()
        daemon_info = stop_daemon(daemon)
    load_after = os.getloadavg()
    within = sum(1 for t in total if t <= 1000) / len(total) if total else 0.0
    return record(
        "live-latency",
        appends=appends,
        watched_events=events,
        sessions=sessions + 1,
        **summary(total, 1),
        **summary(indexed, 1, prefix="indexed_"),
        within_1s=round(within, 3),
        load_before=[round(x, 2) for x in load_before],
        load_after=[round(x, 2) for x in load_after],
        **{k: v for k, v in daemon_info.items() if k != "daemon_stderr" or v},
    )


def _count(db: Path) -> int:
    import sqlite3

    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
    except sqlite3.Error:
        return -1


def _answers(base: str) -> bool:
    import httpx

    try:
        return httpx.get(base + "/api/openapi.json", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Appended event → visible in an open web page")
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--events", type=int, default=500, help="events of the watched session before the appends (at most 20,000: a longer log is read in ranges and follows only its count)")
    parser.add_argument("--sessions", type=int, default=50, help="other sessions in the index")
    parser.add_argument("--pause", type=float, default=0.25, help="seconds between appends (plus up to 0.25 s of jitter)")
    args = parser.parse_args(argv)
    if not CHROMIUM.is_file():
        note("skipped: no Chromium", path=str(CHROMIUM))
        return 0
    with tempfile.TemporaryDirectory(prefix="sessionq-live-") as tmp:
        emit(measure(args.appends, args.events, args.sessions, args.pause, Path(tmp)))
        shutil.rmtree(Path(tmp) / "root", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
