"""The JSON-RPC line parser under hostile input (hypothesis).

Whatever a line holds — arbitrary bytes, any JSON value, nesting thousands of
levels deep, numbers no float or int64 can hold, lone surrogate escapes — the
dispatcher answers it with exactly one well-formed response line (an array
line for a batch, nothing for a notification) and never raises.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from readmodel.rpc import MAX_DEPTH, Dispatcher, JsonTextError, decode_json_text, serve
from tests.rpc.support import dumps, huge_numbers, json_values, nested, requests

_NO_ID = object()
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


# --------------------------------------------------------------------------- the model


def is_notification(message: Any) -> bool:
    return type(message) is dict and "id" not in message and message.get("jsonrpc") == "2.0" and type(message.get("method")) is str


def expected_id(message: Any) -> Any:
    """The id a response to ``message`` carries: its id when that is a valid one, even
    in an Invalid Request answer (JSON-RPC: null only when it cannot be told)."""
    if type(message) is not dict:
        return None
    request_id = message.get("id")
    return request_id if type(request_id) in (str, int, float) else None


def assert_response(response: Any, request_id: Any = _NO_ID) -> None:
    """One JSON-RPC 2.0 response object: exactly one of result/error, a valid error object."""
    assert type(response) is dict and response.get("jsonrpc") == "2.0", response
    assert "id" in response and ("result" in response) != ("error" in response), response
    if "error" in response:
        error = response["error"]
        assert type(error["code"]) is int and type(error["message"]) is str, error
        assert set(error) <= {"code", "message", "data"}, error
    if request_id is not _NO_ID:
        assert response["id"] == request_id, (response, request_id)


def answer(dispatcher: Dispatcher, line: bytes) -> Any:
    """The decoded response line (``None`` for no response); checks it is one line."""
    out = dispatcher.handle_line(line)
    if out is None:
        return None
    assert b"\n" not in out and b"\r" not in out
    return json.loads(out.decode("utf-8"))


def assert_answers(dispatcher: Dispatcher, message: Any, line: bytes) -> None:
    """``line`` (the text of ``message``) gets exactly the model's responses."""
    got = answer(dispatcher, line)
    if type(message) is list and message:
        expected = [item for item in message if not is_notification(item)]
        if not expected:
            assert got is None
            return
        assert type(got) is list and len(got) == len(expected), (got, expected)
        for response, item in zip(got, expected, strict=True):
            assert_response(response, expected_id(item))
    elif is_notification(message):
        assert got is None
    else:
        assert_response(got, expected_id(message))


def sanitised(value: Any) -> Any:
    """``value`` as the edge decodes it: lone surrogates become U+FFFD."""
    if type(value) is str:
        return _LONE_SURROGATE.sub("\ufffd", value)
    if type(value) is list:
        return [sanitised(item) for item in value]
    if type(value) is dict:
        return {sanitised(key): sanitised(item) for key, item in value.items()}
    return value


# --------------------------------------------------------------------------- properties


@given(line=st.binary(max_size=200))
@example(line=b"\xff\xfe")
@example(line=b'{"jsonrpc":"2.0","id":1,"method":"status"}\x00')
@example(line=b'"\\')
def test_arbitrary_bytes_get_one_well_formed_response(dispatcher: Dispatcher, line: bytes) -> None:
    line = line.replace(b"\n", b" ")
    got = answer(dispatcher, line)
    if not line.strip():
        assert got is None
    elif got is None:
        # only a (batch of) notification(s) goes unanswered
        message = json.loads(line)
        assert is_notification(message) or (type(message) is list and all(is_notification(item) for item in message))
    elif type(got) is list:
        assert got and all(assert_response(item) is None for item in got)
    else:
        assert_response(got)


@given(message=requests(), ascii_only=st.booleans())
def test_any_request_shape_gets_the_responses_json_rpc_prescribes(dispatcher: Dispatcher, message: Any, ascii_only: bool) -> None:
    line = dumps(message, ascii_only)
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:  # a raw lone surrogate is not UTF-8, so not JSON text
        assert answer(dispatcher, line)["error"]["code"] == -32700
        return
    assert_answers(dispatcher, sanitised(message), line)


@given(batch=st.lists(requests(), max_size=5))
def test_a_batch_gets_one_array_line(dispatcher: Dispatcher, batch: list[Any]) -> None:
    assert_answers(dispatcher, sanitised(batch), dumps(batch))


@given(value=json_values, ascii_only=st.booleans())
def test_decoding_keeps_every_value_but_lone_surrogates(value: Any, ascii_only: bool) -> None:
    text = dumps(value, ascii_only)
    if not ascii_only and _LONE_SURROGATE.search(json.dumps(value, ensure_ascii=False)):
        with pytest.raises(JsonTextError):  # written raw, a lone surrogate is not UTF-8
            decode_json_text(text)
    else:
        assert decode_json_text(text) == sanitised(value)


@given(depth=st.integers(1, 3000), data=st.data())
@example(depth=MAX_DEPTH - 2, data=None)
@example(depth=MAX_DEPTH - 1, data=None)
def test_deep_nesting_is_refused_beyond_the_limit_and_answered_within(dispatcher: Dispatcher, depth: int, data: Any) -> None:
    value = b"[" * depth + b"0" + b"]" * depth if data is None else data.draw(nested(depth))
    line = b'{"jsonrpc":"2.0","id":7,"method":"searchSessions","params":{"query":' + value + b"}}"
    got = answer(dispatcher, line)
    if depth + 2 > MAX_DEPTH:  # the request and params objects are two more levels
        assert got["id"] is None and got["error"]["code"] == -32700 and str(MAX_DEPTH) in got["error"]["message"]
    else:
        assert_response(got, 7)
        assert got["error"]["data"]["code"] == "SESSION_QUERY_INVALID_QUERY"


@given(number=huge_numbers, place=st.sampled_from(["id", "param", "batch"]))
def test_huge_numbers_are_answered(dispatcher: Dispatcher, number: bytes, place: str) -> None:
    if place == "id":
        line = b'{"jsonrpc":"2.0","id":' + number + b',"method":"status"}'
    elif place == "param":
        line = b'{"jsonrpc":"2.0","id":1,"method":"readEventRange","params":{"sessionId":"root","limit":' + number + b"}}"
    else:
        line = b"[" + number + b"]"
    got = answer(dispatcher, line)
    for response in got if type(got) is list else [got]:
        assert_response(response)


@given(lines=st.lists(requests().map(dumps) | st.binary(max_size=40), max_size=6))
def test_serve_writes_one_line_per_answered_line(dispatcher: Dispatcher, lines: list[bytes]) -> None:
    lines = [line.replace(b"\n", b" ") for line in lines]
    out = io.BytesIO()
    assert serve(dispatcher, io.BytesIO(b"".join(line + b"\n" for line in lines)), out) == 0
    answered = [line for line in lines if dispatcher.handle_line(line) is not None]
    assert len(out.getvalue().splitlines()) == len(answered)
