"""Workers' answers cross the pipe pickled with protocol 5 and arrive as they were sent."""

from __future__ import annotations

import pickle
from multiprocessing.reduction import ForkingPickler
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from indexer.ingest import LogOutcome
from indexer.preparation import ChunkResult, Prepared, Protocol5

_ARGS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6) | st.binary(max_size=6).map(bytearray),
    lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple),
    max_leaves=10,
)


def _carried(value: Any) -> Any:
    """``value`` after a pool's round trip (its default protocol)."""
    return pickle.loads(ForkingPickler.dumps(value))


@given(st.lists(st.tuples(st.sampled_from(["INSERT x", None]), _ARGS, st.booleans()), max_size=6))
def test_a_chunk_result_round_trips_with_its_types(calls: list[tuple[Any, ...]]) -> None:
    prepared = Prepared("p", 3, calls, LogOutcome((1, 2, None), 5, False), (bytearray(b"{}"), 1), warnings=["w"])
    answer = ChunkResult([prepared, Prepared("q", 4, failure=("corrupt", "c", "m"))], 0.25, 1024)
    back = _carried(answer)
    assert type(back) is ChunkResult and repr(back) == repr(answer)  # repr: bytearray vs bytes, tuple vs list


def test_a_chunk_result_is_pickled_with_protocol_5_inside() -> None:
    answer = ChunkResult([Prepared("p", 1, [("INSERT", (bytearray(b"ab"),), False)])], 0.0, 0)
    # BYTEARRAY8, the protocol-5 opcode, not bytearray's __reduce_ex__
    assert pickle.BYTEARRAY8 in ForkingPickler.dumps(answer).tobytes()


@given(_ARGS)
def test_protocol5_unpickles_as_the_value_itself(value: Any) -> None:
    back = _carried(Protocol5(("calls", value)))
    assert repr(back) == repr(("calls", value))
