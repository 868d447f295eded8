"""Semantic extraction and document building (query-spec §4.1–§4.5, T-SH-1..3)."""

from __future__ import annotations

from typing import Any

import pytest

from readmodel.projection.extraction import (
    build_documents,
    codepoint_length,
    content_text,
    extract_event_text,
    join_text,
)
from readmodel.core.jsvalues import JS_WHITESPACE
from readmodel.core.vocabulary import SessionEventSearchDocument, to_builtins
from tests.projection.builders import assistant, event, text, title, tool_result, turn_end, user

CALL = "call"
MESSAGE_CONTENT: list[dict[str, Any]] = [
    text(" visible "),
    {"type": "reasoning", "text": "thought"},
    {"type": "tool-call", "id": CALL, "name": "read", "arguments": '{"path":"a"}'},
    {"type": "tool-result", "toolCallId": CALL, "content": [text("nested")], "isError": False},
    {"type": "future-content", "payload": "hidden"},
]


# --------------------------------------------------------------------------- T-SH-1


class TestMessagesToolsTodos:
    """T-SH-1: message content, tool calls and results, todos."""

    @pytest.mark.parametrize(
        "message",
        [
            user(0, MESSAGE_CONTENT, time=1),
            assistant(1, MESSAGE_CONTENT, time=2),
            user(2, MESSAGE_CONTENT, time=3, source={"kind": "plugin", "plugin": "test"}),
        ],
        ids=["user", "assistant", "plugin-user"],
    )
    def test_message_content_blocks(self, message: dict[str, Any]) -> None:
        assert extract_event_text(message) == 'visible\nread\n{"path":"a"}\nnested'

    def test_reasoning_only_assistant_is_empty(self) -> None:
        assert extract_event_text(assistant(9, [{"type": "reasoning", "text": "private thought"}])) == ""

    def test_tool_call(self) -> None:
        call = event("tool/call", 3, {"turn": 1, "step": 1, "callId": CALL, "name": "bash", "arguments": '{"cmd":"pwd"}'})
        assert extract_event_text(call) == 'bash\n{"cmd":"pwd"}'

    def test_failed_tool_result_appends_error_name_and_code(self) -> None:
        result = tool_result(4, [text("failed")], error={"name": "Oops", "code": "E_OOPS"})
        assert extract_event_text(result) == "failed\nOops\nE_OOPS"

    def test_empty_tool_result_without_error(self) -> None:
        assert extract_event_text(tool_result(5, [])) == ""

    def test_todo_status_then_content(self) -> None:
        todo = event("todo/write", 6, {"todos": [{"status": "in_progress", "content": "ship search"}]})
        assert extract_event_text(todo) == "in_progress\nship search"


# --------------------------------------------------------------------------- T-SH-2


class TestTurnEndAndStructural:
    """T-SH-2: turn/end reasons and events that never carry text."""

    @pytest.mark.parametrize(
        ("reason", "expected"),
        [
            ({"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}}, "error\nboom"),
            ({"kind": "error", "error": {"message": "provider boom", "code": "UNKNOWN"}}, "error\nprovider boom"),
            ({"kind": "aborted", "reason": {"kind": "user"}}, "aborted"),
            ({"kind": "aborted", "reason": {"kind": "disposed"}}, "aborted"),
            ({"kind": "max-tokens"}, "max-tokens"),
            ({"kind": "interrupted"}, "interrupted"),
            ({"kind": "completed"}, ""),
            ({"kind": "future-status"}, ""),
            ({"kind": "blocked"}, ""),
        ],
    )
    def test_turn_end_reason(self, reason: dict[str, Any], expected: str) -> None:
        assert extract_event_text(turn_end(reason)) == expected

    def test_error_code_is_not_searchable(self) -> None:
        reason = {"kind": "error", "error": {"message": " disk full ", "code": "E_DISK", "status": 507}}
        assert extract_event_text(turn_end(reason)) == "error\ndisk full"

    def test_blank_error_message_leaves_only_the_kind(self) -> None:
        assert extract_event_text(turn_end({"kind": "error", "error": {"message": "  "}})) == "error"

    @pytest.mark.parametrize(
        "structural",
        [
            event("turn/start", 0, {"turn": 1}),
            event("step/start", 1, {"turn": 1, "step": 1}),
            event("step/end", 2, {"turn": 1, "step": 1}),
            event("assistant/chunk", 3, {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "raw"}}),
            event("request/header", 4, {"header": {"config": {"provider": "test", "model": "test"}}, "reason": "initial"}),
            event("future/event", 5, {"text": "hidden"}),
        ],
        ids=lambda e: e["type"],
    )
    def test_structural_and_unknown_events_are_empty(self, structural: dict[str, Any]) -> None:
        assert extract_event_text(structural) == ""

    @pytest.mark.parametrize(
        "other",
        [
            title(0, "A searchable-looking title"),
            event("session/end-seed", 0, {}),
            event("request/context", 0, {"provider": "p", "model": "m"}),
            event("approval/asked", 0, {"id": "a", "toolName": "bash", "reason": "needs approval"}),
            event("compaction/summary", 0, {"summary": [text("summarised")], "shadowedSeqs": [1]}),
            event("prompt/blocked", 0, {"content": [text("blocked prompt")], "reason": "policy"}),
            event("steering/message", 0, {"content": [text("legacy")]}),
        ],
        ids=lambda e: e["type"],
    )
    def test_other_types_are_empty(self, other: dict[str, Any]) -> None:
        assert extract_event_text(other) == ""


# --------------------------------------------------------------------------- T-SH-3 (documents)


def t_sh_3_events() -> list[dict[str, Any]]:
    """The 4-event fixture of query-spec §4.5."""
    return [
        user(0, [text("Hello\n(AI)+")], time=10),
        event("assistant/chunk", 1, {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "raw"}}, time=11),
        assistant(2, [text("replacement")], time=12, surface_op={"op": "replace", "start": 0, "end": 0}, sources=[0]),
        turn_end({"kind": "interrupted"}, seq=3, time=13),
    ]


T_SH_3_SURFACES = ["shadowed", "log-only", "current", "log-only"]


class TestDocuments:
    def test_t_sh_3_documents_skip_empty_texts(self) -> None:
        documents = build_documents("session", t_sh_3_events(), T_SH_3_SURFACES)
        assert [(d.seq, d.text, d.surface) for d in documents] == [
            (0, "Hello\n(AI)+", "shadowed"),
            (2, "replacement", "current"),
            (3, "interrupted", "log-only"),
        ]

    def test_document_shape_and_key_order(self) -> None:
        [first, *_] = build_documents("session", t_sh_3_events(), T_SH_3_SURFACES)
        assert isinstance(first, SessionEventSearchDocument)
        encoded = to_builtins(first)
        assert list(encoded) == ["sessionId", "seq", "type", "time", "surface", "text"]
        assert encoded == {
            "sessionId": "session",
            "seq": 0,
            "type": "user/message",
            "time": 10,
            "surface": "shadowed",
            "text": "Hello\n(AI)+",
        }

    def test_mismatched_surface_list_is_rejected(self) -> None:
        with pytest.raises(ValueError):
            build_documents("session", t_sh_3_events(), T_SH_3_SURFACES[:-1])

    def test_empty_log_has_no_documents(self) -> None:
        assert build_documents("session", [], []) == []


# --------------------------------------------------------------------------- join and blocks


class TestJoin:
    def test_trims_with_the_js_whitespace_set_and_drops_blanks(self) -> None:
        assert join_text([JS_WHITESPACE + "a" + JS_WHITESPACE, "", JS_WHITESPACE, "\ufeffb\u3000"]) == "a\nb"

    @pytest.mark.parametrize("not_js_space", ["\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\u180e", "\u200b"])
    def test_python_only_whitespace_is_kept(self, not_js_space: str) -> None:
        assert join_text([not_js_space + "x" + not_js_space]) == not_js_space + "x" + not_js_space

    def test_all_blank_is_empty(self) -> None:
        assert join_text([" ", "\n\t", ""]) == ""

    def test_inner_whitespace_is_untouched(self) -> None:
        assert join_text([" a  \n b "]) == "a  \n b"

    @pytest.mark.parametrize("bad", [None, 1, True, ["x"], {"text": "x"}])
    def test_non_string_part_is_a_type_error(self, bad: Any) -> None:
        with pytest.raises(TypeError):
            join_text(["ok", bad])


class TestContentBlocks:
    def test_image_and_unknown_blocks_contribute_nothing(self) -> None:
        blocks = [{"type": "image", "attachment": {"id": "img"}}, {"type": "mystery", "text": "x"}, text("kept")]
        assert content_text(blocks) == "kept"

    def test_tool_call_id_and_result_flags_are_not_included(self) -> None:
        blocks = [
            {"type": "tool-call", "id": "ID-1", "name": "n", "arguments": "{}"},
            {"type": "tool-result", "toolCallId": "ID-2", "isError": True, "content": [text("r")]},
        ]
        assert content_text(blocks) == "n\n{}\nr"

    def test_nested_tool_results_keep_document_order(self) -> None:
        blocks = [
            text("a"),
            {"type": "tool-result", "toolCallId": "c", "content": [
                text("b"),
                {"type": "tool-result", "toolCallId": "d", "content": [text("c"), {"type": "reasoning", "text": "no"}]},
                text("d"),
            ]},
            text("e"),
        ]
        assert content_text(blocks) == "a\nb\nc\nd\ne"

    def test_deep_nesting_does_not_exhaust_the_stack(self) -> None:
        block: dict[str, Any] = text("deep")
        for _ in range(5000):
            block = {"type": "tool-result", "toolCallId": "c", "content": [block]}
        assert content_text([block, text("after")]) == "deep\nafter"

    @pytest.mark.parametrize("odd", ["string-block", 7, True, ["text", "x"]])
    def test_primitive_or_array_blocks_have_no_type(self, odd: Any) -> None:
        # JS reads ``undefined`` for ``.type`` of these: they contribute nothing.
        assert content_text([odd, text("x")]) == "x"

    def test_blank_parts_inside_blocks_are_dropped(self) -> None:
        blocks = [text("  "), {"type": "tool-call", "id": "i", "name": " ", "arguments": "\n"}, text("x")]
        assert content_text(blocks) == "x"


class TestToolResultErrors:
    def test_error_name_only(self) -> None:
        assert extract_event_text(tool_result(0, [text("out")], error={"name": "Failure"})) == "out\nFailure"

    def test_error_code_only(self) -> None:
        assert extract_event_text(tool_result(0, [], error={"code": "E_X"})) == "E_X"

    def test_null_name_and_code_count_as_absent(self) -> None:
        assert extract_event_text(tool_result(0, [text("out")], error={"name": None, "code": None})) == "out"

    @pytest.mark.parametrize("error", ["a string", 5, ["name"], False])
    def test_non_object_error_counts_as_absent(self, error: Any) -> None:
        result = tool_result(0, [text("out")])
        result["data"]["error"] = error
        assert extract_event_text(result) == "out"

    def test_null_error_counts_as_absent(self) -> None:
        result = tool_result(0, [text("out")])
        result["data"]["error"] = None
        assert extract_event_text(result) == "out"

    def test_meta_is_ignored(self) -> None:
        result = tool_result(0, [text("out")])
        result["data"]["meta"] = {"text": "hidden"}
        assert extract_event_text(result) == "out"


# --------------------------------------------------------------------------- JS shape semantics


def _with_data(base: dict[str, Any], data: Any) -> dict[str, Any]:
    copy = dict(base)
    copy["data"] = data
    return copy


class TestMalformedShapes:
    """Where the reference throws a JS TypeError, so do we (module docstring)."""

    @pytest.mark.parametrize(
        "bad",
        [
            _with_data(user(0, []), None),
            _with_data(user(0, []), "text"),
            _with_data(user(0, []), {"content": "not an array"}),
            _with_data(user(0, []), {"content": None}),
            user(0, [None]),
            user(0, [{"type": "text", "text": 5}]),
            user(0, [{"type": "text"}]),
            user(0, [{"type": "tool-call", "name": "n"}]),
            user(0, [{"type": "tool-result", "toolCallId": "c"}]),
            user(0, [{"type": "tool-result", "toolCallId": "c", "content": "text"}]),
            _with_data(assistant(0, []), None),
            _with_data(assistant(0, []), {"message": None}),
            _with_data(assistant(0, []), {"message": {"content": {}}}),
            _with_data(tool_result(0, []), {}),
            tool_result(0, [], error={"name": 404}),
            tool_result(0, [], error={"code": False}),
            event("tool/call", 0, None),
            event("tool/call", 0, "bash"),
            event("tool/call", 0, {"name": "bash"}),
            event("tool/call", 0, {"name": "bash", "arguments": {"cmd": "pwd"}}),
            event("todo/write", 0, None),
            event("todo/write", 0, {"todos": None}),
            event("todo/write", 0, {"todos": {"0": {}}}),
            event("todo/write", 0, {"todos": [None]}),
            event("todo/write", 0, {"todos": ["task"]}),
            event("todo/write", 0, {"todos": [{"status": "pending"}]}),
            event("turn/end", 0, None),
            event("turn/end", 0, {"turn": 1}),
            event("turn/end", 0, {"turn": 1, "reason": None}),
            turn_end({"kind": "error"}),
            turn_end({"kind": "error", "error": None}),
            turn_end({"kind": "error", "error": "boom"}),
            turn_end({"kind": "error", "error": {"code": "X"}}),
            turn_end({"kind": "error", "message": "legacy shape", "step": 0}),
        ],
    )
    def test_type_error(self, bad: dict[str, Any]) -> None:
        with pytest.raises(TypeError):
            extract_event_text(bad)

    def test_null_event_is_a_type_error(self) -> None:
        with pytest.raises(TypeError):
            extract_event_text(None)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("quiet", "expected"),
        [
            (turn_end("completed"), ""),  # a primitive reason has no kind
            (turn_end(["error"]), ""),
            (turn_end({"kind": 7}), ""),
            (turn_end({"kind": ["error"]}), ""),
            (event("todo/write", 0, {"todos": []}), ""),
            ({"type": 5, "seq": 0, "time": 0, "data": None}, ""),
            ({"type": ["user/message"], "seq": 0, "time": 0, "data": None}, ""),
            ({"seq": 0, "time": 0, "data": None}, ""),
            (event("turn/start", 0, None), ""),
        ],
    )
    def test_shapes_js_reads_as_undefined_are_quiet(self, quiet: dict[str, Any], expected: str) -> None:
        assert extract_event_text(quiet) == expected

    def test_primitive_event_has_no_type(self) -> None:
        assert extract_event_text("user/message") == ""  # type: ignore[arg-type]


# --------------------------------------------------------------------------- code points


class TestCodepointLength:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("", 0),
            ("abc", 3),
            ("café", 4),
            ("日本語", 3),
            ("\U0001f600x", 2),
            ("\ud83d\ude00x", 2),  # a pair held as two code points counts once, as in JS
            ("\ud83dx", 2),  # a lone high surrogate counts as one
            ("\ude00\ud83d", 2),  # reversed: two lone surrogates
            ("\ud83d\ude00\ud83d", 2),
        ],
    )
    def test_counts_code_points_like_js(self, value: str, expected: int) -> None:
        assert codepoint_length(value) == expected
