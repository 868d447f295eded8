"""Run members packed by the C accelerator (readmodel/core/_runpack.c) equal the Python paths' bytes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from readmodel.store import blocks
from readmodel.store.blocks import pack_run_times_python, pack_run_types_python, unpack_run_times, unpack_run_types

_runpack = pytest.importorskip("readmodel.core._runpack", reason="the C accelerator is not built")

_TYPES = st.sampled_from(["assistant/chunk", "step/start", "step/end", "request/header", "x" * 40, "é" * 200, "t" * 70_000, ""])
_BOUNDARIES = [0, 1, 31, 32, 127, 128, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, 2**53 - 1]
_TIMES = st.integers(-(2**53) + 1, 2**53 - 1) | st.sampled_from(_BOUNDARIES + [-value for value in _BOUNDARIES])


@given(st.lists(_TYPES, min_size=1, max_size=40) | st.lists(st.text(max_size=5), min_size=1, max_size=40))
def test_c_types_equal_the_python_bytes(types: list[str]) -> None:
    packed = _runpack.pack_run_types(types)
    assert type(packed) is bytearray and packed == pack_run_types_python(types)
    assert unpack_run_types(packed) == types


@given(st.lists(_TIMES, min_size=1, max_size=40) | st.lists(st.integers(0, 300), min_size=1, max_size=70_000 // 1000))
def test_c_times_equal_the_python_bytes(times: list[int]) -> None:
    packed = _runpack.pack_run_times(times)
    assert type(packed) is bytearray and packed == pack_run_times_python(times)
    assert unpack_run_times(packed) == times


def test_long_runs_take_the_wider_array_headers() -> None:
    for count in (15, 16, 65_535, 65_536):
        times = list(range(count))
        assert _runpack.pack_run_times(times) == pack_run_times_python(times)
    types = [str(at % 2) for at in range(40_000)]  # 40,000 groups: 80,000 array members
    assert _runpack.pack_run_types(types) == pack_run_types_python(types)


@pytest.mark.parametrize(
    "value",
    [("a", "b"), ["a", 1], ["\ud800"], [1.0], [True], [2**63], (1, 2), [], [-1, 2**63 - 1]],
    ids=["tuple", "mixed", "surrogate", "float", "bool", "past-int64", "int-tuple", "empty", "delta-overflow"],
)
def test_inputs_outside_the_common_case_go_to_the_python_path(value: Any) -> None:
    packer = _runpack.pack_run_types if value and type(value[0]) is str else _runpack.pack_run_times
    assert packer(value) is None


def test_the_public_packers_use_the_python_path_for_what_c_declines() -> None:
    assert blocks.pack_run_times([1.5, 2]) == pack_run_times_python([1.5, 2])
    with pytest.raises(UnicodeEncodeError):
        blocks.pack_run_types(["\ud800"])


@given(
    st.lists(st.text(max_size=8) | st.sampled_from(['"', "\\", "\n", "é", "\x00"]), min_size=1, max_size=20),
    st.sampled_from(["text-chunks", "reasoning-chunks", "tool-call-chunks"]),
    st.integers(0, 2**53 - 30),
    st.data(),
)
def test_packed_row_lines_written_in_c_equal_the_python_interleaving(fragments: list[str], tag: str, seq0: int, data: st.DataObject) -> None:
    from indexer.packedrows import PackedRow, check_row

    body: dict[str, Any] = {"turn": data.draw(st.sampled_from([1, 2.5])), "step": 0, "index": 2}
    if tag == "tool-call-chunks":
        body.update({"id": "c", "name": "bash", "args": fragments})
    else:
        body["texts"] = fragments
    body["dt"] = data.draw(st.lists(st.integers(-(2**40), 2**40), min_size=len(fragments) - 1, max_size=len(fragments) - 1))
    row = {"type": tag, "seq0": seq0, "time0": data.draw(st.integers(-(2**52), 2**52)), "data": body}
    try:
        first, times = check_row(row)
    except Exception:  # noqa: BLE001 - times outside the safe range: not a row to encode
        return
    packed = PackedRow(row, first, times)
    from indexer import packedrows

    in_c = packed.encode()  # the default when the accelerator is built
    assert in_c is not None

    saved = packedrows._member_lines
    packedrows._member_lines = None
    try:
        assert packed.encode() == in_c
    finally:
        packedrows._member_lines = saved


def test_member_lines_declines_what_is_not_a_row() -> None:
    from indexer._linescan import member_lines

    assert member_lines(b"h", b'"a"\n', 0, [1, 2]) is None  # fewer fragments than times
    assert member_lines(b"h", b'"a"\n"b"\n', 0, [1]) is None  # more
    assert member_lines(b"h", b'"a"\n', 0, [1.0]) is None
    assert member_lines(b"h", b'"a"\n', -1, [1]) is None
    assert member_lines(b"h", b'"a"\n', 0, [2**64]) is None
    assert member_lines(b"h", b'"a"\n', 5, [-7]) == b'{"type":"assistant/chunk","seq":5,"time":-7h"a"}}}\n'


@given(
    st.lists(st.integers(-5, 40), max_size=12)
    | st.builds(lambda first, count: list(range(first, first + count)), st.integers(-(2**63), 2**63), st.integers(1, 30))
    | st.lists(st.sampled_from([0, 1, 2, 1.0, True, 2**64]), max_size=4)
)
def test_int_run_is_exactly_a_list_of_consecutive_exact_ints(values: list[Any]) -> None:
    fits = all(type(value) is int and -(2**63) <= value < 2**63 for value in values)
    consecutive = bool(values) and fits and values == list(range(values[0], values[0] + len(values)))
    assert _runpack.int_run(values) == ((values[0], len(values)) if consecutive else None)


def test_int_run_refuses_what_is_not_a_list() -> None:
    assert _runpack.int_run((1, 2)) is None
    assert _runpack.int_run([]) is None
