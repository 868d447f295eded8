"""Raw lines from the log's own bytes (indexer/_rawlines.c, indexer/rawlines.py) are the events' encoding.

A line is only copied when it is proven to be msgspec's encoding of what it
decodes to, and only for the very object decoded from it: the bytes a raw block
gets are those ``encode_items`` gives, whatever the spelling of the log.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer.layout import Compression
from indexer.packedrows import PackedRow, check_row
from indexer.projection import encode_items
from indexer.rawlines import item_lines
from indexer.reader import LogReader
from tests.logfactory import events_bytes, header, header_bytes, simple_turn, chunk, assistant, tool_call, tool_result

_rawlines = pytest.importorskip("indexer._rawlines", reason="the C accelerator is not built")
_switched_off = pytest.mark.skipif(os.environ.get("SESSIONQ_RAWLINES_C") == "0", reason="the accelerator is switched off: the reader encodes every event")

_encode = msgspec.json.encode
_decode = msgspec.json.decode
_decode_lines = msgspec.json.Decoder().decode_lines

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_PLAIN_INTS = st.integers(min_value=-(10**18) + 1, max_value=10**18 - 1)
_SCALARS = st.none() | st.booleans() | st.integers(min_value=-(10**20), max_value=10**20) | st.floats(allow_nan=False, allow_infinity=False) | _TEXT
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4), max_leaves=16)
# What msgspec always writes one way: no floats, integers of at most 18 digits.
_PLAIN_VALUES = st.recursive(
    st.none() | st.booleans() | _PLAIN_INTS | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=16,
)


def _spell_string(text: str, data: st.DataObject) -> str:
    """``text`` as a JSON string, each character spelled one of the ways JSON allows."""
    out = ['"']
    for char in text:
        code = ord(char)
        choice = data.draw(st.integers(min_value=0, max_value=5))
        if choice == 0 or (code >= 0x20 and char not in '"\\' and choice < 4):
            out.append(json.dumps(char, ensure_ascii=False)[1:-1])  # the usual spelling
        elif char == "/" and choice == 4:
            out.append("\\/")
        elif code > 0xFFFF:
            high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
            out.append(f"\\u{high:04x}\\u{low:04X}")
        else:
            out.append(f"\\u{code:04X}" if choice == 5 else f"\\u{code:04x}")
    out.append('"')
    return "".join(out)


def _spell(value: Any, data: st.DataObject, exact: bool = False) -> str:
    """``value`` as JSON text, with drawn white space, escapes, number forms and repeated keys
    (``exact``: an integer stays one, spelled as usual)."""
    space = data.draw(st.sampled_from(["", "", "", " "]))
    if isinstance(value, dict):
        pairs = [f"{_spell_string(key, data)}:{space}{_spell(item, data, exact)}" for key, item in value.items()]
        if pairs and data.draw(st.booleans()):
            key = next(iter(value))
            pairs.insert(0, f"{_spell_string(key, data)}:0")  # a repeated key: the decoder keeps the last
        return "{" + ("," + space).join(pairs) + "}"
    if isinstance(value, list):
        return "[" + ("," + space).join(_spell(item, data, exact) for item in value) + "]"
    if isinstance(value, str):
        return _spell_string(value, data)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        form = 0 if exact else data.draw(st.integers(min_value=0, max_value=3))
        if form == 1 and value == 0:
            return "-0"
        if form == 2:
            return f"{value}e0"
        return str(value)
    return data.draw(st.sampled_from([repr(value), _encode(value).decode(), f"{value:.17g}"]))


@given(_VALUES, st.data())
def test_a_line_proven_canonical_is_the_encoding_of_its_value(value: Any, data: st.DataObject) -> None:
    line = _spell(value, data).encode()
    try:
        decoded = _decode(line)
    except msgspec.DecodeError:
        return
    if _rawlines.canonical(line):
        assert _encode(decoded) == line


@given(_PLAIN_VALUES)
def test_msgspec_s_encoding_of_a_value_without_floats_is_proven(value: Any) -> None:
    assert _rawlines.canonical(_encode(value))


@pytest.mark.parametrize(
    "line",
    [
        b'{"a": 1}',
        b' {"a":1}',
        b'{"a":1}\r',
        b'{"a":"\\/"}',
        b'{"a":"\\u00e9"}',
        b'{"a":"\\u001F"}',
        b'{"a":"\\u0009"}',
        b'{"a":1.5}',
        b'{"a":1e2}',
        b'{"a":-0}',
        b'{"a":1234567890123456789}',
        b'{"a":1,"a":2}',
        b"[" * 65 + b"]" * 65,
        b"{" + b",".join(b'"k%d":0' % i for i in range(65)) + b"}",
        b'{"a":1}{"b":2}',
        b'{"a":tru}',
    ],
)
def test_other_spellings_are_not_proven(line: bytes) -> None:
    assert not _rawlines.canonical(line)


@pytest.mark.parametrize(
    "line",
    [b'{"a":"\\u001f\\u0000\\n\\t\\"\\\\"}', b'{"a":"\x7f"}', '{"a":"é☃😀"}'.encode(), b"[" * 64 + b"]" * 64, b'{"a":-123456789012345678,"b":[true,false,null]}'],
)
def test_msgspec_s_own_spellings_are_proven(line: bytes) -> None:
    assert _encode(_decode(line)) == line
    assert _rawlines.canonical(line)


def _row() -> PackedRow:
    """A packed row of three chunks, as the reader hands it on."""
    line = events_bytes([chunk(i, f"t{i}") for i in range(3)], pack=True).split(b"\n")[0]
    value = _decode(line)
    first, times = check_row(value)
    return PackedRow(value, first, times)


@settings(deadline=None)
@given(st.lists(st.dictionaries(_TEXT, _VALUES, max_size=4), min_size=1, max_size=8), st.data())
def test_joined_lines_are_the_items_encoding_whatever_the_items_and_base(events: list[dict[str, Any]], data: st.DataObject) -> None:
    region = b"".join(_spell(event, data).encode() + b"\n" for event in events)
    try:
        values = _decode_lines(region)
    except msgspec.DecodeError:
        return
    start = data.draw(st.integers(min_value=0, max_value=len(values)))
    items: list[Any] = []
    for value in values[start:]:
        kind = data.draw(st.sampled_from(["same", "same", "copy", "row"]))
        items.append(value if kind == "same" else copy.deepcopy(value) if kind == "copy" else _row())
    base = data.draw(st.sampled_from([start, start, start + 1, max(start - 1, 0)]))
    starts = _rawlines.line_starts(region)
    assert _rawlines.join_lines(items, values, base, region, starts, item_lines) == encode_items(items)


def test_a_proven_line_is_copied_and_an_unproven_one_encoded() -> None:
    region = b'{"a":1}\n{"b": 2}\n{"c":1.50}\n'
    values = _decode_lines(region)
    starts = _rawlines.line_starts(region)
    encoded: list[Any] = []

    def fallback(item: Any) -> bytes:
        encoded.append(item)
        return item_lines(item)

    assert _rawlines.join_lines(values, values, 0, region, starts, fallback) == b'{"a":1}\n{"b":2}\n{"c":1.5}\n'
    assert encoded == [{"b": 2}, {"c": 1.5}]


def _spelled_log(tmp_path: Path, data: st.DataObject) -> Path:
    """A log of varied events, each line spelled as drawn (packed rows as the harness packs them)."""
    events = simple_turn(0, "first")
    events += [chunk(9 + i, f"t/{i}\u00e9") for i in range(4)]
    events += [assistant(13, "x", calls=[("c1", "bash", '{"a": 1}')], sources=[9, 10, 11, 12])]
    events += [tool_call(14, "c1"), tool_result(15, "c1", "out\t\u2028", sources=[14])]
    events += [{"type": "hook/result", "seq": 16, "time": 7, "data": {"turn": 1, "durationMs": 2.5}}]
    lines = events_bytes(events, pack=data.draw(st.booleans())).split(b"\n")[:-1]
    spelled = [_spell(_decode(line), data, exact=True).encode() if data.draw(st.booleans()) else line for line in lines]
    return _write(tmp_path, b"".join(line + b"\n" for line in spelled))


def _write(tmp_path: Path, body: bytes) -> Path:
    """A zstd log of ``body`` (its header in a frame of its own, as the harness writes it)."""
    compress = zstandard.ZstdCompressor().compress
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(compress(header_bytes(header("raw"))) + compress(body))
    return path


@_switched_off
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_reader_s_raw_lines_are_its_batches_encoding_however_the_log_is_spelled(tmp_path: Path, data: st.DataObject) -> None:
    path = _spelled_log(tmp_path, data)
    batches: list[tuple[list[Any], bytes | None]] = []
    LogReader(path, Compression.ZSTD, sink=lambda items, lines=None: batches.append((list(items), lines)), packed_rows=True, raw_lines=True).read()
    plain: list[Any] = []
    LogReader(path, Compression.ZSTD, sink=plain.extend, packed_rows=True).read()
    assert encode_items([item for items, _ in batches for item in items]) == encode_items(plain)
    assert all(lines == encode_items(items) for items, lines in batches if lines is not None)
    assert any(lines is not None for _, lines in batches)


@_switched_off
def test_a_canonical_log_s_raw_lines_are_its_own_bytes(tmp_path: Path) -> None:
    events = [*simple_turn(0, "first"), *simple_turn(9, "second")]
    body = events_bytes(events, pack=False)
    path = _write(tmp_path, body)
    given: list[bytes] = []
    LogReader(path, Compression.ZSTD, sink=lambda items, lines=None: given.append(lines), packed_rows=True, raw_lines=True).read()
    assert None not in given
    assert b"".join(given) == body
