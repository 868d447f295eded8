"""The framing check's C accelerator (indexer/_linescan.c) counts exactly as its Python path."""

from __future__ import annotations

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


def test_the_scanner_uses_the_accelerator_when_built() -> None:
    assert records._framed_line_count is _linescan.framed_line_count


def test_any_buffer_is_read_and_a_region_without_a_final_line_feed_has_none() -> None:
    assert _linescan.framed_line_count(memoryview(b'{"a":1}\n{}\n')) == 2
    assert _linescan.framed_line_count(b"{}") == 0
    assert _linescan.framed_line_count(b"{}\n{}") == 0
    assert _linescan.framed_line_count(b"") == 0
