"""Edge cases of the record layer: line framing, unsafe row gaps, nesting too deep for msgspec."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.records import LineScanner, RecordError, _framed_line_count, decode_json, decode_record
from indexer.packedrows import expand_row
from readmodel.core.jsvalues import MAX_SAFE_INTEGER


def _reference_framing(region: bytes) -> int:
    """The block decoder's line check as first written: two counts over the region."""
    line_count = region.count(b"\n")
    return line_count if region.endswith(b"}\n") and region.count(b"}\n{") == line_count - 1 else 0


@settings(max_examples=2000, deadline=None)
@given(body=st.lists(st.sampled_from([b"{", b"}", b"\n", b" ", b"x", b"}\n{", b"\r"]), max_size=12))
def test_line_framing_equals_counting(body: list[bytes]) -> None:
    region = b"".join(body) + b"\n"
    assert _framed_line_count(region) == _reference_framing(region)


def test_a_row_gap_must_itself_be_safe() -> None:
    """format-spec §4.2 rule 8: every gap is a safe integer, whatever the running sums."""
    row = {"type": "text-chunks", "seq0": 0, "time0": 1, "data": {"turn": 1, "step": 1, "index": 0, "dt": [-(MAX_SAFE_INTEGER + 1)], "texts": ["a", "b"]}}
    with pytest.raises(RecordError):
        expand_row(row)
    row["data"]["dt"] = [-MAX_SAFE_INTEGER]
    assert [member["time"] for member in expand_row(row)] == [1, 1 - MAX_SAFE_INTEGER]


@pytest.mark.parametrize("lazy", [False, True])
def test_a_line_too_deep_for_msgspec_is_unparsable_not_a_crash(lazy: bool) -> None:
    deep = b"[" * 5000 + b"]" * 5000
    with pytest.raises(RecordError):
        decode_json(deep)
    line = b'{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"provider":"p","model":"m"},"tools":' + deep + b"}}}"
    with pytest.raises(RecordError):
        decode_record(line, lazy)
    delivered: list[object] = []
    scanner = LineScanner(lambda events, from_row: delivered.append(events), lazy_payloads=lazy)
    scanner.feed(line + b"\n")
    assert delivered == [] and scanner.issue == "unparsable committed event at line 2"
