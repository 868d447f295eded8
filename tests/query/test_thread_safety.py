"""Threads sharing one engine: every answer is the single-threaded one.

The HTTP server, the MCP server and embedding processes call one
:class:`readmodel.query.SessionQuery` from many threads at once.  Shared zstd
contexts corrupted concurrent block decompression ("Data corruption detected")
and crashed the process (SIGSEGV); these tests run the thread storms in a
forked child, so a crash fails the test instead of ending the suite.
"""

from __future__ import annotations

import gc
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from readmodel.store.blocks import compress_block, compress_payload, decompress_block, decompress_payload
from readmodel.core.jsonout import encode_json
from readmodel.query import SessionQuery
from readmodel.store.sqlite import IndexStore
from tests.corpus import ZSTD_ROOT, require_corpus
from tests.query.concurrency import Tally, in_forked_child, run_in_threads
from tests.query.support import build_index

THREADS = 8
ROUNDS = 1

Read = tuple[str, Callable[[SessionQuery], Any]]


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_corpus()
    return build_index(ZSTD_ROOT, tmp_path_factory.mktemp("threads") / "index.db")


def _answer(read: Callable[[SessionQuery], Any], query: SessionQuery) -> tuple[str, Any]:
    """A comparable answer: the result's JSON, or the error's code and message."""
    try:
        return ("ok", encode_json(read(query)))
    except Exception as error:  # noqa: BLE001 - a stored session error is an answer too
        return ("error", getattr(error, "code", type(error).__name__), str(error))


def _reads(query: SessionQuery) -> list[Read]:
    """Every kind of read, over every session of the corpus."""
    ids = [record.header["id"] for record in query.list_sessions()]
    reads: list[Read] = [("listSessions", lambda q: q.list_sessions())]
    for sid in ids:
        reads += [
            (f"readSession {sid}", lambda q, sid=sid: q.read_session(sid)),
            (f"readSurface {sid}", lambda q, sid=sid: q.read_surface(sid)),
            (f"listEvents {sid}", lambda q, sid=sid: q.list_events(sid)),
            (f"readEvent {sid}", lambda q, sid=sid: q.read_event({"sessionId": sid, "seq": 3, "before": 2, "after": 2})),
            (f"traceEvent {sid}", lambda q, sid=sid: q.trace_event({"sessionId": sid, "seq": 2})),
            (f"filterEvents {sid}", lambda q, sid=sid: q.filter_events(sid, [{"kind": "surface", "values": ["current"]}])),
            (f"readTitle {sid}", lambda q, sid=sid: q.read_title_snapshots([sid])),
        ]
    for term in ("file", "error", "test"):
        reads.append((f"searchSessions {term}", lambda q, term=term: q.search_sessions({"query": term, "limit": 10})))
        reads.append((f"searchEvents {term}", lambda q, term=term: q.search_events({"sessionId": ids[0], "query": term})))
    return reads


def _storm(db: str) -> dict[str, Any]:
    """In the child: the single-threaded answers, then THREADS threads reading
    every one of them ROUNDS times, in shuffled orders, through one engine."""
    query = SessionQuery.open(db)
    reads = _reads(query)
    expected = {name: _answer(read, query) for name, read in reads}
    tally = Tally()

    def worker(seed: int) -> None:
        order = reads * ROUNDS
        random.Random(seed).shuffle(order)
        for name, read in order:
            tally.check(name, _answer(read, query), expected[name])

    run_in_threads(worker, THREADS)
    query.close()
    ok = sum(1 for answer in expected.values() if answer[0] == "ok")
    return {"reads": tally.count, "expected_ok": ok, "kinds": len(reads), "mismatches": tally.mismatches[:10], "mismatched": len(tally.mismatches)}


def test_threads_sharing_one_engine_get_the_single_threaded_answers(corpus_db: Path) -> None:
    report = in_forked_child(_storm, str(corpus_db))
    assert report["mismatched"] == 0, report["mismatches"]
    assert report["reads"] == THREADS * ROUNDS * report["kinds"]
    assert report["expected_ok"] > report["kinds"] * 0.9, report  # the corpus reads, not errs


def _codec_storm() -> int:
    """In the child: threads compressing and decompressing distinct blocks at once."""
    rng = random.Random(7)
    blocks = [[rng.randbytes(rng.randint(20, 3000)).hex().encode() for _ in range(rng.randint(1, 40))] for _ in range(48)]
    failures = [0]

    def worker(seed: int) -> None:
        order = blocks * 4
        random.Random(seed).shuffle(order)
        for lines in order:
            joined = b"\n".join(lines)
            if decompress_block(compress_block(lines)) != lines or decompress_payload(compress_payload(joined)) != joined:
                failures[0] += 1

    run_in_threads(worker, THREADS)
    return failures[0]


def test_block_codecs_round_trip_while_threads_share_them() -> None:
    assert in_forked_child(_codec_storm) == 0


def test_a_reading_thread_that_ends_releases_its_connection(corpus_db: Path) -> None:
    """A server's pool retires idle threads and starts new ones: the store must
    not keep a connection open for every thread that ever read."""
    store = IndexStore.open(str(corpus_db))
    try:

        def read_once() -> None:
            with store.read() as reader:
                assert reader.list_headers()

        for _ in range(12):
            thread = threading.Thread(target=read_once)
            thread.start()
            thread.join()
        gc.collect()
        assert store.open_connections() == 0
        read_once()
        assert store.open_connections() == 1  # this thread's, kept for its next read
        read_once()
        assert store.open_connections() == 1
    finally:
        store.close()
    assert store.open_connections() == 0
