"""Property tests: every fast path of the reader equals the slow path it shortcuts.

* the reader's fused line pass (plain runs, surface appends, packed rows)
  against the per-line path, on generated logs with semantic damage;
* packed-row expansion against the straightforward reference expansion;
* the in-memory frame walk against frame-by-frame streaming;
* header JSON via msgspec against the standard library;
* the surface fold's deferred tool-result digests against eager ones.
"""

from __future__ import annotations

import io
import json
from itertools import accumulate
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import readmodel.projection.surface as surface_module
from indexer import packedrows, zstdframes
from indexer.layout import Compression
from indexer.reader import LogReader
from indexer.records import LineScanner, LogFormatError, RecordError, decode_json_exact
from indexer.packedrows import PackedRow, check_row, expand_row
from indexer.projection import encode_items
from indexer.zstdframes import TornFrame, decode_frame, iter_region, scan_frames
from readmodel.core.jsvalues import MAX_SAFE_INTEGER, is_non_negative_safe_integer, is_number, is_safe_integer
from readmodel.projection.surface import SurfaceFold, SurfaceFoldError
from readmodel.projection.toolresults import tool_result_fingerprint
from readmodel.store.blocks import encode_events
from tests.logfactory import (
    assistant,
    chunk,
    events_bytes,
    header,
    header_bytes,
    simple_turn,
    step_end,
    step_start,
    tool_call,
    tool_result,
    turn_end,
    turn_start,
    user,
)
from tests.reader.paths import decode_paths

_encode = msgspec.json.Encoder().encode


# ---------------------------------------------------------------------------
# The reader: fused fast pass == per-line slow pass
# ---------------------------------------------------------------------------


def _base_events() -> list[dict[str, Any]]:
    events = simple_turn(0, "first")
    events += [turn_start(9, 2), user(10, "second"), step_start(11, 2)]
    events += [chunk(12 + i, f"t{i}", step=2) for i in range(4)]
    events += [assistant(16, "x", calls=[("c1", "bash", "{}")], step=2, turn=2, sources=[12, 13, 14, 15])]
    events += [tool_call(17, "c1", step=2, turn=2), tool_result(18, "c1", "out", step=2, turn=2, sources=[17])]
    events += [step_end(19, 2, 2), turn_end(20, 2)]
    events += [{"type": "request/header", "seq": 21, "time": 5, "data": {"header": {"config": {"provider": "p", "model": "m"}}}}]
    events += [{"type": "session/title", "seq": 22, "time": 6, "data": {"title": "t"}}]
    # A prune of the tool result: same data but the result content.
    prune = tool_result(23, "c1", "pruned", step=2, turn=2, msg_id="r18", sources=[18], surface_op={"op": "replace", "start": 18, "end": 18})
    return [*events, prune]


_MUTATIONS: list[tuple[str, Any]] = [
    ("time", 1.5),
    ("time", "1"),
    ("time", 2**60),
    ("time", 7.0),
    ("extra", 1),
    ("ignorable", True),
    ("ignorable", False),
    ("surfaceOp", "append"),
    ("surfaceOp", "replace"),
    ("surfaceOp", {"op": "replace", "start": 1, "end": 1}),
    ("sourceEventSeqs", []),
    ("sourceEventSeqs", [0, 0]),
    ("sourceEventSeqs", [1.0]),
    ("sourceEventSeqs", [999]),
    ("type", "steering/message"),
    ("type", "x-unknown"),
    ("type", "mode/set"),
    ("type", 5),
    ("data", None),
    ("data", {"turn": 1, "trigger": {"kind": "user"}}),
    ("data", {"turn": 1, "reason": {"kind": "error", "step": 1, "message": "m"}}),
    ("data", {"content": [], "source": {"kind": "user"}}),
    ("data", {"turn": 1, "step": 1, "callId": "c1", "content": [], "isError": False}),
    ("data", {"header": {"config": {"provider": "p"}}}),
    ("data", {"reason": "fallback", "header": {"config": {"provider": "p", "model": "m"}}}),
    ("message.role", "system"),
    ("message.id", ""),
    ("message.source", {"kind": "tool", "callId": "other"}),
    ("message.content", "text"),
    ("drop", "data"),
    ("drop", "time"),
]


def _mutate(event: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    event = json.loads(json.dumps(event))
    if key == "drop":
        event.pop(value, None)
    elif key.startswith("message."):
        data = event.get("data")
        message = data if event.get("type") == "user/message" else (data or {}).get("message")
        if isinstance(message, dict):
            message[key.split(".", 1)[1]] = value
    else:
        event[key] = value
    return event


def _read(
    path: Path,
    compression: Compression,
    fast: bool,
    monkeypatch: pytest.MonkeyPatch,
    in_memory: bool = True,
    prefetch: bool = False,
    packed: bool = False,
    raw: bool = False,
) -> Any:
    streamed: list[Any] = []

    def take(items: list[Any], lines: bytes | None = None) -> None:
        # raw: a batch's raw lines, when given, are exactly its items' encoding.
        assert lines is None or lines == encode_items(items)
        streamed.extend(items)

    with decode_paths(monkeypatch, fast=fast, in_memory=in_memory, prefetch=prefetch):
        try:
            # packed: a sink that takes packed rows whole (raw: and raw lines), as the indexer's projector does.
            reader = LogReader(path, compression, sink=take, packed_rows=True, raw_lines=raw) if packed else LogReader(path, compression)
            log = reader.read()
        except LogFormatError as exc:
            return ("error", exc.message, exc.kind, exc.stage)
    events = log.events
    if packed:
        events = []
        for item in streamed:
            if type(item) is PackedRow:
                members = item.members()
                assert item.encode() == encode_events(members)
                events += members
            else:
                events.append(item)
    return (
        _encode(events),
        _encode(log.recovered),
        _encode(log.closers),
        log.replacements,
        log.tail_replacements,
        None if log.resume is None else _encode(log.resume),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mutations=st.lists(st.tuples(st.integers(min_value=0, max_value=23), st.sampled_from(_MUTATIONS)), max_size=2),
    cut=st.integers(min_value=1, max_value=24),
    pack=st.booleans(),
    compression=st.sampled_from([Compression.ZSTD, Compression.NONE]),
)
def test_fused_pass_equals_per_line_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutations: list[tuple[int, tuple[str, Any]]], cut: int, pack: bool, compression: Compression
) -> None:
    events = _base_events()[:cut]
    for index, (key, value) in mutations:
        if index < len(events):
            events[index] = _mutate(events[index], key, value)
    body = events_bytes(events, pack=pack)
    plain = header_bytes(header("fast")) + body
    name = "session.jsonl.zstd" if compression is Compression.ZSTD else "session.jsonl"
    path = tmp_path / name
    if compression is Compression.ZSTD:
        frames = [header_bytes(header("fast")), *(line + b"\n" for line in body.split(b"\n")[:-1])]
        path.write_bytes(b"".join(zstandard.ZstdCompressor().compress(frame) for frame in frames))
    else:
        path.write_bytes(plain)
    slow = _read(path, compression, False, monkeypatch)
    assert _read(path, compression, True, monkeypatch) == slow
    assert _read(path, compression, True, monkeypatch, in_memory=False) == slow
    assert _read(path, compression, True, monkeypatch, in_memory=False, prefetch=True) == slow
    assert _read(path, compression, True, monkeypatch, packed=True) == slow
    assert _read(path, compression, True, monkeypatch, packed=True, raw=True) == slow


# ---------------------------------------------------------------------------
# Packed rows
# ---------------------------------------------------------------------------


def _reference_expand_row(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The expansion rules spelled out one by one (the pre-optimisation code)."""
    tag = row["type"]
    bad = RecordError(f"malformed {tag} storage row")
    if row.keys() != {"type", "seq0", "time0", "data"}:
        raise bad
    seq0, time0, data = row["seq0"], row["time0"], row["data"]
    if not is_non_negative_safe_integer(seq0) or not is_safe_integer(time0) or type(data) is not dict:
        raise bad
    if tag == "tool-call-chunks":
        if data.keys() not in ({"turn", "step", "index", "id", "dt", "args"}, {"turn", "step", "index", "id", "dt", "args", "name"}):
            raise bad
        if type(data["id"]) is not str or ("name" in data and type(data["name"]) is not str):
            raise bad
        fragments = data["args"]
    else:
        if data.keys() != {"turn", "step", "index", "dt", "texts"}:
            raise bad
        fragments = data["texts"]
    turn, step, index, gaps = data["turn"], data["step"], data["index"], data["dt"]
    if not (is_number(turn) and is_number(step) and is_number(index)):
        raise bad
    if not (type(fragments) is list and fragments and all(type(item) is str for item in fragments)):
        raise bad
    if type(gaps) is not list or len(gaps) != len(fragments) - 1 or not is_safe_integer(seq0 + len(fragments) - 1):
        raise bad
    if not all(is_safe_integer(gap) for gap in gaps):
        raise bad
    times = list(accumulate(gaps, initial=time0))
    if not all(is_safe_integer(time) for time in times):
        raise bad
    out = []
    for k, fragment in enumerate(fragments):
        if tag == "tool-call-chunks":
            chunk_value = {"type": "tool-call-delta", "index": index, "id": data["id"]}
            if "name" in data:
                chunk_value["name"] = data["name"]
            chunk_value["argumentsDelta"] = fragment
        else:
            chunk_value = {"type": "text-delta" if tag == "text-chunks" else "reasoning-delta", "index": index, "text": fragment}
        out.append({"type": "assistant/chunk", "seq": int(seq0) + k, "time": times[k], "data": {"turn": turn, "step": step, "chunk": chunk_value}})
    return out


_numbers = st.one_of(
    st.integers(min_value=-3, max_value=5),
    st.sampled_from([1.0, 2.5, -0.0, True, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, None, "1"]),
)


@st.composite
def _rows(draw: st.DrawFn) -> dict[str, Any]:
    tag = draw(st.sampled_from(sorted(packedrows.ROW_TAGS)))
    count = draw(st.integers(min_value=0, max_value=4))
    fragments: Any = draw(st.lists(st.one_of(st.text(max_size=3), st.sampled_from([1, None])), min_size=count, max_size=count))
    gaps: Any = draw(st.lists(_numbers, min_size=max(0, count - 1), max_size=max(0, count - 1)))
    if draw(st.booleans()):
        gaps = draw(st.lists(_numbers, max_size=4))
    data: dict[str, Any] = {"turn": draw(_numbers), "step": draw(_numbers), "index": draw(_numbers), "dt": gaps}
    if tag == "tool-call-chunks":
        data["id"] = draw(st.sampled_from(["c1", 5]))
        data["args"] = fragments
        if draw(st.booleans()):
            data["name"] = draw(st.sampled_from(["bash", None]))
    else:
        data["texts"] = fragments
    if draw(st.booleans()):
        data[draw(st.sampled_from(["extra", "turn"]))] = 1
    row: dict[str, Any] = {"type": tag, "seq0": draw(_numbers), "time0": draw(st.one_of(_numbers, st.integers(min_value=-(2**53), max_value=2**53))), "data": data}
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        row["seq"] = 0
    return row


@settings(max_examples=400, deadline=None)
@given(row=_rows())
def test_expand_row_equals_reference(row: dict[str, Any]) -> None:
    try:
        expected: Any = _encode(_reference_expand_row(row))
    except RecordError as exc:
        expected = ("error", str(exc))
    try:
        actual: Any = _encode(expand_row(row))
    except RecordError as exc:
        actual = ("error", str(exc))
    assert actual == expected


_edge_ints = st.sampled_from([0, 1, -1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2**63, -(2**63) - 1, 2**70])


@st.composite
def _common_rows(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """A row in the spelling the harness writes, and whether one value was then spelled otherwise."""
    tag = draw(st.sampled_from(sorted(packedrows.ROW_TAGS)))
    count = draw(st.integers(min_value=1, max_value=5))
    gaps = draw(st.lists(st.one_of(st.integers(min_value=0, max_value=50), _edge_ints), min_size=count - 1, max_size=count - 1))
    data: dict[str, Any] = {"turn": draw(st.sampled_from([1, 2.0])), "step": 1, "index": 0, "dt": gaps}
    fragments = draw(st.lists(st.text(max_size=3), min_size=count, max_size=count))
    if tag == "tool-call-chunks":
        data["id"] = "call-1"
        if draw(st.booleans()):
            data["name"] = "bash"
        data["args"] = fragments
    else:
        data["texts"] = fragments
    row: dict[str, Any] = {"type": tag, "seq0": draw(st.one_of(st.integers(min_value=0, max_value=99), _edge_ints)), "time0": draw(st.one_of(st.integers(min_value=0, max_value=10**13), _edge_ints)), "data": data}
    odd = draw(st.integers(min_value=0, max_value=12))
    if odd == 1:
        row["seq0"] = draw(st.sampled_from([3.0, True, "3", None]))
    elif odd == 2:
        row["time0"] = draw(st.sampled_from([5.0, False, -0.0, "5"]))
    elif odd == 3 and gaps:
        gaps[draw(st.integers(min_value=0, max_value=len(gaps) - 1))] = draw(st.sampled_from([1.0, True, None, "1"]))
    elif odd == 4:
        data[draw(st.sampled_from(["turn", "step", "index"]))] = draw(st.sampled_from([True, None, "1"]))
    elif odd == 5:
        fragments.append(draw(st.sampled_from([1, None, b"x"])))
    elif odd == 6:
        data[draw(st.sampled_from(["extra", "name", "id"]))] = draw(st.sampled_from([1, "x"]))
    elif odd == 7:
        del data[draw(st.sampled_from(sorted(data)))]
    elif odd == 8:
        row[draw(st.sampled_from(["seq", "extra"]))] = 0
    elif odd == 9:
        data["dt"] = gaps + [1]
    return row, odd > 0 and odd < 10


@settings(max_examples=600, deadline=None)
@given(drawn=_common_rows(), odd=_rows())
def test_the_c_row_check_answers_as_the_python_one_or_leaves_it_to_it(drawn: tuple[dict[str, Any], bool], odd: dict[str, Any]) -> None:
    c_check = packedrows._check_row_c
    if c_check is None:
        pytest.skip("indexer._linescan is not built (or switched off)")
    for row in (drawn[0], odd):
        try:
            expected: Any = packedrows.check_row_python(row)
        except RecordError as exc:
            expected = ("error", str(exc))
        answer = c_check(row)
        if answer is not None:
            assert answer == expected and type(answer[0]) is int and all(type(time) is int for time in answer[1])
        try:
            actual: Any = check_row(row)
        except RecordError as exc:
            actual = ("error", str(exc))
        assert actual == expected
    row, spelled_otherwise = drawn
    safe = all(-MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER for time in accumulate(row["data"]["dt"], initial=row["time0"])) if not spelled_otherwise else False
    if not spelled_otherwise and safe and 0 <= row["seq0"] <= MAX_SAFE_INTEGER - len(row["data"]["dt"]) and all(abs(gap) <= MAX_SAFE_INTEGER for gap in row["data"]["dt"]):
        assert c_check(row) is not None  # the common spelling takes the C check


@pytest.mark.parametrize(
    ("seq0", "time0", "gaps", "accepted"),
    [
        (MAX_SAFE_INTEGER, 0, [], True),  # the last safe seq
        (MAX_SAFE_INTEGER, 0, [1], False),  # a member past it
        (0, MAX_SAFE_INTEGER, [], True),
        (0, MAX_SAFE_INTEGER + 1, [], False),
        (0, -MAX_SAFE_INTEGER, [], True),
        (0, -MAX_SAFE_INTEGER - 1, [], False),
        (0, MAX_SAFE_INTEGER - 1, [1], True),  # a sum reaching the bound
        (0, MAX_SAFE_INTEGER, [1], False),  # and one past it
        (0, MAX_SAFE_INTEGER + 1, [-1], False),  # an unsafe start brought back
        (0, 0, [MAX_SAFE_INTEGER + 1, -2], False),  # an unsafe gap, a safe sum
        (0, 0, [2**64, -(2**64)], False),  # past 64 bits
    ],
)
def test_the_c_row_check_keeps_to_the_safe_range_at_its_edges(seq0: int, time0: int, gaps: list[int], accepted: bool) -> None:
    c_check = packedrows._check_row_c
    if c_check is None:
        pytest.skip("indexer._linescan is not built (or switched off)")
    row = {"type": "text-chunks", "seq0": seq0, "time0": time0, "data": {"turn": 1, "step": 1, "index": 0, "dt": gaps, "texts": ["x"] * (len(gaps) + 1)}}
    answer = c_check(row)
    assert (answer is not None) == accepted
    if accepted:
        assert answer == packedrows.check_row_python(row)
    else:
        with pytest.raises(RecordError):
            packedrows.check_row_python(row)


@settings(max_examples=400, deadline=None)
@given(row=_rows(), surrogate=st.booleans())
def test_a_packed_rows_lines_are_its_members_encoding(row: dict[str, Any], surrogate: bool) -> None:
    # PackedRow.encode writes the members' lines from the row (what the indexer stores as raw lines).
    texts = row["data"].get("texts")
    if surrogate and type(texts) is list and texts and type(texts[0]) is str:
        texts[0] += "\ud800"  # msgspec cannot encode it: the caller's fallback does
    try:
        first, times = check_row(row)
    except RecordError:
        return
    packed = PackedRow(row, first, times)
    assert repr(packed.members()) == repr(expand_row(row))  # repr: 1 and 1.0 differ
    lines = packed.encode()
    if lines is None:
        with pytest.raises(UnicodeEncodeError):
            _encode(expand_row(row))
    else:
        assert lines == encode_events(expand_row(row))


# ---------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------


def _walk(data: bytes, size: int, in_memory: bool, prefetch: bool = False) -> tuple[Any, ...]:
    pieces: list[bytes] = []
    end = 0
    torn = None
    threshold = zstdframes.PREFETCH_MIN_BYTES
    zstdframes.PREFETCH_MIN_BYTES = 0 if prefetch else threshold  # type: ignore[misc]
    try:
        for item in iter_region(io.BytesIO(data), 0, size, 1 << 16, data if in_memory else None):
            if isinstance(item, tuple):
                pieces.append(item[0])
                end = item[1]
            else:
                torn = item.start
        error = None
    except LogFormatError as exc:
        error = exc.message
    finally:
        zstdframes.PREFETCH_MIN_BYTES = threshold  # type: ignore[misc]
    return b"".join(pieces), end if error is None else None, torn, error


def _reference_walk(data: bytes, size: int) -> tuple[Any, ...]:
    """Frame after frame, as the reader streamed them before batching."""
    fh = io.BytesIO(data)
    pieces: list[bytes] = []
    end = 0
    torn = None
    try:
        for item in scan_frames(fh, 0, size):
            if isinstance(item, TornFrame):
                torn = item.start
                break
            decode_frame(fh, item, pieces.append, 1 << 16)
            end = item.end
        error = None
    except LogFormatError as exc:
        error = exc.message
    return b"".join(pieces), end if error is None else None, torn, error


@settings(max_examples=300, deadline=None)
@given(
    plaintexts=st.lists(st.binary(max_size=300), min_size=1, max_size=5),
    checksum=st.booleans(),
    cut=st.floats(min_value=0.0, max_value=1.0),
    flips=st.lists(st.tuples(st.floats(min_value=0.0, max_value=1.0, exclude_max=True), st.integers(min_value=1, max_value=255)), max_size=2),
)
def test_in_memory_frame_walk_equals_streaming(plaintexts: list[bytes], checksum: bool, cut: float, flips: list[tuple[float, int]]) -> None:
    data = bytearray(b"".join(zstandard.ZstdCompressor(write_checksum=checksum).compress(p) for p in plaintexts))
    for position, mask in flips:
        data[int(len(data) * position)] ^= mask
    blob = bytes(data[: int(len(data) * cut) or len(data)])
    # Plaintext may be delivered in other batches; its concatenation, the final end, the torn tail and the error must agree.
    expected = _reference_walk(blob, len(blob))
    assert _walk(blob, len(blob), True) == expected
    assert _walk(blob, len(blob), False) == expected
    assert _walk(blob, len(blob), False, prefetch=True) == expected


@settings(max_examples=300, deadline=None)
@given(
    plaintexts=st.lists(st.binary(max_size=300), min_size=1, max_size=12),
    sized=st.lists(st.booleans(), min_size=12, max_size=12),
    checksum=st.booleans(),
    cut=st.floats(min_value=0.0, max_value=1.0),
    flips=st.lists(st.tuples(st.floats(min_value=0.0, max_value=1.0, exclude_max=True), st.integers(min_value=1, max_value=255)), max_size=2),
    window=st.integers(min_value=8, max_value=400),
    batch=st.integers(min_value=1, max_value=700),
)
def test_the_windowed_frame_walk_equals_streaming(
    plaintexts: list[bytes], sized: list[bool], checksum: bool, cut: float, flips: list[tuple[float, int]], window: int, batch: int
) -> None:
    """The decode-ahead thread's walk (a window of frames at a time, sized frames decoded together) delivers
    what the frame-by-frame walk does, whatever the windows, batches, sizes declared and damage."""
    data = bytearray(
        b"".join(zstandard.ZstdCompressor(write_checksum=checksum, write_content_size=known).compress(p) for p, known in zip(plaintexts, sized))
    )
    for position, mask in flips:
        data[int(len(data) * position)] ^= mask
    blob = bytes(data[: int(len(data) * cut) or len(data)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(zstdframes, "WINDOW_BYTES", window)
        patch.setattr(zstdframes, "REGION_BATCH_BYTES", batch)
        walked = _walk(blob, len(blob), False, prefetch=True)
    assert walked == _reference_walk(blob, len(blob))


def test_the_windowed_frame_walk_decodes_sized_frames_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """Frames that declare their sizes are decoded a batch at a time, not frame by frame."""
    plaintexts = [bytes([65 + n % 26]) * (100 + n) for n in range(40)]
    blob = b"".join(zstandard.ZstdCompressor().compress(p) for p in plaintexts)
    calls: list[int] = []
    real = zstdframes._decode_together

    def counted(window: bytes, spans: list[int]) -> list[bytes] | None:
        calls.append(len(spans) // 3)
        return real(window, spans)

    monkeypatch.setattr(zstdframes, "_decode_together", counted)
    monkeypatch.setattr(zstdframes, "REGION_BATCH_BYTES", 1000)
    items = list(zstdframes._iter_region_windowed(io.BytesIO(blob), 0, len(blob), 1 << 16))
    assert b"".join(item[0] for item in items if isinstance(item, tuple)) == b"".join(plaintexts)
    assert items[-1] == (items[-1][0], len(blob))
    assert max(calls) >= 8 and sum(calls) == 40  # about 1,000 bytes of plaintext per call


# ---------------------------------------------------------------------------
# Header JSON
# ---------------------------------------------------------------------------

_json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(alphabet="ab-0:,[ \u00e9\U0001f600", max_size=6),
    ),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(alphabet="ab-0", max_size=3), children, max_size=3)),
    max_leaves=8,
)


def _stdlib_exact(line: bytes) -> Any:
    return json.loads(line.decode("utf-8", "replace"), parse_int=lambda token: -0.0 if token == "-0" else int(token))


@settings(max_examples=400, deadline=None)
@given(value=_json_values, spacing=st.sampled_from([(",", ":"), (", ", ": ")]), tweak=st.sampled_from(["", "-0", "neg-zero-list"]))
def test_header_json_fast_path_equals_stdlib(value: Any, spacing: tuple[str, str], tweak: str) -> None:
    text = json.dumps(value, separators=spacing, ensure_ascii=False)
    if tweak == "-0":
        text = text.replace("0", "-0", 1) if "0" in text and not text.startswith('"') else text
    elif tweak == "neg-zero-list":
        text = f"[{text}, -0]"
    line = text.encode("utf-8", "surrogatepass")
    try:
        expected: Any = _encode(_stdlib_exact(line)), repr(_stdlib_exact(line))
    except ValueError:
        with pytest.raises(RecordError):
            decode_json_exact(line)
        return
    actual = decode_json_exact(line)
    assert (_encode(actual), repr(actual)) == expected


# ---------------------------------------------------------------------------
# Deferred tool-result digests
# ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(st.tuples(st.sampled_from(["result", "prune", "bad-prune", "odd-result", "user"]), st.integers(min_value=0, max_value=20)), max_size=25),
    pending_max=st.sampled_from([0, 1, 3, 1024]),
)
def test_deferred_digests_equal_eager_ones(steps: list[tuple[str, int]], pending_max: int, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[dict[str, Any]] = []
    results: list[int] = []
    for kind, pick in steps:
        seq = len(events)
        if kind == "user":
            events.append(user(seq, "u"))
        elif kind in ("result", "odd-result"):
            event = tool_result(seq, f"c{seq}", "out")
            if kind == "odd-result":
                event["data"]["message"]["content"][0]["meta"] = {"n": 1.5e16, "z": -0.0}
            events.append(event)
            results.append(seq)
        elif results:
            target = results[pick % len(results)]
            original = next(e for e in events if e["seq"] == target)
            event = json.loads(json.dumps(original))
            event.update(seq=seq, surfaceOp={"op": "replace", "start": target, "end": target}, sourceEventSeqs=[target])
            event["data"]["message"]["content"][0]["content"] = [{"type": "text", "text": "pruned"}]
            if kind == "bad-prune":
                event["data"]["turn"] = 2
            events.append(event)

    def fold_all(eager: bool) -> Any:
        with monkeypatch.context() as patch:
            patch.setattr(surface_module, "_PENDING_DIGESTS_MAX", -1 if eager else pending_max)
            fold = SurfaceFold(track_history=False)
            outcome: list[Any] = []
            for event in events:
                try:
                    replacement = fold.apply(event)
                    outcome.append(None if replacement is None else replacement.shadowed_seqs)
                except SurfaceFoldError as exc:
                    outcome.append(exc.message)
                    break
            if fold.error is None:
                nodes, digests = fold.state()
                outcome.append((nodes, sorted(digests.items())))
                for seq, digest in digests.items():
                    data = next(e for e in events if e["seq"] == seq)["data"]
                    assert digest == tool_result_fingerprint(data)
            return outcome

    assert fold_all(eager=False) == fold_all(eager=True)


# -- the block decoder's line structure -------------------------------------------------------


class _SlowScanner(LineScanner):
    """A scanner whose block decoder always declines: every line takes the slow path."""

    __slots__ = ()

    def _fast_lines(self, region: bytes, line_count: int) -> int:
        return 0


def _scan(region: bytes, fast: bool) -> tuple[Any, ...]:
    """What a scanner hands over and concludes for one block of lines."""
    delivered: list[Any] = []
    scanner = (LineScanner if fast else _SlowScanner)(lambda events, from_row: delivered.append((events, from_row)))
    try:
        scanner.feed(region)
    except LogFormatError as error:
        return ("error", str(error))
    return (delivered, scanner.issue, scanner.committed, scanner.next_seq)


_GAPS = [b"\n", b"\n", b"\n", b"", b" ", b"\n\n", b"\n \n", b" \n", b"\n\t"]


@settings(deadline=None, max_examples=300)
@given(
    pieces=st.lists(st.tuples(st.sampled_from(["event", "split", "turn_end"]), st.sampled_from(_GAPS)), min_size=1, max_size=8),
)
def test_a_block_is_only_fast_when_each_line_holds_one_value(pieces: list[tuple[str, bytes]]) -> None:
    """Two values on a line, blank lines and values across lines are the slow path's to judge."""
    out = b""
    for seq, (kind, gap) in enumerate(pieces):
        if kind == "turn_end":
            text = json.dumps({"type": "turn/end", "seq": seq, "time": 1, "data": {"turn": 1, "reason": "completed"}}, separators=(",", ":"))
        else:
            text = json.dumps({"type": "session/title", "seq": seq, "time": 1, "data": {"title": "t"}}, separators=(",", ":"))
            if kind == "split":
                text = text.replace('"data":', '"data":\n', 1)
        out += text.encode() + gap
    region = out if out.endswith(b"\n") else out + b"\n"
    assert _scan(region, fast=True) == _scan(region, fast=False)


def test_two_events_on_one_line_balanced_by_a_blank_line_are_a_defect() -> None:
    first = b'{"type":"session/title","seq":0,"time":1,"data":{"title":"a"}}'
    second = b'{"type":"session/title","seq":1,"time":1,"data":{"title":"b"}}'
    delivered, issue, committed, next_seq = _scan(first + second + b"\n\n", fast=True)
    assert delivered == [] and next_seq == 0 and committed == 0
    assert issue is not None and "unparsable" in issue


def test_a_prefetched_region_stops_its_thread_when_the_reader_stops_early() -> None:
    import threading

    frames = b"".join(zstandard.ZstdCompressor().compress(b"x" * 1000 + b"\n") for _ in range(64))
    threads = threading.active_count()
    region = zstdframes.prefetched(iter(range(10_000)), 2)
    assert next(region) == 0
    region.close()  # the reader's `closing`: the producer is stopped and joined
    assert threading.active_count() == threads
    before = zstdframes.PREFETCH_MIN_BYTES
    zstdframes.PREFETCH_MIN_BYTES = 0  # type: ignore[misc]
    try:
        fh = io.BytesIO(frames)
        items = list(iter_region(fh, 0, len(frames), 1 << 16, None))
    finally:
        zstdframes.PREFETCH_MIN_BYTES = before  # type: ignore[misc]
    assert b"".join(item[0] for item in items) == (b"x" * 1000 + b"\n") * 64
    assert items[-1][1] == len(frames) and threading.active_count() == threads
