"""The framing check's C accelerator (indexer/_linescan.c) counts exactly as its Python path."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexer import records
from indexer.records import _framed_line_count_python

_linescan = pytest.importorskip("indexer._linescan", reason="the C accelerator is not built")

# Regions that end with a line feed, made mostly of the bytes the check looks at.
_REGIONS = st.binary(max_size=60).map(lambda data: data + b"\n") | st.lists(
    st.sampled_from([b"{", b"}", b"\n", b"a", b"{}", b"}\n{", b'{"a":1}']), max_size=30
).map(lambda parts: b"".join(parts) + b"\n")


@given(_REGIONS)
def test_the_c_count_equals_the_python_count(region: bytes) -> None:
    assert _linescan.framed_line_count(region) == _framed_line_count_python(region)


@given(st.lists(st.binary(max_size=20).filter(lambda b: b"\n" not in b), min_size=1, max_size=20))
def test_framed_objects_count_as_their_lines(bodies: list[bytes]) -> None:
    region = b"".join(b"{" + body + b"}\n" for body in bodies)
    assert _linescan.framed_line_count(region) == _framed_line_count_python(region) == len(bodies)


@pytest.mark.skipif(os.environ.get("SESSIONQ_LINESCAN_C") == "0", reason="the accelerator is switched off")
def test_the_scanner_uses_the_accelerator_when_built() -> None:
    assert records._framed_line_count is _linescan.framed_line_count


def test_any_buffer_is_read_and_a_region_without_a_final_line_feed_has_none() -> None:
    assert _linescan.framed_line_count(memoryview(b'{"a":1}\n{}\n')) == 2
    assert _linescan.framed_line_count(b"{}") == 0
    assert _linescan.framed_line_count(b"{}\n{}") == 0
    assert _linescan.framed_line_count(b"") == 0


def _frames(pieces: list[bytes], checksum: bool, sized: bool) -> bytes:
    import zstandard

    compressor = zstandard.ZstdCompressor(level=1, write_checksum=checksum, write_content_size=sized)
    return b"".join(compressor.compress(piece) for piece in pieces)


@given(
    st.lists(st.binary(max_size=300) | st.just(b"a" * 200_000), min_size=1, max_size=3),
    st.booleans(),
    st.booleans(),
    st.data(),
)
def test_the_c_frame_walk_equals_the_python_walk(pieces: list[bytes], checksum: bool, sized: bool, data: st.DataObject) -> None:
    from indexer.zstdframes import frame_end, frame_end_python

    log = bytearray(_frames(pieces, checksum, sized))
    for _ in range(data.draw(st.integers(0, 3))):  # damage: flipped bytes anywhere
        at = data.draw(st.integers(0, len(log) - 1))
        log[at] = data.draw(st.integers(0, 255))
    log = log[: data.draw(st.integers(0, len(log)))]  # and a torn end
    blob = bytes(log)
    pos = 0
    while pos < len(blob):
        try:
            expected: Any = frame_end_python(blob, pos, len(blob))
        except records.LogFormatError as exc:
            expected = str(exc)
        got = _linescan.frame_end(blob, pos, len(blob))
        assert got == expected or (got == -2 and isinstance(expected, str))
        try:
            assert frame_end(blob, pos, len(blob)) == expected
        except records.LogFormatError as exc:
            assert str(exc) == expected
        if not isinstance(expected, int) or expected < 0:
            break
        pos = expected


def test_the_c_frame_walk_leaves_errors_and_bad_calls_to_the_python_walk() -> None:
    assert _linescan.frame_end(b"nope!", 0, 5) == -2  # a bad magic: Python raises its message
    assert _linescan.frame_end(b"\x28\xb5\x2f\xfd\x18", 0, 5) == -2  # reserved header bits
    assert _linescan.frame_end(b"\x28\xb5", 0, 2) == -1  # torn
    assert _linescan.frame_end(b"\x28\xb5", 0, 9) == -2  # size past the data: not indexed
    assert _linescan.frame_end(b"\x28\xb5", -1, 2) == -2


_JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6) | st.sampled_from(["\ud800", "a\udfff", "é"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4) | st.lists(inner, max_size=3).map(tuple),
    max_leaves=12,
)


@given(_JSON_LIKE)
def test_a_value_json_exact_accepts_decodes_back_equal(value: Any) -> None:
    import msgspec

    if _linescan.json_exact(value):
        assert msgspec.json.decode(msgspec.json.encode(value)) == value


def test_json_exact_accepts_json_values_and_refuses_the_rest() -> None:
    import msgspec

    assert _linescan.json_exact([{"a": [1, -2.5, None, True, "é", {"b": 2**63 - 1}]}])
    refused = [float("inf"), float("nan"), (1,), "\ud800", {"\udc00": 1}, {1: 2}, msgspec.Raw(b"1"), 2**64, b"x", _deep(600)]
    assert [_linescan.json_exact(value) for value in refused] == [False] * len(refused)


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


@given(st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=30), st.data())
def test_lines_at_copies_exactly_the_chosen_lines(lines: list[bytes], data: st.DataObject) -> None:
    blob = b"".join(line + b"\n" for line in lines)
    positions = sorted(data.draw(st.sets(st.integers(0, len(lines) - 1), min_size=1)))
    assert _linescan.lines_at(blob, positions) == b"".join(lines[at] + b"\n" for at in positions)


def test_lines_at_declines_positions_it_cannot_take() -> None:
    assert _linescan.lines_at(b"a\nb\n", [1, 0]) is None  # not ascending
    assert _linescan.lines_at(b"a\nb\n", [2]) is None  # past the last line
    assert _linescan.lines_at(b"a\nb\n", [-1]) is None
    assert _linescan.lines_at(b"a\nb\n", [True]) is None  # not an exact int
    assert _linescan.lines_at(b"a\nb\n", []) == b""
