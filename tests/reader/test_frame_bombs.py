"""A frame that expands past the plaintext bound costs no more memory than the bound allows.

zstd regenerates 128 KiB from a four-byte block, so a frame of a few KB can
hold gigabytes; its header may declare its content size truly, falsely or not
at all.  Whatever it says, every decoding path (the reader's at-once fast path,
the exact streaming path, the torn-tail decode, header frames, resumed reads)
stops at the bound, and the frame fails before any of its plaintext reaches a
consumer that could buffer it.  Memory is measured with ``tracemalloc``
(every ``bytes`` the decoder returns is a traced allocation), with a 1 MiB
bound and 64 MiB frames, so the tests take a fraction of a second.
"""

from __future__ import annotations

import io
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import example, given
from hypothesis import strategies as st

from indexer import reader as reader_module
from indexer import zstdframes
from indexer.layout import Compression
from indexer.reader import LogReader, read_listing_header
from indexer.records import LogFormatError
from indexer.zstdframes import (
    FrameSpan,
    FrameTooLarge,
    TornFrame,
    decode_frame,
    decode_frame_at_once,
    decode_torn_frame,
    iter_region,
    scan_frames,
)
from readmodel.export.frames import buffer_source, plaintext_bound
from readmodel.projection.surface import surface_base_of
from tests.bombs import compressed_bomb, rle_frame
from tests.logfactory import (
    events_bytes,
    frame,
    header,
    header_bytes,
    simple_turn,
    write_frames,
)

BOUND = 1 << 20
BOMB = 64 << 20
# The decoder's output pieces are 1 MiB; the bound is 1 MiB: a few MiB of slack, far below the bomb.
PEAK_LIMIT = 6 << 20

BOMBS: dict[str, Callable[[], bytes]] = {
    "no-size-zeros": lambda: rle_frame(BOMB),
    "no-size-newlines": lambda: rle_frame(BOMB, b"\n"),
    "no-size-compressor": lambda: compressed_bomb(BOMB, b"\n"),
    "true-size": lambda: rle_frame(BOMB, b"\n", declared=BOMB),
    "false-size-small": lambda: rle_frame(BOMB, b"\n", declared=1000),
    "false-size-under-bound": lambda: rle_frame(BOMB, b"\n", declared=BOUND - 1),
    "false-size-over-window": lambda: rle_frame(BOMB, b"\n", declared=4 << 20),
    "false-size-zero": lambda: rle_frame(BOMB, b"\n", declared=0),
}
# Frames whose blocks the streaming decoder accepts past the bound: it checks a declared size only
# at the frame's end, and sizes its buffer by it only when it is below the window (1 MiB here).
PASS_THE_BOUND = {"no-size-zeros", "no-size-newlines", "no-size-compressor", "true-size", "false-size-over-window"}


@contextmanager
def traced_peak() -> Iterator[list[int]]:
    """The peak of traced memory inside the block (bytes), in a one-item list."""
    tracemalloc.start()
    result = [0]
    try:
        yield result
    finally:
        result[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


@pytest.fixture(params=sorted(BOMBS))
def bomb(request: pytest.FixtureRequest) -> tuple[str, bytes]:
    return request.param, BOMBS[request.param]()


def bomb_log(path: Path, bomb_frame: bytes) -> Path:
    """A well-formed log with one batch, then the bomb frame."""
    write_frames(path, [header_bytes(header("bomb")), events_bytes(simple_turn())])
    with open(path, "ab") as fh:
        fh.write(bomb_frame)
    return path


def test_the_at_once_decode_declines_a_bomb_without_holding_it(bomb: tuple[str, bytes]) -> None:
    _, data = bomb
    with traced_peak() as peak:
        assert decode_frame_at_once(data, BOUND) is None
    assert peak[0] < PEAK_LIMIT


def test_streaming_a_bomb_fails_before_handing_over_any_plaintext(bomb: tuple[str, bytes]) -> None:
    name, data = bomb
    received: list[int] = []
    with traced_peak() as peak, pytest.raises(LogFormatError) as failure:
        decode_frame(io.BytesIO(data), FrameSpan(0, len(data)), lambda piece: received.append(len(piece)), BOUND)
    assert peak[0] < PEAK_LIMIT
    assert received == []
    if name in PASS_THE_BOUND:
        assert isinstance(failure.value, FrameTooLarge)
        assert failure.value.message == f"frame at byte 0 holds more than {BOUND} bytes of plaintext"


@pytest.mark.parametrize("in_memory", [True, False], ids=["in-memory", "from-file"])
def test_a_log_ending_in_a_bomb_is_corrupt_and_its_read_stays_bounded(
    tmp_path: Path, bomb: tuple[str, bytes], in_memory: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, data = bomb
    path = bomb_log(tmp_path / "session.jsonl.zstd", data)
    if not in_memory:
        monkeypatch.setattr(reader_module, "_IN_MEMORY_MAX", 0)  # the path for logs too large to hold
    bomb_start = path.stat().st_size - len(data)
    with traced_peak() as peak, pytest.raises(LogFormatError) as failure:
        LogReader(path, Compression.ZSTD, max_frame_plaintext=BOUND).read()
    assert peak[0] < PEAK_LIMIT
    if name in PASS_THE_BOUND:
        assert failure.value.message == f"frame at byte {bomb_start} holds more than {BOUND} bytes of plaintext"


def test_a_bomb_appended_to_a_log_read_before_fails_the_resumed_read_within_bounds(tmp_path: Path) -> None:
    path = write_frames(tmp_path / "session.jsonl.zstd", [header_bytes(header("grows")), events_bytes(simple_turn())])
    first = LogReader(path, Compression.ZSTD, max_frame_plaintext=BOUND).read()
    assert first.resume is not None
    with open(path, "ab") as fh:
        fh.write(rle_frame(BOMB, b"\n"))
    resumed = LogReader(path, Compression.ZSTD, max_frame_plaintext=BOUND, surface_base=surface_base_of(first.events))
    with traced_peak() as peak, pytest.raises(FrameTooLarge):
        resumed.read(first.resume)
    assert peak[0] < PEAK_LIMIT


def test_a_torn_bomb_recovers_nothing_and_stays_bounded(tmp_path: Path) -> None:
    torn = rle_frame(BOMB, b"\n")[:-4]  # the last block's header is cut: an incomplete final frame
    path = bomb_log(tmp_path / "session.jsonl.zstd", torn)
    start = path.stat().st_size - len(torn)
    with open(path, "rb") as fh, traced_peak() as peak:
        assert list(scan_frames(fh))[-1] == TornFrame(start)
        assert decode_torn_frame(fh, TornFrame(start), path.stat().st_size, BOUND) == b""
    assert peak[0] < PEAK_LIMIT
    with traced_peak() as peak:
        log = LogReader(path, Compression.ZSTD, max_frame_plaintext=BOUND).read()
    assert peak[0] < PEAK_LIMIT
    assert log.torn is not None and log.torn.truncate_to == start and log.recovered == []


def test_a_bomb_in_the_header_frame_fails_reading_and_listing_within_bounds(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(rle_frame(BOMB, b"\n") + frame(events_bytes(simple_turn())))
    with traced_peak() as peak, pytest.raises(FrameTooLarge):
        LogReader(path, Compression.ZSTD, max_frame_plaintext=BOUND).read()
    assert peak[0] < PEAK_LIMIT
    with traced_peak() as peak, pytest.raises(LogFormatError, match=f"header frame failed validation: frame at byte 0 holds more than {BOUND}"):
        read_listing_header(path, Compression.ZSTD, max_frame_plaintext=BOUND)
    assert peak[0] < PEAK_LIMIT


# -- frames that declare no content size, or a false one, below the bound ------------------------


def declaring(frame_bytes: bytes, declared: int | None) -> bytes:
    """``frame_bytes`` (written without a content size) with a header that declares ``declared``."""
    assert frame_bytes[4] & 0xE3 == 0  # no content size, not single-segment, no dictionary
    if declared is None:
        return frame_bytes
    # Content-size flag 3 (an 8-byte field after the window descriptor).
    return frame_bytes[:4] + bytes([frame_bytes[4] | 0xC0, frame_bytes[5]]) + declared.to_bytes(8, "little") + frame_bytes[6:]


def streamed(data: bytes, bound: int) -> tuple[bytes, str | None]:
    pieces: list[bytes] = []
    try:
        decode_frame(io.BytesIO(data), FrameSpan(0, len(data)), pieces.append, bound)
    except LogFormatError as exc:
        return b"".join(pieces), exc.message
    return b"".join(pieces), None


def _walked_in_windows(data: bytes, bound: int) -> tuple[bytes, str | None]:
    """The plaintext and the error of the decode-ahead thread's walk over ``data`` (one log)."""
    pieces: list[bytes] = []
    try:
        for item in zstdframes._iter_region_windowed(io.BytesIO(data), 0, len(data), bound):
            assert not isinstance(item, TornFrame)
            pieces.append(item[0])
    except LogFormatError as exc:
        return b"".join(pieces), exc.message
    return b"".join(pieces), None


@pytest.mark.parametrize(
    ("declared", "decodes"),
    [(None, True), ("true", True), (0, False), (1, False), ("one less", False), ("one more", False), (1 << 40, False)],
    ids=["none", "true", "zero", "one", "one-less", "one-more", "a-terabyte"],
)
def test_a_frame_decodes_at_once_only_when_its_content_size_is_absent_or_true(declared: Any, decodes: bool) -> None:
    plaintext = b'{"type":"assistant/chunk","seq":1,"time":2,"data":{"text":"x"}}\n' * 3000
    base = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False).compress(plaintext)
    size = {"true": len(plaintext), "one less": len(plaintext) - 1, "one more": len(plaintext) + 1}.get(declared, declared)
    data = declaring(base, size)
    with traced_peak() as peak:
        at_once = decode_frame_at_once(data, BOUND)
        whole, error = streamed(data, BOUND)
        windowed = _walked_in_windows(data, BOUND)
    assert peak[0] < PEAK_LIMIT  # a terabyte declared is never allocated
    assert windowed == (whole, error)
    if decodes:
        assert at_once == whole == plaintext and error is None
    else:
        assert at_once is None and error is not None and "failed validation" in error


@given(
    plaintext=st.binary(max_size=3000) | st.sampled_from([b"\n" * 5000, b"ab" * 4000]),
    declared=st.sampled_from(["none", "true", "false"]),
    delta=st.integers(min_value=-100, max_value=100).filter(lambda value: value != 0),
    bound=st.sampled_from([0, 100, 4096, 1 << 20]),
)
# Eleven zero bytes make one compressed block: its header alone allows 128 KiB, over a bound of 100.
@example(plaintext=b"\x00" * 11, declared="none", delta=1, bound=100)
def test_at_once_equals_streaming_whatever_the_header_declares(plaintext: bytes, declared: str, delta: int, bound: int) -> None:
    base = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False).compress(plaintext)
    size = {"none": None, "true": len(plaintext), "false": max(0, len(plaintext) + delta)}[declared]
    data = declaring(base, size)
    whole, error = streamed(data, bound)
    at_once = decode_frame_at_once(data, bound)
    if at_once is not None:
        assert (at_once, error) == (whole, None)
    # The fast path declines only frames the streaming path fails, empty ones, and frames without
    # a content size whose block headers allow more than the bound (the streaming path measures
    # those without keeping their plaintext).
    measured = declared == "none" and plaintext_bound(buffer_source(data)) > bound
    if error is None and plaintext and declared != "false" and not measured:
        assert at_once == plaintext
    # Through the reader's frame walk, a window at a time (the decode-ahead thread's, which decodes
    # size-declaring frames together), in memory and from a file, the outcome is the stream's.
    assert _walked_in_windows(data, bound) == (whole, error)
    for in_memory in (True, False):
        pieces: list[bytes] = []
        try:
            for item in iter_region(io.BytesIO(data), 0, len(data), bound, data if in_memory else None):
                assert not isinstance(item, TornFrame)
                pieces.append(item[0])
            walked_error = None
        except LogFormatError as exc:
            walked_error = exc.message
        assert (b"".join(pieces), walked_error) == (whole, error)
