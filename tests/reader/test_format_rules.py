"""One test per tricky edge case of the log format (format-spec §11, rules 1-29).

Each test is named ``test_rule_NN_...`` after the rule it pins, so a broken rule
points straight at its number in the spec.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from indexer.headers import parse_header_line
from indexer.layout import Compression, LayoutError, discover, encode_segment, locate, project_key
from indexer.reader import inspect_session, inspect_view, read_from, read_log
from indexer.records import LogFormatError, decode_json
from indexer.repair import NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT
from indexer.writer import batch_bytes, header_line
from readmodel.projection.surface import fold_events
from readmodel.projection.titles import fold_title
from tests.logfactory import (
    assistant,
    chunk,
    ev,
    events_bytes,
    frame,
    header,
    header_bytes,
    line,
    simple_turn,
    step_start,
    tool_call,
    tool_result,
    transcript_path,
    turn_start,
    user,
    write_frames,
    write_log,
    write_raw,
)

H = header("s1")


def raw_path(root: Path, hdr: dict = H) -> Path:
    return transcript_path(root, hdr, Compression.NONE)


def zstd_path(root: Path, hdr: dict = H) -> Path:
    return transcript_path(root, hdr, Compression.ZSTD)


def inspect_raw(root: Path, data: bytes, hdr: dict = H) -> dict:
    write_raw(raw_path(root, hdr), data)
    return inspect_view(inspect_session(root, hdr["id"], Compression.NONE))


def test_rule_01_raw_last_line_without_lf_is_discarded_even_when_valid(root: Path) -> None:
    events = simple_turn()
    data = header_bytes(H) + events_bytes(events[:-1]) + line(events[-1])[:-1]
    view = inspect_raw(root, data)
    stored = [e for e in view["events"] if e["seq"] < len(events) - 1]
    assert [e["seq"] for e in stored] == list(range(len(events) - 1))
    # The fragment is ignored, so the open turn is closed synthetically instead.
    assert view["events"][-1]["data"]["reason"] == {"kind": "interrupted"}
    log = read_log(raw_path(root))
    assert log.torn is not None and log.torn.truncate_to == len(data) - len(line(events[-1])) + 1


def test_rule_02_defects_inside_complete_zstd_frames_are_fatal_even_after_turn_end(root: Path) -> None:
    events = simple_turn()
    path = zstd_path(root)
    write_frames(path, [header_bytes(H), events_bytes(events), b"not json\n"])
    with pytest.raises(LogFormatError, match="torn JSONL record"):
        read_log(path)
    # The same defect inside an incomplete final frame is a repairable torn tail.
    tail = frame(b"not json\n" + line(turn_start(9)))
    write_frames(path, [header_bytes(H), events_bytes(events)], tail=tail[:-3])
    log = read_log(path)
    assert log.torn is not None and [e["seq"] for e in log.events] == list(range(9))


def test_rule_03_first_defect_cuts_the_log_and_a_later_turn_end_makes_it_corrupt(root: Path) -> None:
    events = simple_turn()
    cut = header_bytes(H) + events_bytes(events[:4], pack=False) + b"{broken\n" + events_bytes(events[4:8], pack=False)
    view = inspect_raw(root, cut)
    assert [e["seq"] for e in view["events"]][:4] == [0, 1, 2, 3]
    assert all(e["type"] != "assistant/message" for e in view["events"])
    with_turn_end = cut + events_bytes(events[8:], pack=False)
    write_raw(raw_path(root), with_turn_end)
    with pytest.raises(LogFormatError, match="damaged"):
        read_log(raw_path(root))


def test_rule_04_blank_lines_and_malformed_rows_are_unparsable_defects(root: Path) -> None:
    events = simple_turn()
    blank = header_bytes(H) + events_bytes(events[:3], pack=False) + b"\n" + events_bytes(events[3:], pack=False)
    write_raw(raw_path(root), blank)
    with pytest.raises(LogFormatError, match="line 5"):
        read_log(raw_path(root))
    bad_row = {"type": "text-chunks", "seq0": 3, "time0": 1, "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b", "c"]}}
    data = header_bytes(H) + events_bytes(events[:3], pack=False) + line(bad_row)
    view = inspect_raw(root, data)
    assert [e["seq"] for e in view["events"][:3]] == [0, 1, 2]
    assert view["events"][3]["type"] != "assistant/chunk"


def test_rule_05_a_packed_row_counts_as_n_events_and_a_gap_drops_the_whole_row(root: Path) -> None:
    events = simple_turn()
    packed = batch_bytes(events)
    assert packed.count(b"\n") == len(events) - 2  # three chunks share one row
    assert [e["seq"] for e in inspect_raw(root, header_bytes(H) + packed)["events"]] == list(range(9))
    gap_row = {"type": "text-chunks", "seq0": 4, "time0": 1, "data": {"turn": 1, "step": 1, "index": 0, "dt": [0, 0], "texts": ["a", "b", "c"]}}
    view = inspect_raw(root, header_bytes(H) + events_bytes(events[:3]) + line(gap_row))
    assert not any(e["type"] == "assistant/chunk" for e in view["events"])


def test_rule_06_json_number_semantics() -> None:
    assert decode_json(b"1.0") == 1 and decode_json(b"1e0") == 1
    for token in (b"NaN", b"Infinity", b"-Infinity", b'{"a":NaN}'):
        with pytest.raises(ValueError):
            decode_json(token)
    # A boolean seq is not a number: the line is a seq-gap defect, not event 0.
    events = simple_turn()
    bool_seq = dict(events[0], seq=False)
    assert inspect_raw_events(bool_seq) == []


def inspect_raw_events(first_event: dict) -> list:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        return inspect_raw(root, header_bytes(H) + line(first_event))["events"]


def test_rule_07_header_rules() -> None:
    ok = b'{"type":"session","version":0,"id":"a","createdAt":1,"delegationDepth":0,"extra":1}'
    assert parse_header_line(ok) == {"version": 0, "id": "a", "createdAt": 1, "delegationDepth": 0}
    no_depth = b'{"type":"session","version":0,"id":"a","createdAt":1}'
    with pytest.raises(LogFormatError, match="not a session header"):
        parse_header_line(no_depth)
    for field in ("createdAt", "delegationDepth"):
        neg_zero = ok.replace(f'"{field}":{1 if field == "createdAt" else 0}'.encode(), f'"{field}":-0'.encode())
        with pytest.raises(LogFormatError, match="not a session header"):
            parse_header_line(neg_zero)
    garbage_newer = b'{"version":3}'
    with pytest.raises(LogFormatError) as refused:
        parse_header_line(garbage_newer)
    assert refused.value.kind == "unsupported"
    with pytest.raises(LogFormatError) as not_object:
        parse_header_line(b"[1,2]")
    assert not_object.value.kind == "corrupt"
    retired = ok[:-1] + b',"sandboxMode":"x"}'
    with pytest.raises(LogFormatError, match="retired"):
        parse_header_line(retired, check_version=False)
    newer = ok.replace(b'"version":0', b'"version":7')
    assert parse_header_line(newer, check_version=False)["version"] == 7


def test_rule_08_cwd_must_be_absolute_only_for_a_full_read(root: Path) -> None:
    hdr = header("rel", cwd="{{cwd}}")
    path = write_log(root, hdr, [simple_turn()])
    assert [ref.path for ref in discover(root, Compression.ZSTD).transcripts] == [str(path)]
    with pytest.raises(LogFormatError, match="absolute"):
        read_log(path)


def test_rule_09_presence_means_key_present_even_when_null(root: Path) -> None:
    path = zstd_path(root)
    write_log(root, H, [[dict(turn_start(0), surfaceOp=None)]])
    with pytest.raises(LogFormatError, match="surfaceOp"):
        read_log(path)
    write_log(root, H, [[user(0, "hi", sources=None) | {"sourceEventSeqs": None}]])
    with pytest.raises(LogFormatError, match="array"):
        read_log(path)


def test_rule_10_envelope_keys_and_ignorable(root: Path) -> None:
    path = zstd_path(root)
    write_log(root, H, [[dict(turn_start(0), extra=1)]])
    with pytest.raises(LogFormatError, match="envelope"):
        read_log(path)
    write_log(root, H, [[dict(turn_start(0), ignorable=False)]])
    with pytest.raises(LogFormatError, match="ignorable"):
        read_log(path)
    write_log(root, H, [[dict(ev("future/kind", 0, {}), ignorable=True)]])
    assert read_log(path).events[0]["type"] == "future/kind"


def test_rule_11_unknown_required_types_are_unsupported_and_gated_after_upgrades(root: Path) -> None:
    path = zstd_path(root)
    write_log(root, H, [[ev("future/kind", 0, {})]])
    with pytest.raises(LogFormatError) as unknown:
        read_log(path)
    assert unknown.value.kind == "unsupported"
    write_log(root, H, [[ev(5, 0, {})]])  # type: ignore[arg-type]
    with pytest.raises(LogFormatError) as numeric:
        read_log(path)
    assert numeric.value.kind == "unsupported"
    for unhashable in ([1], {"kind": "x"}):  # types that are not even hashable: the same gate, no crash
        write_log(root, H, [[turn_start(0), ev(unhashable, 1, {})]])  # type: ignore[arg-type]
        with pytest.raises(LogFormatError) as odd:
            read_log(path)
        assert odd.value.kind == "unsupported"
        write_log(root, H, [[turn_start(0), dict(ev(unhashable, 1, {}), ignorable=True)]])  # type: ignore[arg-type]
        with pytest.raises(LogFormatError, match="envelope") as ignorable:
            read_log(path)
        assert ignorable.value.kind == "corrupt"
    steering = ev("steering/message", 0, {"turn": 1, "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}, surfaceOp="append")
    write_log(root, H, [[steering]])
    upgraded = read_log(path).events[0]
    assert upgraded["type"] == "user/message" and upgraded["data"]["id"] == "legacy-message:s1:0"
    for retired in ("request/header-delta", "mode/set"):
        write_log(root, H, [[ev(retired, 0, {})]])
        with pytest.raises(LogFormatError) as refused:
            read_log(path)
        assert refused.value.kind == "corrupt"


@pytest.mark.parametrize(
    "data",
    [
        {"turn": 1, "reason": {"kind": "completed"}, "step": 1},
        {"turn": 0, "reason": {"kind": "completed"}},
        {"turn": 1, "reason": {"kind": "completed", "note": "x"}},
    ],
    ids=["extra-key", "turn-zero", "simple-reason-extra-key"],
)
def test_rule_12_every_turn_end_goes_through_the_legacy_check(root: Path, data: dict) -> None:
    write_log(root, H, [[turn_start(0), ev("turn/end", 1, data)]])
    with pytest.raises(LogFormatError, match="malformed"):
        read_log(zstd_path(root))


def compaction_log() -> list[dict]:
    return [
        user(0, "one"),
        user(1, "two"),
        user(2, "three"),
        ev("compaction/start", 3, {"compactionId": "c", "turn": None}),
        user(4, "summary", surface_op={"op": "replace", "start": 0, "end": 1}, sources=[3, 0, 1]),
        user(5, "four"),
    ]


def test_rule_13_surface_order_differs_from_seq_order_after_a_replacement(root: Path) -> None:
    write_log(root, H, [compaction_log()])
    events = read_log(zstd_path(root)).events
    assert fold_events(events).nodes == [4, 2, 5]


def test_rule_14_an_empty_assistant_message_stays_on_the_surface(root: Path) -> None:
    write_log(root, H, [[user(0, "hi"), assistant(1, "", sources=[])]])
    fold = fold_events(read_log(zstd_path(root)).events)
    assert fold.nodes == [0, 1]


@pytest.mark.parametrize(
    ("event", "ok"),
    [
        (assistant(1, "x", sources=[]), True),
        (user(1, "x", sources=[]), False),
        (user(1, "x", sources=[0, 0]), False),
        (user(1, "x", sources=[1]), False),
        (user(1, "x", sources=[0]), True),
    ],
    ids=["empty-on-assistant", "empty-on-user", "duplicates", "not-earlier", "earlier-non-surface"],
)
def test_rule_15_provenance_rules(root: Path, event: dict, ok: bool) -> None:
    write_log(root, H, [[ev("session/end-seed", 0, {}), event]])
    if ok:
        assert len(read_log(zstd_path(root)).events) == 2
    else:
        with pytest.raises(LogFormatError):
            read_log(zstd_path(root))


def test_rule_16_tool_result_replacement_may_only_change_the_content(root: Path) -> None:
    base = [turn_start(0), step_start(1), assistant(2, calls=[("c1", "bash", "{}")]), tool_call(3, "c1"), tool_result(4, "c1", "long output")]
    prune = [ev("compaction/prune", 5, {"shadowedRange": {"start": 4, "end": 4}, "shadowedSeqs": [4], "shadowedTokenCount": 3})]
    good = tool_result(6, "c1", "short", msg_id="r4", surface_op={"op": "replace", "start": 4, "end": 4}, sources=[4])
    write_log(root, H, [base + prune + [good]])
    assert read_log(zstd_path(root)).events[-1]["seq"] == 6
    bad = tool_result(6, "c1", "short", msg_id="other", surface_op={"op": "replace", "start": 4, "end": 4}, sources=[4])
    write_log(root, H, [base + prune + [bad]])
    with pytest.raises(LogFormatError):
        read_log(zstd_path(root))


def test_rule_17_closers_follow_the_open_turn(root: Path) -> None:
    events = [
        turn_start(0),
        step_start(1),
        assistant(2, calls=[("done", "a", "{}"), ("ran", "b", "{}"), ("never", "c", "{}")], step=1),
        tool_call(3, "done"),
        tool_result(4, "done", "ok", sources=[3]),
        tool_call(5, "ran"),
    ]
    events[-1]["time"] = 4242
    write_log(root, H, [events])
    log = read_log(zstd_path(root))
    closers = log.closers
    assert [(c["seq"], c["type"]) for c in closers] == [(6, "tool/result"), (7, "tool/result"), (8, "step/end"), (9, "turn/end")]
    assert all(c["time"] == 4242 for c in closers)
    ran, never = closers[0], closers[1]
    assert ran["data"]["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert ran["sourceEventSeqs"] == [5] and list(ran) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]
    assert ran["data"]["message"]["id"] == "interrupted-tool-result-ran-6"
    assert ran["data"]["step"] == 1 and ran["data"]["turn"] == 1
    assert ran["data"]["message"]["content"][0]["content"][0]["text"] == OUTCOME_UNKNOWN_TEXT
    assert never["data"]["error"]["code"] == "TOOL_NOT_STARTED" and "sourceEventSeqs" not in never
    assert never["data"]["message"]["content"][0]["content"][0]["text"] == NOT_STARTED_TEXT
    assert closers[3]["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}


def test_rule_18_inspect_never_writes_the_log(root: Path) -> None:
    events = simple_turn()[:5]
    path = write_log(root, H, [events])
    with open(path, "ab") as fh:
        fh.write(frame(events_bytes([chunk(5, "x")]))[:-2])
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    view = inspect_view(inspect_session(root, "s1", Compression.ZSTD))
    assert view["events"][-1]["type"] == "turn/end"
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before


def test_rule_19_legacy_message_ids(root: Path) -> None:
    legacy_user = ev("user/message", 0, {"content": [], "source": {"kind": "user"}}, surfaceOp="append")
    legacy_result = ev("tool/result", 1, {"turn": 1, "step": 1, "callId": "c", "content": [], "isError": False}, surfaceOp="append")
    legacy_prune = ev(
        "tool/result",
        2,
        {"turn": 1, "step": 1, "callId": "c", "content": [{"type": "text", "text": "x"}], "isError": False},
        surfaceOp={"op": "replace", "start": 1, "end": 1},
        sourceEventSeqs=[1],
    )
    write_log(root, H, [[legacy_user, legacy_result, legacy_prune]])
    events = read_log(zstd_path(root)).events
    assert events[0]["data"]["id"] == "legacy-message:s1:0"
    assert events[1]["data"]["message"]["id"] == "legacy-message:s1:1"
    assert events[2]["data"]["message"]["id"] == "legacy-message:s1:1"


def test_rule_20_layout_problems_are_reported_and_symlinks_not_followed(root: Path, tmp_path: Path) -> None:
    good = write_log(root, header("good"), [simple_turn()])
    project = good.parent.parent
    (project / "flat.jsonl.zstd").write_bytes(b"")
    (project / "notes.txt").write_text("ignored")
    mixed = write_log(root, header("mixed"), [simple_turn()])
    (mixed.parent / "session.jsonl").write_bytes(b"")
    outside = tmp_path / "outside"
    write_log(outside, header("hidden"), [simple_turn()])
    os.symlink(outside / project.name, root / "--linked--")
    found = discover(root, Compression.ZSTD)
    assert [ref.path for ref in found.transcripts] == [str(good)]
    assert sorted(p.kind for p in found.problems) == ["flat-file", "mixed-encoding"]
    with pytest.raises(LayoutError) as mixed_lookup:
        locate(root, "mixed", Compression.ZSTD)
    assert mixed_lookup.value.kind == "mixed-encoding"


def test_rule_21_path_identity_is_checked(root: Path) -> None:
    path = write_log(root, header("real"), [simple_turn()])
    moved = root / path.parent.parent.name / encode_segment("alias") / "session.jsonl.zstd"
    moved.parent.mkdir()
    path.rename(moved)
    with pytest.raises(LogFormatError) as mismatch:
        inspect_session(root, "alias", Compression.ZSTD)
    assert mismatch.value.stage == "identity"


def test_rule_22_escaping_is_per_utf16_unit() -> None:
    assert encode_segment("a~b") == "a~007Eb"
    assert encode_segment("\U0001F600") == "~D83D~DE00"
    assert encode_segment(".") == "~002E" and encode_segment("..") == "~002E~002E"
    assert project_key("/开发/~agent") == "--~5F00~53D1-~007Eagent--"
    assert project_key("/" + "x" * 300) == "--" + "x" * 251 + "--"


def test_rule_23_trailing_bytes_after_the_last_frame(root: Path) -> None:
    path = zstd_path(root)
    write_frames(path, [header_bytes(H), events_bytes(simple_turn())], tail=b"\x00\x00\x00")
    assert read_log(path).torn is not None
    write_frames(path, [header_bytes(H), events_bytes(simple_turn())], tail=b"\x00\x00\x00\x00")
    with pytest.raises(LogFormatError, match="magic"):
        read_log(path)


def test_rule_24_invalid_utf8_is_replaced_and_only_lf_splits_lines(root: Path) -> None:
    text_event = user(0, "QQ\u2028b\u0085c\rd")
    raw = line(text_event).replace(b"QQ", b"QQ\xff", 1)
    view = inspect_raw(root, header_bytes(H) + raw)
    assert view["events"][0]["data"]["content"][0]["text"] == "QQ\ufffd\u2028b\u0085c\rd"


def test_rule_25_a_json_null_line_makes_the_log_unreadable(root: Path) -> None:
    write_raw(raw_path(root), header_bytes(H) + b"null\n")
    with pytest.raises(LogFormatError):
        read_log(raw_path(root))


def test_rule_26_title_fold_is_by_log_position() -> None:
    later_in_time = ev("session/title", 0, {"title": "first", "messageSeqs": [], "source": {"kind": "user"}}, time=99)
    last_in_log = ev("session/title", 1, {"title": "second", "messageSeqs": [], "source": {"kind": "fallback"}}, time=1)
    title = fold_title([later_in_time, last_in_log])
    assert title is not None and title.title == "second" and title.event_seq == 1


def test_rule_27_writer_output_matches_js_serialisation() -> None:
    event = ev("x/y", 0, {"s": "é\u2028/\"\\\x01", "n": 1, "f": 1.5})
    assert batch_bytes([event]) == b'{"type":"x/y","seq":0,"time":1000,"data":{"s":"\xc3\xa9\xe2\x80\xa8/\\"\\\\\\u0001","n":1,"f":1.5}}\n'
    assert header_line({"id": "a", "version": 0, "createdAt": 1}) == b'{"type":"session","version":0,"id":"a","createdAt":1,"delegationDepth":0}\n'
    assert hashlib.sha256(OUTCOME_UNKNOWN_TEXT.encode()).hexdigest() != "5655d1cb75343f7b6f034300ccd4cea6f70c07d430825b4575fa03890344bf52"


def test_rule_28_row_gaps_may_be_negative_and_row_numbers_need_not_be_integers(root: Path) -> None:
    row = {"type": "reasoning-chunks", "seq0": 0, "time0": 10, "data": {"turn": 1.5, "step": 1, "index": 0.5, "dt": [-3, 5], "texts": ["a", "b", "c"]}}
    write_raw(raw_path(root), header_bytes(H) + line(row))
    events = read_from(raw_path(root), 0)
    assert [e["time"] for e in events] == [10, 7, 12]
    assert events[1]["data"] == {"turn": 1.5, "step": 1, "chunk": {"type": "reasoning-delta", "index": 0.5, "text": "b"}}


def test_rule_29_read_from_skips_restore_validation_but_not_the_gate(root: Path) -> None:
    missing_surface_op = {k: v for k, v in user(1, "x").items() if k != "surfaceOp"}
    write_log(root, H, [[turn_start(0), missing_surface_op]])
    path = zstd_path(root)
    with pytest.raises(LogFormatError):
        read_log(path)
    assert [e["seq"] for e in read_from(path, 1)] == [1]
    assert read_from(path, 5) == []
    write_log(root, H, [[turn_start(0), ev("future/kind", 1, {})]])
    with pytest.raises(LogFormatError) as refused:
        read_from(path, 0)
    assert refused.value.kind == "unsupported"


def test_rule_20_a_transcript_exists_exactly_when_it_can_be_opened(tmp_path: Path) -> None:
    # The discovery asks with a stat first (cheaper); the answer stays open()'s in every case.
    from indexer.layout import _exists

    (tmp_path / "file").write_bytes(b"x")
    (tmp_path / "dir").mkdir()
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    os.symlink(tmp_path / "file", tmp_path / "linked")
    os.symlink(tmp_path / "dir", tmp_path / "linked-dir")

    # open() finds a directory (IsADirectoryError) and a path through a file (NotADirectoryError),
    # and finds nothing behind a dangling link (ENOENT), whatever stat says of each.
    cases = ["file", "dir", "dangling", "linked", "linked-dir", "absent", "file/below", "dir/absent"]
    assert [_exists(str(tmp_path / case)) for case in cases] == [True, True, False, True, True, False, True, False]
