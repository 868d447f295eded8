"""Structural frame scanning and bounded frame decoding."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import zstandard

from indexer.layout import Compression
from indexer.reader import LogReader, read_log
from indexer.records import LogFormatError
from indexer.zstdframes import FrameSpan, FrameTooLarge, TornFrame, decode_frame, scan_frames
from tests.logfactory import events_bytes, frame, header, header_bytes, simple_turn, write_frames

H = header("z")


def scan(data: bytes) -> list:
    return list(scan_frames(io.BytesIO(data)))


def test_concatenated_frames_are_found_with_their_boundaries() -> None:
    a, b, c = frame(b"one\n"), frame(b"two\n" * 1000), frame(b"")
    spans = scan(a + b + c)
    assert spans == [FrameSpan(0, len(a)), FrameSpan(len(a), len(a) + len(b)), FrameSpan(len(a) + len(b), len(a + b + c))]


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 6, 9, 12])
def test_an_incomplete_final_frame_is_torn_wherever_it_is_cut(cut: int) -> None:
    first = frame(b"header\n")
    second = frame(b"x" * 5000)
    assert scan(first + second[:cut]) == [FrameSpan(0, len(first)), TornFrame(len(first))]
    assert scan(first + second[:-1])[-1] == TornFrame(len(first))


def test_reserved_descriptor_bits_and_block_types_are_corrupt() -> None:
    good = bytearray(frame(b"hello\n"))
    bad_bits = bytearray(good)
    bad_bits[4] |= 0x08
    with pytest.raises(LogFormatError, match="reserved frame header bits"):
        scan(bytes(bad_bits))
    reserved_block = b"\x28\xb5\x2f\xfd" + bytes([0x20, 0x05]) + bytes([0b110, 0, 0])
    with pytest.raises(LogFormatError, match="reserved block type"):
        scan(reserved_block)


def test_skippable_frames_are_rejected_like_any_bad_magic() -> None:
    skippable = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"abcd"
    with pytest.raises(LogFormatError, match="magic at byte 0"):
        scan(skippable)


def test_a_frame_without_checksum_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl.zstd"
    events = simple_turn()
    path.write_bytes(frame(header_bytes(H), checksum=False) + frame(events_bytes(events), checksum=False))
    assert read_log(path).events == events


def test_a_checksum_mismatch_in_a_middle_frame_is_corrupt(tmp_path: Path) -> None:
    events = simple_turn()
    path = write_frames(tmp_path / "session.jsonl.zstd", [header_bytes(H), events_bytes(events[:4]), events_bytes(events[4:])])
    data = bytearray(path.read_bytes())
    middle_end = len(frame(header_bytes(H))) + len(frame(events_bytes(events[:4])))
    data[middle_end - 1] ^= 0xFF  # last byte of the middle frame's checksum
    path.write_bytes(bytes(data))
    with pytest.raises(LogFormatError, match="failed validation"):
        read_log(path)


def test_a_record_may_span_frame_boundaries(tmp_path: Path) -> None:
    payload = events_bytes(simple_turn())
    path = write_frames(tmp_path / "session.jsonl.zstd", [header_bytes(H), payload[:37], payload[37:]])
    assert [e["seq"] for e in read_log(path).events] == list(range(9))


def test_the_header_frame_must_hold_exactly_one_line(tmp_path: Path) -> None:
    path = write_frames(tmp_path / "session.jsonl.zstd", [header_bytes(H) + events_bytes(simple_turn())])
    with pytest.raises(LogFormatError, match="exactly one header line"):
        read_log(path)
    path.write_bytes(b"")
    with pytest.raises(LogFormatError, match="header-less"):
        read_log(path)


def test_a_frame_larger_than_the_plaintext_bound_fails_without_buffering(tmp_path: Path) -> None:
    big = b'{"type":"x"}\n' * 10000
    path = write_frames(tmp_path / "session.jsonl.zstd", [header_bytes(H), big])
    received: list[int] = []
    span = scan(path.read_bytes())[1]
    with open(path, "rb") as fh, pytest.raises(FrameTooLarge):
        decode_frame(fh, span, lambda piece: received.append(len(piece)), max_plaintext=4096)
    assert sum(received) <= 4096 + (1 << 17)  # at most one decoder block past the bound
    with pytest.raises(FrameTooLarge):
        LogReader(path, Compression.ZSTD, max_frame_plaintext=4096).read()


def test_the_torn_frame_yields_its_complete_records(tmp_path: Path) -> None:
    events = simple_turn()
    plaintext = events_bytes(events[4:], pack=False)
    torn = zstandard.ZstdCompressor(write_checksum=True).compress(plaintext)[:-4]  # checksum missing
    path = write_frames(tmp_path / "session.jsonl.zstd", [header_bytes(H), events_bytes(events[:4])], tail=torn)
    log = read_log(path)
    assert log.torn is not None and log.torn.recovered == len(log.recovered)
    assert [*log.events, *log.recovered] == events[: 4 + len(log.recovered)]
