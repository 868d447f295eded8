"""Decoding from a resume point reads only new frames and equals a full read."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexer.layout import Compression
from indexer.reader import LogReader, ResumeMismatch, read_log
from readmodel.projection.surface import surface_base_of
from indexer.writer import LogWriter
from tests.logfactory import assistant, chunk, header, simple_turn, step_end, step_start, tool_call, turn_start, user


def session_events(turns: int) -> list[dict]:
    events: list[dict] = []
    for _ in range(turns):
        events += simple_turn(len(events), text=f"turn {len(events)}")
    return events


def split(events: list[dict], cuts: list[int]) -> list[list[dict]]:
    points = sorted({0, *cuts, len(events)})
    return [events[a:b] for a, b in zip(points, points[1:]) if b > a]


def resume(path: str, compression: Compression, log, seen: list[dict], **options):  # type: ignore[no-untyped-def]
    """Continue a read, giving it the surface of the events read so far."""
    return LogReader(path, compression, surface_base=surface_base_of(seen), **options).read(log.resume)


@pytest.mark.parametrize("compression", [Compression.ZSTD, Compression.NONE], ids=["zstd", "raw"])
def test_resuming_after_each_batch_equals_a_full_read(tmp_path: Path, compression: Compression) -> None:
    events = session_events(4)
    batches = split(events, [5, 9, 14, 20, 27, 30])
    hdr = header("grow")
    writer = LogWriter.in_root(tmp_path, hdr, compression)
    writer.create(hdr, batches[0])
    log = LogReader(writer.path, compression).read()
    seen = list(log.events)
    for batch in batches[1:]:
        writer.append(batch)
        assert log.resume is not None
        log = resume(writer.path, compression, log, seen)
        seen += log.events
    full = read_log(writer.path, compression)
    assert seen == full.events == events
    assert log.closers == full.closers
    assert log.resume is not None and full.resume is not None
    assert log.resume.offset == full.resume.offset == Path(writer.path).stat().st_size


def test_resume_reads_only_the_new_frames(tmp_path: Path) -> None:
    hdr = header("tail")
    writer = LogWriter.in_root(tmp_path, hdr)
    writer.create(hdr, session_events(50))
    first = LogReader(writer.path, Compression.ZSTD).read()
    writer.append(simple_turn(450))
    calls: list[int] = []
    resumed = resume(writer.path, Compression.ZSTD, first, first.events, sink=lambda evs: calls.append(len(evs)))
    assert sum(calls) == 9
    assert resumed.resume is not None and resumed.resume.next_seq == 459


def test_open_turn_closers_are_recomputed_after_resume(tmp_path: Path) -> None:
    hdr = header("open")
    writer = LogWriter.in_root(tmp_path, hdr)
    writer.create(hdr, [turn_start(0), user(1, "go"), step_start(2)])
    first = LogReader(writer.path, Compression.ZSTD).read()
    assert [c["type"] for c in first.closers] == ["step/end", "turn/end"]
    writer.append([chunk(3, "x"), assistant(4, calls=[("c1", "bash", "{}")], sources=[3]), tool_call(5, "c1")])
    resumed = resume(writer.path, Compression.ZSTD, first, first.events)
    full = read_log(writer.path)
    assert resumed.closers == full.closers
    assert [c["type"] for c in full.closers] == ["tool/result", "step/end", "turn/end"]
    writer.append([step_end(6)])
    again = resume(writer.path, Compression.ZSTD, resumed, [*first.events, *resumed.events])
    assert [c["type"] for c in again.closers] == ["turn/end"]


@pytest.mark.parametrize("compression", [Compression.ZSTD, Compression.NONE], ids=["zstd", "raw"])
def test_a_rewritten_file_is_detected(tmp_path: Path, compression: Compression) -> None:
    hdr = header("rewritten")
    writer = LogWriter.in_root(tmp_path, hdr, compression)
    writer.create(hdr, simple_turn(0, "original"))
    log = LogReader(writer.path, compression).read()
    writer.create(hdr, simple_turn(0, "replacement text that is longer"))
    with pytest.raises(ResumeMismatch):
        resume(writer.path, compression, log, log.events)


def test_a_truncated_file_is_detected(tmp_path: Path) -> None:
    hdr = header("shrunk")
    writer = LogWriter.in_root(tmp_path, hdr)
    writer.create(hdr, simple_turn())
    writer.append(simple_turn(9))
    log = LogReader(writer.path, Compression.ZSTD).read()
    writer.create(hdr, simple_turn())
    with pytest.raises(ResumeMismatch):
        resume(writer.path, Compression.ZSTD, log, log.events)


@given(cuts=st.lists(st.integers(min_value=1, max_value=35), max_size=8), compression=st.sampled_from(list(Compression)))
def test_any_batching_resumes_to_the_same_events(tmp_path_factory: pytest.TempPathFactory, cuts: list[int], compression: Compression) -> None:
    root = tmp_path_factory.mktemp("resume")
    events = session_events(4)
    batches = split(events, cuts)
    hdr = header("prop")
    writer = LogWriter.in_root(root, hdr, compression)
    writer.create(hdr, batches[0])
    log = LogReader(writer.path, compression).read()
    seen = list(log.events)
    for batch in batches[1:]:
        writer.append(batch)
        log = resume(writer.path, compression, log, seen)
        seen += log.events
    assert seen == events
