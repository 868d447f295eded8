"""Property tests: truncated or damaged logs only ever fail with documented errors.

A truncated log reads as a prefix of the original events plus synthetic
closers; a log with flipped bytes either reads or fails with
:class:`LogFormatError` — never any other exception.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexer.layout import Compression
from indexer.reader import LogReader
from indexer.records import LogFormatError
from tests.logfactory import assistant, chunk, header, simple_turn, step_start, tool_call, turn_start, user
from tests.logfactory import write_log as write_session


def original_events() -> list[dict]:
    events = simple_turn(0, "first prompt") + simple_turn(9, "second prompt")
    events += [turn_start(18, 3), user(19, "third"), step_start(20, 3)]
    events += [chunk(21 + i, f"t{i}", step=1) for i in range(5)]
    events[-5:] = [dict(e, data=dict(e["data"], turn=3)) for e in events[-5:]]
    events += [assistant(26, calls=[("c1", "bash", '{"cmd":"ls"}')], turn=3, sources=[21, 22, 23, 24, 25]), tool_call(27, "c1", turn=3)]
    return events


EVENTS = original_events()


@pytest.fixture(scope="module", params=[Compression.ZSTD, Compression.NONE], ids=["zstd", "raw"])
def pristine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Compression, bytes]:
    root = tmp_path_factory.mktemp("pristine")
    hdr = header("fuzz")
    batches = [EVENTS[:4], EVENTS[4:12], EVENTS[12:21], EVENTS[21:]]
    path = write_session(root, hdr, batches, request.param)
    return request.param, path.read_bytes()


def _read(tmp: Path, compression: Compression, data: bytes):
    path = tmp / ("session.jsonl.zstd" if compression is Compression.ZSTD else "session.jsonl")
    path.write_bytes(data)
    return LogReader(path, compression).read()


@given(fraction=st.floats(min_value=0.0, max_value=1.0))
def test_truncation_yields_a_prefix_plus_closers(tmp_path_factory: pytest.TempPathFactory, pristine: tuple[Compression, bytes], fraction: float) -> None:
    compression, data = pristine
    cut = int(len(data) * fraction)
    try:
        log = _read(tmp_path_factory.mktemp("cut"), compression, data[:cut])
    except LogFormatError as exc:
        # Only a cut inside the header can make the log unreadable.
        assert "header" in exc.message
        return
    stored = [*log.events, *log.recovered]
    assert stored == EVENTS[: len(stored)]
    for offset, closer in enumerate(log.closers):
        assert closer["seq"] == len(stored) + offset
    if cut == len(data):
        assert log.torn is None and len(stored) == len(EVENTS)


@given(position=st.floats(min_value=0.0, max_value=1.0, exclude_max=True), mask=st.integers(min_value=1, max_value=255))
def test_flipped_bytes_never_raise_undocumented_errors(tmp_path_factory: pytest.TempPathFactory, pristine: tuple[Compression, bytes], position: float, mask: int) -> None:
    compression, data = pristine
    index = int(len(data) * position)
    damaged = bytearray(data)
    damaged[index] ^= mask
    try:
        log = _read(tmp_path_factory.mktemp("flip"), compression, bytes(damaged))
    except LogFormatError:
        return
    assert all(isinstance(event, dict) for event in [*log.events, *log.recovered, *log.closers])
