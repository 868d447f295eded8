"""Lazy request-header payloads (``LogReader(lazy_payloads=True)``) change nothing but their type.

With the option, a request header's ``system`` and ``tools`` may stay
``msgspec.Raw``.  The properties checked here:

* line by line: whenever :func:`decode_request_header_lazily` accepts a line,
  the event encodes to the line itself, and it equals the ordinary decoding
  (values and their exact types) once the raw payloads are decoded; with a
  cold and a warm payload cache alike (the splice path and the full path);
* whole reads: the same events (as the index stores them: the projection's
  own encoder), recovered tails, closers, replacements, resume points and
  errors with and without the option, on generated logs full of damaged
  request headers, on every decode path (block, line by line, streamed,
  resumed, torn tail), and on the shared corpus.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer import records
from indexer.layout import Compression, detect_compression, discover
from indexer.reader import LogReader, inspect_view
from indexer.records import LogFormatError, RecordError, decode_json, decode_record, decode_request_header_lazily
from indexer.writer import LogWriter
from readmodel.store.blocks import encode_events
from readmodel.projection.surface import surface_base_of
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT, require_corpus
from tests.logfactory import header, header_bytes, events_bytes, simple_turn, tool_call, turn_start, user, step_start
from tests.reader.paths import decode_paths

_encode = msgspec.json.encode


# ---------------------------------------------------------------------------
# Exact comparison
# ---------------------------------------------------------------------------


def _materialize(value: Any) -> Any:
    """``value`` with every ``msgspec.Raw`` decoded (as the ordinary path would have it)."""
    if type(value) is msgspec.Raw:
        return decode_json(bytes(value))
    if type(value) is dict:
        return {key: _materialize(item) for key, item in value.items()}
    if type(value) is list:
        return [_materialize(item) for item in value]
    return value


def _typed(value: Any) -> Any:
    """A comparable form that tells 1, 1.0, True and -0.0 apart and keeps key order."""
    if type(value) is dict:
        return ("dict", [(key, _typed(item)) for key, item in value.items()])
    if type(value) is list:
        return ("list", [_typed(item) for item in value])
    if type(value) is float:
        return ("float", repr(value))
    assert type(value) is not msgspec.Raw
    return (type(value).__name__, value)


def _same_event(lazy: Any, ordinary: Any) -> bool:
    return _typed(_materialize(lazy)) == _typed(ordinary)


# ---------------------------------------------------------------------------
# Generated request-header lines
# ---------------------------------------------------------------------------

_TOOLS: list[Any] = [
    {
        "name": "bash",
        "description": "Run a shell command in the workspace and return its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer", "minimum": 1}}, "required": ["command"]},
    },
    {"name": "read", "description": "Read a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
]
_TOOLS_JSON = _encode(_TOOLS)
_TOOLS_TAIL = _TOOLS_JSON[:-1]  # "[...": a variant appends one more element, then "]"
_SYSTEM_TEXT = "You are a coding agent. Work in the user's repository; keep changes small and explain them clearly."
_SYSTEM_JSON = _encode(_SYSTEM_TEXT)

_CONFIGS = [
    b'{"provider":"p","model":"m"}',
    b'{"provider":"p","model":"m","reasoningEffort":"high","maxTokens":1000}',
    b'{"provider":"p","model":"m","temperature":0.7}',
    b'{"model":"m","provider":"p"}',
    b'{"provider":"p"}',
    b'{"provider":"","model":"m"}',
    b'{"provider":"p","model":"m","reasoningEffort":""}',
    b'{"provider":"p","model":"m","temperature":-0}',
    b'{"provider":"p","model":"m","temperature":1.50}',
    b'{"provider": "p","model":"m"}',
    b'{"provider":"p","model":"m","n":1e999}',
    b'{"provider":"p","model":"\\u006d"}',
    b'{"provider":"p","model":"\\ud800"}',
    b'{"provider":"p","model":"m\xff"}',
    b"null",
    b"[]",
    b'"config"',
]
_ADAPTER_DEFAULTS = [
    None,
    b'{"reasoningEffort":true}',
    b'{"maxTokens":true}',
    b'{"reasoningEffort":true,"maxTokens":true}',
    b'{"reasoningEffort":false}',
    b'{"other":true}',
    b"{}",
    b"[]",
    b"null",
]
_SYSTEMS = [
    None,
    _SYSTEM_JSON,
    _encode("Vous êtes un agent — soyez précis. 日本語のテキストも含みます。" * 2),
    b'""',
    b'"s"',
    b"null",
    b'["block one","block two"]',
    b"12",
    _SYSTEM_JSON[:-1] + b'\\n\\t\\"quoted\\" \\\\ back\\u001f"',  # canonical escapes
    _SYSTEM_JSON[:-1] + b' \\u0041"',  # an escape msgspec would not write
    _SYSTEM_JSON[:-1] + b' \\/"',
    _SYSTEM_JSON[:-1] + b' \\u000a"',
    _SYSTEM_JSON[:-1] + b' \\ud83d\\ude00"',  # a surrogate pair: msgspec writes the character
    _SYSTEM_JSON[:-1] + b' \\ud800"',  # a lone surrogate
    _SYSTEM_JSON[:-1] + b' \\udc00x"',
    _SYSTEM_JSON[:-1] + b' \xff\xfe"',  # invalid UTF-8
    _SYSTEM_JSON[:-1] + b' \xed\xa0\x80"',  # an encoded surrogate
    _SYSTEM_JSON[:-1] + b' \x7f"',
    _SYSTEM_JSON[:-1] + b' \x01"',  # a raw control character
]
_TOOLS_VARIANTS = [
    None,
    _TOOLS_JSON,
    b"[]",
    b"null",
    b'{"bash":{}}',
    b'"tools"',
    _TOOLS_TAIL + b',{"n":1e999}]',
    _TOOLS_TAIL + b',{"n":-1e999}]',
    _TOOLS_TAIL + b',{"n":1e308}]',
    _TOOLS_TAIL + b',{"n":-0}]',
    _TOOLS_TAIL + b',{"n":-0.0}]',
    _TOOLS_TAIL + b',{"n":1.50}]',
    _TOOLS_TAIL + b',{"n":1E5}]',
    _TOOLS_TAIL + b',{"n":1e5}]',
    _TOOLS_TAIL + b',{"n":0.1}]',
    _TOOLS_TAIL + b',{"n":100000000000000000000}]',
    _TOOLS_TAIL + b',{"n":' + b"7" * 400 + b"}]",
    _TOOLS_TAIL + b',{"n":-' + b"7" * 400 + b"}]",
    _TOOLS_TAIL + b',{"n":1.' + b"5" * 400 + b"}]",
    _TOOLS_TAIL + b',{"n":1,"n":2}]',
    _TOOLS_TAIL + b', {"n":1}]',
    _TOOLS_TAIL + b',{"n" :1}]',
    _TOOLS_TAIL + b',{"n":"\\u00e9"}]',
    _TOOLS_TAIL + b',{"n":"\xc3\xa9"}]',
    _TOOLS_TAIL + b',{"n":"\\ud800"}]',
    _TOOLS_TAIL + b',{"n":"\xff"}]',
    _TOOLS_TAIL + b',{"n":true,"m":null,"k":false}]',
    _TOOLS_TAIL + b"," + b"[" * 200 + b"]" * 200 + b"]",
    _TOOLS_TAIL + b"," + b"[" * 2000 + b"]" * 2000 + b"]",
    _TOOLS_TAIL + b',{"n":1}',  # unterminated
    _TOOLS_TAIL + b',{"n":01}]',
    _TOOLS_TAIL + b',{"n":NaN}]',
]
_REASONS = [None, b'"initial"', b'"resume"', b'"change"', b'"fallback"', b'"fall\\u0062ack"', b"1", b"null", b'{"kind":"x"}', b'"initial" ']
_EXTRAS = [None, ("header", b'"messagePrefix":"x"'), ("data", b'"extra":1'), ("event", b'"ignorable":true'), ("event", b'"ignorable":false'), ("event", b'"surfaceOp":"append"')]


def _object(members: list[tuple[bytes, bytes]]) -> bytes:
    return b"{" + b",".join(b'"' + key + b'":' + value for key, value in members) + b"}"


@st.composite
def _header_lines(draw: st.DrawFn, seq: int = 7) -> bytes:
    """A request-header line: mostly canonical, with zero or more defects or oddities."""
    def mostly(usual: Any, others: list[Any]) -> Any:
        # Each part is usually well-formed, so that many whole lines are.
        return usual if draw(st.integers(min_value=0, max_value=99)) < 88 else draw(st.sampled_from(others))

    seq_text = mostly(b"%d" % seq, [b"%d.0" % seq, b"%de0" % seq, b'"%d"' % seq, b"-0", b"%d " % seq])
    time_text = mostly(b"1000", [b"-5", b"0", b"-0", b"1.5", b"1e3", b"7.0", b'"1"', b"9007199254740993", b"1" + b"0" * 400, b"null"])
    config = mostly(_CONFIGS[0], _CONFIGS)
    defaults = mostly(None, _ADAPTER_DEFAULTS)
    system = mostly(_SYSTEM_JSON, _SYSTEMS)
    tools = mostly(_TOOLS_JSON, _TOOLS_VARIANTS)
    reason = mostly(b'"initial"', _REASONS)
    header_members = [(b"config", config)]
    if defaults is not None:
        header_members.append((b"adapterDefaults", defaults))
    if system is not None:
        header_members.append((b"system", system))
    if tools is not None:
        header_members.append((b"tools", tools))
    data_members = [(b"header", b"")]
    if reason is not None:
        data_members.append((b"reason", reason))
    event_members = [(b"type", b'"request/header"'), (b"seq", seq_text), (b"time", time_text), (b"data", b"")]
    extra = mostly(None, _EXTRAS)
    if extra is not None:
        where, member = extra
        key, value = member[1:].split(b'":', 1)
        target = {"header": header_members, "data": data_members, "event": event_members}[where]
        target.insert(draw(st.integers(min_value=1, max_value=len(target))), (key, value))
    # Reordered or duplicated keys (the type stays first: the line must still look like a header).
    for members in (header_members, data_members, event_members[1:]):
        if len(members) > 1 and draw(st.integers(min_value=0, max_value=19)) == 0:
            members.reverse()
        if draw(st.integers(min_value=0, max_value=29)) == 0:
            members.insert(draw(st.integers(min_value=0, max_value=len(members))), draw(st.sampled_from(members)))
    header_json = _object(header_members)
    data_json = _object([(key, header_json if key == b"header" else value) for key, value in data_members])
    line = _object([(event_members[0][0], event_members[0][1])] + [(key, data_json if key == b"data" else value) for key, value in event_members[1:]])
    if draw(st.integers(min_value=0, max_value=19)) == 0:
        # White space after a random colon or comma.
        marks = [index for index, byte in enumerate(line) if byte in b":,"]
        at = draw(st.sampled_from(marks)) + 1
        line = line[:at] + draw(st.sampled_from([b" ", b"\t", b"\r", b"  "])) + line[at:]
    if draw(st.integers(min_value=0, max_value=19)) == 0:
        # A random byte anywhere (never a line feed, which would split the line).
        at = draw(st.integers(min_value=0, max_value=len(line) - 1))
        byte = draw(st.integers(min_value=0, max_value=255).filter(lambda b: b != 0x0A))
        line = line[:at] + bytes([byte]) + line[at + 1 :]
    return line


def _ordinary(line: bytes) -> Any:
    try:
        return ("ok", decode_record(line))
    except RecordError as exc:
        return ("error", type(exc).__name__, str(exc))


def _lazy(line: bytes) -> Any:
    try:
        return ("ok", decode_record(line, lazy=True))
    except RecordError as exc:
        return ("error", type(exc).__name__, str(exc))


def _check_line(line: bytes) -> Any:
    """Check one line's lazy decoding against the ordinary one; returns the lazy result (or None)."""
    event = decode_request_header_lazily(line)
    ordinary = _ordinary(line)
    lazy = _lazy(line)
    if event is None:
        assert lazy == ordinary
        return None
    assert _encode(event) == line
    assert ordinary[0] == "ok" and lazy[0] == "ok"
    (value,), from_row = ordinary[1]
    assert not from_row
    assert _same_event(event, value)
    assert _encode(value) == line  # the bytes the index stores, either way
    assert _encode(lazy[1][0]) == b"[" + line + b"]" and lazy[1][1] is False
    return event


def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_PAYLOADS", records._PayloadCache(max_entries=256, max_bytes=16 << 20, max_entry_bytes=1 << 20))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=_header_lines(), warm=st.booleans())
def test_a_lazy_line_equals_its_ordinary_decoding(line: bytes, warm: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        _fresh_cache(patch)
        if warm:
            # The canonical payloads are known: lines holding them take the splice path.
            assert _check_line(b'{"type":"request/header","seq":1,"time":2,"data":{"header":{"config":{"provider":"p","model":"m"},"system":%s,"tools":%s},"reason":"initial"}}' % (_SYSTEM_JSON, _TOOLS_JSON)) is not None
        cold = _check_line(line)  # the payloads' first sight: the full path
        again = _check_line(line)  # now known: the splice path
        assert (cold is None) == (again is None)
        if cold is not None:
            assert _typed(_materialize(cold)) == _typed(_materialize(again))


def test_canonical_headers_are_lazy_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_cache(monkeypatch)
    calls: list[bytes] = []
    spliced = records._spliced
    monkeypatch.setattr(records, "_spliced", lambda line: calls.append(line) or spliced(line))
    line = b'{"type":"request/header","seq":3,"time":4,"data":{"header":{"config":{"provider":"p","model":"m"},"adapterDefaults":{"reasoningEffort":true},"system":%s,"tools":%s},"reason":"initial"}}'
    line %= (_SYSTEM_JSON, _TOOLS_JSON)
    line = line.replace(b'"model":"m"}', b'"model":"m","reasoningEffort":"low"}', 1)
    first = _check_line(line)
    assert first is not None and type(first["data"]["header"]["tools"]) is msgspec.Raw
    assert records._spliced(line) is not None  # known payloads: no scan of them
    for variant in (line.replace(b',"reason":"initial"', b""), line.replace(b',"tools":' + _TOOLS_JSON, b""), line.replace(b'"system":' + _SYSTEM_JSON + b",", b"")):
        event = _check_line(variant)
        assert event is not None and records._spliced(variant) is not None
    assert calls


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b'{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"},"tools":[%s]}}}' % b",".join([b'{"n":1e999}'] * 9), id="1e999"),
        pytest.param(b'{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"},"tools":[%s]}}}' % b",".join([b'{"n":-0}'] * 9), id="-0"),
        pytest.param(b'{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"},"system":"%s \\u0041"}}}' % (b"x" * 80), id="escape"),
        pytest.param(b'{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"},"system":"%s \xff"}}}' % (b"x" * 80), id="invalid-utf8"),
        pytest.param(b'{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"},"tools":[%s]}}}' % b",".join([b'{"n":1.50}'] * 9), id="1.50"),
    ],
)
def test_non_canonical_payloads_are_decoded(line: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """msgspec skips these as Raw, but decodes them to other values (or refuses them)."""
    _fresh_cache(monkeypatch)
    assert decode_request_header_lazily(line) is None
    assert decode_request_header_lazily(line) is None
    _check_line(line)


# ---------------------------------------------------------------------------
# Whole reads
# ---------------------------------------------------------------------------


def _outcome(path: Path, compression: Compression, lazy: bool, monkeypatch: pytest.MonkeyPatch, fast: bool = True, in_memory: bool = True) -> Any:
    with decode_paths(monkeypatch, fast=fast, in_memory=in_memory):
        try:
            log = LogReader(path, compression, lazy_payloads=lazy).read()
        except LogFormatError as exc:
            return ("error", exc.message, exc.kind, exc.stage), None, None
    everything = [*log.events, *log.recovered, *log.closers]
    summary = (
        encode_events(log.events),
        encode_events(log.recovered),
        encode_events(log.closers),
        log.replacements,
        log.tail_replacements,
        None if log.resume is None else _encode(log.resume),
        None if log.torn is None else (log.torn.truncate_to, log.torn.recovered),
    )
    # The inspect view, value for value (its events one by one, as the projection encodes them, above).
    view = inspect_view(log)
    assert view["events"] == everything
    return summary, _typed(view["session"]), [_typed(_materialize(event)) for event in everything]


def _base_events() -> list[dict[str, Any]]:
    events = simple_turn(0, "first")  # seqs 0-8
    events += [turn_start(9, 2), user(10, "second LONE"), step_start(11, 2), tool_call(12, "c1", turn=2)]
    return events


def _ordinary_lines(events: list[dict[str, Any]], first_seq: int, pack: bool) -> list[bytes]:
    """``events`` renumbered from ``first_seq``, as stored lines (a lone surrogate escape in one of them)."""
    renumbered = [dict(event, seq=first_seq + index) for index, event in enumerate(events)]
    body = events_bytes(renumbered, pack=pack).replace(b"LONE", b"\\ud800 lone")
    return body.split(b"\n")[:-1]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    where=st.lists(st.integers(min_value=0, max_value=13), min_size=1, max_size=3),
    compression=st.sampled_from([Compression.ZSTD, Compression.NONE]),
    pack=st.booleans(),
    grouping=st.integers(min_value=1, max_value=4),
    torn=st.booleans(),
)
def test_a_lazy_read_equals_an_ordinary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: st.DataObject, where: list[int], compression: Compression, pack: bool, grouping: int, torn: bool
) -> None:
    # Request headers inserted among ordinary events, each given the seq its position needs.
    events = _base_events()
    lines: list[bytes] = []
    seq = previous = 0
    for position in [*sorted(where), len(events)]:
        if position > previous:
            lines += _ordinary_lines(events[previous:position], seq, pack)
            seq += position - previous
            previous = position
        if position < len(events):
            lines.append(data.draw(_header_lines(seq)))
            seq += 1
    hdr = header_bytes(header("lazy"))
    path = tmp_path / ("session.jsonl.zstd" if compression is Compression.ZSTD else "session.jsonl")
    batches = [b"".join(line + b"\n" for line in lines[i : i + grouping]) for i in range(0, len(lines), grouping)]
    if compression is Compression.ZSTD:
        frames = [zstandard.ZstdCompressor().compress(part) for part in [hdr, *batches]]
        if torn and len(frames) > 2:
            frames[-1] = frames[-1][: len(frames[-1]) // 2]  # a torn final frame: its complete lines are recovered
        path.write_bytes(b"".join(frames))
    else:
        body = hdr + b"".join(batches)
        path.write_bytes(body[: len(body) - 5] if torn else body)
    ordinary = _outcome(path, compression, False, monkeypatch)
    for fast in (True, False):
        for in_memory in (True, False):
            assert _outcome(path, compression, True, monkeypatch, fast=fast, in_memory=in_memory) == ordinary


def _request_header(seq: int, system: str, tools: list[Any]) -> dict[str, Any]:
    return {"type": "request/header", "seq": seq, "time": 1000 + seq, "data": {"header": {"config": {"provider": "p", "model": "m"}, "system": system, "tools": tools}, "reason": "initial"}}


@pytest.mark.parametrize("compression", [Compression.ZSTD, Compression.NONE], ids=["zstd", "raw"])
def test_resumed_lazy_reads_store_what_a_cold_read_stores(tmp_path: Path, compression: Compression) -> None:
    rng = random.Random(7)
    events: list[dict[str, Any]] = []
    for turn in range(4):
        events.append(_request_header(len(events), _SYSTEM_TEXT + f" turn {turn}", _TOOLS[: 1 + turn % 2]))
        events += [dict(event, seq=len(events) + i) for i, event in enumerate(simple_turn(0, f"t{turn}"))]
    hdr = header("resumed-lazy")
    writer = LogWriter.in_root(tmp_path, hdr, compression)
    cuts = sorted(rng.sample(range(1, len(events)), 5))
    batches = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)])]
    writer.create(hdr, batches[0])
    log = LogReader(writer.path, compression, lazy_payloads=True).read()
    seen = list(log.events)
    for batch in batches[1:]:
        writer.append(batch)
        assert log.resume is not None
        log = LogReader(writer.path, compression, lazy_payloads=True, surface_base=surface_base_of(seen)).read(log.resume)
        seen += log.events
    cold_lazy = LogReader(writer.path, compression, lazy_payloads=True).read()
    cold = LogReader(writer.path, compression).read()
    assert encode_events(seen) == encode_events(cold_lazy.events) == encode_events(cold.events)
    assert sum(type(event["data"]["header"].get("tools")) is msgspec.Raw for event in seen if event["type"] == "request/header") == 4
    assert [_typed(_materialize(event)) for event in seen] == [_typed(event) for event in cold.events]


# ---------------------------------------------------------------------------
# The shared corpus
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("root", [ZSTD_ROOT, SYNTHETIC_ROOT], ids=["corpus", "synthetic"])
def test_corpus_logs_read_the_same_with_lazy_payloads(root: Path) -> None:
    require_corpus()
    compression = detect_compression(root)
    transcripts = discover(root, compression).transcripts
    assert transcripts
    raw_tools = 0
    for ref in transcripts:
        outcomes = []
        for lazy in (False, True):
            try:
                log = LogReader(ref.path, compression, lazy_payloads=lazy).read()
            except LogFormatError as exc:
                outcomes.append(("error", exc.message, exc.kind, exc.stage))
                continue
            everything = [*log.events, *log.recovered, *log.closers]
            if lazy:
                raw_tools += sum(type(e["data"]["header"].get("tools")) is msgspec.Raw for e in everything if e["type"] == "request/header")
            outcomes.append((encode_events(everything), log.replacements, log.tail_replacements, [_typed(_materialize(e)) for e in everything]))
        assert outcomes[0] == outcomes[1], ref.path
    assert raw_tools >= len(transcripts) // 2  # the option does engage on real logs


def test_the_lazy_line_check_catches_a_broken_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the canonical-payload gate removed, the line check above fails (so it would notice)."""
    _fresh_cache(monkeypatch)
    monkeypatch.setattr(records, "_is_canonical", lambda payload: True)
    line = b'{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"},"tools":[{"n":1e999}]}}}'
    with pytest.raises(AssertionError):
        _check_line(line)
    assert json.loads(line)["data"]["header"]["tools"] == [{"n": float("inf")}]
