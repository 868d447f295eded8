"""Writer and reader roles of the concurrency test (test_concurrency.py), and the
thread-storm helpers of test_thread_safety.py and tests/http/test_concurrent_load.py.

The writer grows a root through :class:`indexer.writer.LogWriter` with a fixed
shape, so every answer can be checked for internal consistency:

* every batch is a turn ``turn/start, user, assistant, turn/end``; event ``n``
  carries the text ``"<session> #<n>"`` (``time`` = ``n``);
* every fourth batch opens with a compaction: its user message replaces the
  whole current surface except the last assistant message, citing every node
  it removes.

So in any committed state: seqs are contiguous, the surface ends with the
assistant message just before the final ``turn/end``, every surface node is a
message, and each event's text names its own seq.  A read that mixed two index
generations (rows of one, blocks of another) breaks one of these.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from indexer.layout import Compression
from indexer.writer import LogWriter

Event = dict[str, Any]


def _text(session_id: str, seq: int) -> str:
    return f"{session_id} #{seq}"


def _user(session_id: str, seq: int, op: Any = "append", sources: list[int] | None = None) -> Event:
    event: Event = {
        "type": "user/message",
        "seq": seq,
        "time": seq,
        "data": {"id": f"u{seq}", "role": "user", "content": [{"type": "text", "text": _text(session_id, seq)}], "source": {"kind": "user"}},
    }
    if sources is not None:
        event["sourceEventSeqs"] = sources
    event["surfaceOp"] = op
    return event


def _assistant(session_id: str, seq: int) -> Event:
    message = {
        "id": f"a{seq}",
        "role": "assistant",
        "content": [{"type": "text", "text": _text(session_id, seq)}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    return {"type": "assistant/message", "seq": seq, "time": seq, "data": {"turn": 1, "step": 1, "message": message}, "surfaceOp": "append"}


class GrowingLog:
    """One session being written batch by batch."""

    def __init__(self, root: Path, session_id: str, created_at: int) -> None:
        self.session_id = session_id
        self.header = {"version": 0, "id": session_id, "createdAt": created_at, "cwd": "/work/grow", "delegationDepth": 0}
        self.writer = LogWriter.in_root(root, self.header, Compression.ZSTD)
        self.seq = 0
        self.turn = 0
        self.surface: list[int] = []
        self.created = False

    def batch(self) -> list[Event]:
        self.turn += 1
        sid, seq = self.session_id, self.seq
        events: list[Event] = [{"type": "turn/start", "seq": seq, "time": seq, "data": {"turn": self.turn}}]
        seq += 1
        if self.turn % 4 == 0 and len(self.surface) > 2:
            removed = self.surface[:-1]
            op = {"op": "replace", "start": removed[0], "end": removed[-1]}
            events.append(_user(sid, seq, op, sources=list(removed)))
            self.surface = [seq, self.surface[-1]]
        else:
            events.append(_user(sid, seq))
            self.surface.append(seq)
        events.append(_assistant(sid, seq + 1))
        self.surface.append(seq + 1)
        events.append({"type": "turn/end", "seq": seq + 2, "time": seq + 2, "data": {"turn": self.turn, "reason": {"kind": "completed"}}})
        self.seq = seq + 3
        return events

    def append(self) -> None:
        if self.created:
            self.writer.append(self.batch())
        else:
            self.writer.create(self.header, self.batch())
            self.created = True


def grow(root: Path, db: Path, seconds: float, sessions: int = 12, seed: int = 3) -> dict[str, int]:
    """The writer: append batches and reconcile, repeatedly, for ``seconds``."""
    from indexer.reconcile import Reconciler
    from readmodel.store.database import open_writer

    rng = random.Random(seed)
    logs = [GrowingLog(root, f"grow-{n:02d}", 1000 + n) for n in range(sessions)]
    for log in logs:
        log.append()
    engine = open_writer(str(db))
    reconciler = Reconciler(engine, root, Compression.ZSTD, settle_seconds=0)
    passes = 0
    try:
        reconciler.reconcile()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for log in rng.sample(logs, k=4):
                for _ in range(rng.randint(1, 3)):
                    log.append()
            reconciler.reconcile()
            passes += 1
    finally:
        engine.dispose()
    return {"passes": passes, "events": sum(log.seq for log in logs)}


# --------------------------------------------------------------------------- readers


class Inconsistent(AssertionError):
    pass


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise Inconsistent(what)


def _message_text(event: Event) -> str:
    data = event["data"]
    message = data if event["type"] == "user/message" else data["message"]
    return message["content"][0]["text"]


def _check_log(session_id: str, events: list[Event]) -> None:
    _check([e["seq"] for e in events] == list(range(len(events))), "readSession seqs are not contiguous")
    for event in events:
        if event["type"] in ("user/message", "assistant/message"):
            _check(_message_text(event) == _text(session_id, event["seq"]), "an event carries another seq's text")
    _check(len(events) % 4 == 0 and events[-1]["type"] == "turn/end", "readSession ends inside a batch")


def read_everything(query: Any, rng: random.Random) -> int:
    """One round of every read against one random session; returns reads done."""
    records = query.list_sessions()
    _check(len({r.header["id"] for r in records}) == len(records), "duplicate ids in one listing")
    if not records:
        return 1
    session_id = rng.choice(records).header["id"]
    _check_log(session_id, query.read_session(session_id).events)

    surface = query.read_surface(session_id)
    captured = surface.captured_through_seq
    seqs = [e["seq"] for e in surface.events]
    _check(captured is not None and (captured + 1) % 4 == 0, "capturedThroughSeq is not the end of a batch")
    _check(bool(seqs) and seqs[-1] == captured - 1 and surface.events[-1]["type"] == "assistant/message", "surface does not end at the last answer")
    _check(len(set(seqs)) == len(seqs) and all(s <= captured for s in seqs), "surface nodes beyond the captured log")
    for event in surface.events:
        _check(_message_text(event) == _text(session_id, event["seq"]), "surface event from another generation")

    records_ = query.list_events(session_id)
    _check([r.seq for r in records_] == list(range(len(records_))), "listEvents seqs are not contiguous")
    _check(records_[-1].type == "turn/end" and records_[-2].surface == "current", "listEvents tail is inconsistent")

    documents = query.filter_events(session_id, [{"kind": "surface", "values": ["current"]}])
    _check(bool(documents) and all(d.text == _text(session_id, d.seq) for d in documents), "document text from another seq")
    _check([d.seq for d in documents] == sorted({d.seq for d in documents}), "documents out of order")
    _check(documents[-1].type == "assistant/message" and (documents[-1].seq + 2) % 4 == 0, "last current document is not an answer")

    seq = rng.randrange(len(records_))
    window = query.read_event({"sessionId": session_id, "seq": seq, "before": 3, "after": 3})
    _check([e["seq"] for e in window.events] == list(range(window.start_seq, window.end_seq + 1)), "window is not contiguous")
    _check(window.target["seq"] == seq, "window target is another event")

    trace = query.trace_event({"sessionId": session_id, "seq": seq})
    chain = trace.replacement_chain
    _check(chain == sorted(chain) and all(c > seq for c in chain), "replacement chain out of order")
    if trace.target.surface == "shadowed":
        _check(bool(chain), "a shadowed event without a replacer")

    lineage = query.trace_session(session_id)
    _check(lineage.complete and lineage.target.header["id"] == session_id, "lineage of a root session")
    titles = query.read_title_snapshots([session_id, "no-such-session"])
    _check([t.status for t in titles] == ["fulfilled", "rejected"], "title batch statuses")
    return 11


def reader(db: str, stop: Any, results: Any, seed: int) -> None:
    """A reader process: read until ``stop`` is set; report counts and failures."""
    from readmodel.query import SessionQuery

    rng = random.Random(seed)
    reads = 0
    failures: list[str] = []
    try:
        query = SessionQuery.open(db)
        while not stop.is_set():
            try:
                reads += read_everything(query, rng)
            except Exception:  # noqa: BLE001 - every failure is reported to the test
                failures.append(traceback.format_exc(limit=6))
                if len(failures) >= 5:
                    break
        query.close()
    except Exception:  # noqa: BLE001
        failures.append(traceback.format_exc(limit=6))
    results.put({"seed": seed, "reads": reads, "failures": failures})


# --------------------------------------------------------------------------- isolation


def _report_to(queue: Any, target: Any, args: tuple[Any, ...]) -> None:
    try:
        queue.put(("ok", target(*args)))
    except BaseException:  # noqa: BLE001 - every failure is reported to the test
        queue.put(("raised", traceback.format_exc(limit=8)))


def in_forked_child(target: Any, *args: Any, timeout: float = 120) -> Any:
    """``target(*args)`` run in a forked child; its (picklable) return value.

    A thread-safety bug in a C extension may crash the process (SIGSEGV)
    rather than raise: in a child, the test fails with the exit status and the
    rest of the suite keeps running.
    """
    import multiprocessing
    import queue as queues

    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_report_to, args=(results, target, args))
    child.start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, value = results.get(timeout=0.2 if child.is_alive() else 2)
            break
        except queues.Empty:
            if not child.is_alive():
                raise AssertionError(f"the child died with exit status {child.exitcode} before reporting") from None
            if time.monotonic() > deadline:
                child.kill()
                child.join()
                raise AssertionError(f"the child did not finish within {timeout} s") from None
    child.join(timeout)
    assert status == "ok", value
    assert child.exitcode == 0, f"the child exited with status {child.exitcode}"
    return value


# --------------------------------------------------------------------------- thread storms


class Tally:
    """Answers of many threads, counted and compared with the expected ones."""

    def __init__(self) -> None:
        self.count = 0
        self.mismatches: list[str] = []
        self._lock = threading.Lock()

    def check(self, what: str, got: Any, expected: Any) -> None:
        with self._lock:
            self.count += 1
            if got != expected:
                self.mismatches.append(f"{what}: {str(got)[:200]}")


def run_in_threads(worker: Callable[[int], None], count: int) -> None:
    """``worker(seed)`` for seeds ``0 .. count - 1``, one thread each, released together."""
    barrier = threading.Barrier(count)

    def run(seed: int) -> None:
        barrier.wait()
        worker(seed)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
