"""Raw-block ends found in C-level passes (indexer.blockcuts) equal the line-by-line walk."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexer.blockcuts import Cut, cut_blocks, cut_blocks_python
from readmodel.store.blocks import BLOCK_BYTES, BLOCK_EVENTS


def _walk(data: bytes, max_lines: int, max_bytes: int) -> tuple[list[Cut], int, int, int]:
    """The reference: one step per line, closing a block after the line that fills it."""
    cuts: list[Cut] = []
    start = position = count = size = 0
    while (end := data.find(b"\n", position)) >= 0:
        size += end - position
        count += 1
        position = end + 1
        if count >= max_lines or size >= max_bytes:
            cuts.append((start, end, count))
            start, count, size = position, 0, 0
    return cuts, start, count, size


def _data(lengths: list[int]) -> bytes:
    return b"".join(b"x" * length + b"\n" for length in lengths)


@given(st.lists(st.integers(0, 40), max_size=300), st.integers(1, 20), st.integers(1, 200))
def test_cuts_equal_the_line_by_line_walk(lengths: list[int], max_lines: int, max_bytes: int) -> None:
    data = _data(lengths)
    assert cut_blocks(data, max_lines, max_bytes) == cut_blocks_python(data, max_lines, max_bytes) == _walk(data, max_lines, max_bytes)


@given(st.lists(st.sampled_from([0, 1, 900, 4000, 70_000, BLOCK_BYTES - 1, BLOCK_BYTES]), max_size=700))
def test_cuts_equal_the_walk_at_the_real_limits(lengths: list[int]) -> None:
    data = _data(lengths)
    assert cut_blocks(data) == cut_blocks_python(data) == _walk(data, BLOCK_EVENTS, BLOCK_BYTES)


def test_every_cut_is_a_slice_of_whole_lines() -> None:
    data = _data([3] * (2 * BLOCK_EVENTS + 5))
    cuts, start, count, size = cut_blocks(data)
    assert [(data[a:b].count(b"\n") + 1, n) for a, b, n in cuts] == [(BLOCK_EVENTS, BLOCK_EVENTS)] * 2
    assert (count, size, data[start:]) == (5, 15, b"xxx\n" * 5)


def test_empty_data_has_no_blocks() -> None:
    assert cut_blocks(b"") == cut_blocks_python(b"") == ([], 0, 0, 0)


@pytest.mark.skipif(os.environ.get("SESSIONQ_LINESCAN_C") == "0", reason="the accelerator is switched off")
def test_the_c_cuts_are_used_when_built() -> None:
    from indexer import blockcuts

    linescan = pytest.importorskip("indexer._linescan", reason="the C accelerator is not built")
    assert blockcuts._in_c is linescan.cut_blocks
