"""JSON-RPC 2.0 over lines: the ``sessionq rpc`` protocol (interface.md).

One request per line in, one response per line out, in request order.
:class:`Dispatcher` is pure (bytes in, bytes out) so it is testable without a
subprocess; :func:`serve` runs it over binary streams until end of input.

Error mapping:

* a ``SessionQueryError`` → ``{"code": -32000, "message", "data": {"code"}}``;
* an uncoded failure the reference also raises (a replay ``Error``, a
  message-shape error, a title ``TypeError``) → ``-32000`` with
  ``data: {"name"}`` instead of a code;
* malformed JSON, or JSON nested deeper than :data:`MAX_DEPTH` → -32700;
  not a request object → -32600; unknown method → -32601; params of the
  wrong shape → -32602; anything unexpected → -32603.

Input decoding (:func:`decode_json_text`, shared with the HTTP API) keeps
msgspec as the fast path and bounds what later code can meet: nesting is
limited before anything recursive sees the value, and a lone UTF-16
surrogate escape (valid JSON text that msgspec refuses) decodes to U+FFFD,
the character the index stores for it.

Requests without an ``id`` are notifications and get no response (JSON-RPC
2.0); a JSON array is a batch answered by one array line.

Methods are plain entries of :data:`METHODS` (name → handler returning the
encoded result); search methods are added there, in one place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from itertools import accumulate
from typing import IO, Any, Final

import msgspec

from readmodel.core.errors import SessionQueryError
from readmodel.projection.eventmodel import EventShapeError
from readmodel.core.jsonout import encode_json
from readmodel.projection.lineage import encode_lineage_trace
from readmodel.projection.replay import ReplayError
from readmodel.projection.secrets import POLICIES
from readmodel.core.requests import error_to_builtins, title_result_to_builtins

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
QUERY_ERROR: Final = -32000

MAX_DEPTH: Final = 64
"""The deepest array/object nesting accepted in a request (requests need about 6)."""

_encode: Final = encode_json
_decode: Final = msgspec.json.Decoder().decode

# Uncoded failures that are part of the reference's observable behaviour.
_REFERENCE_FAILURES: Final = (ReplayError, EventShapeError, TypeError)


class RpcError(Exception):
    """A JSON-RPC error object to send back."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_builtins(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def invalid_params(detail: str) -> RpcError:
    return RpcError(INVALID_PARAMS, f"Invalid params: {detail}")


# --------------------------------------------------------------------------- decoding

# A string token, or an unterminated one running to the end: it always
# matches where it starts, so the scan is linear (no retry at later quotes).
_STRING_TOKEN: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET: Final = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP: Final = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes
# An escape, scanned left to right so an escaped backslash never starts one:
# a surrogate pair (12 bytes), a lone surrogate (6 bytes) or any other escape
# (its first 2 bytes; the digits of a non-surrogate \uXXXX follow as text).
_ESCAPE: Final = re.compile(rb"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[dD][89a-fA-F][0-9a-fA-F]{2}|.)", re.DOTALL)


def nesting_depth(data: bytes) -> int:
    """The deepest ``[``/``{`` nesting of a JSON text, brackets inside strings
    not counted (for invalid text: an upper bound of what a parser would reach)."""
    skeleton = _STRING_TOKEN.sub(b"", data).translate(_BRACKET_STEP, _NOT_BRACKET)
    return max(accumulate(memoryview(skeleton).cast("b")), default=0)


def _lone_surrogate_to_replacement(match: re.Match[bytes]) -> bytes:
    escape = match.group()
    return b"\\ufffd" if len(escape) == 6 else escape


class JsonTextError(ValueError):
    """Input that is not accepted as a JSON text; ``detail`` names a limit
    that was exceeded (``None``: the text is not JSON)."""

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail or "not valid JSON")
        self.detail = detail

    def to_rpc_error(self) -> RpcError:
        return RpcError(PARSE_ERROR, "Parse error" if self.detail is None else f"Parse error: {self.detail}")


def decode_json_text(data: bytes | str) -> Any:
    """One JSON text (UTF-8) as builtins; raises :class:`JsonTextError`.

    Refuses nesting deeper than :data:`MAX_DEPTH` (so no later walk can
    recurse without bound).  A lone surrogate escape becomes U+FFFD; every
    other input is judged by msgspec alone.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and nesting_depth(raw) > MAX_DEPTH:
        raise JsonTextError(f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return _decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass
    if b"\\u" in raw:
        repaired = _ESCAPE.sub(_lone_surrogate_to_replacement, raw)
        if repaired != raw:
            try:
                return _decode(repaired)
            except (msgspec.DecodeError, UnicodeDecodeError):
                pass
    raise JsonTextError()


# --------------------------------------------------------------------------- params


def _object(params: Any) -> dict[str, Any]:
    """Params must be a JSON object (omitted means ``{}``); ids are named, not positional."""
    if params is None:
        return {}
    if type(params) is not dict:
        raise invalid_params("params must be an object")
    return params


def _session_id(params: Mapping[str, Any]) -> str:
    value = params.get("sessionId")
    if type(value) is not str:
        raise invalid_params("sessionId must be a string")
    return value


def _filters(params: Mapping[str, Any]) -> Any:
    # Passed through: the engine's materialisation gives the reference's
    # SESSION_QUERY_INVALID_FILTER answers (an absent array included).
    return params.get("filters", None)


def _event_request(params: Mapping[str, Any]) -> dict[str, Any]:
    _session_id(params)
    if "seq" not in params:
        raise invalid_params("seq is required")
    return params


def _session_ids(params: Mapping[str, Any]) -> list[str]:
    value = params.get("sessionIds")
    if type(value) is not list or any(type(item) is not str for item in value):
        raise invalid_params("sessionIds must be an array of strings")
    return value


def _redaction(params: Mapping[str, Any]) -> dict[str, Any]:
    """The ``redact`` param of a raw read (a sessionq extension) as the engine's keyword.

    ``"all"`` asks for the events with every detected secret replaced by its
    marker (streamed chunks included); ``"index"``, ``"off"`` or none leave the
    server's policy, so a request can add redaction but never lift the
    server's ``all``.
    """
    value = params.get("redact")
    if value is None:
        return {}
    if value not in POLICIES:
        raise invalid_params(f"redact must be one of {', '.join(POLICIES)}")
    return {"redact": True} if value == "all" else {}


# --------------------------------------------------------------------------- methods

Handler = Callable[[Any, dict[str, Any]], bytes]
"""A method: ``(engine, params object) -> encoded JSON result``."""


def _list_sessions(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.list_sessions())


def _filter_sessions(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.filter_sessions(_filters(params)))


def _read_session(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.read_session(_session_id(params), **_redaction(params)))


def _list_events(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.list_events(_session_id(params)))


def _filter_events(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.filter_events(_session_id(params), _filters(params)))


def _read_surface(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.read_surface(_session_id(params), **_redaction(params)))


def _read_event(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.read_event(_event_request(params), **_redaction(params)))


def _read_event_range(engine: Any, params: dict[str, Any]) -> bytes:
    session_id, options = _session_id(params), _redaction(params)
    return _encode(engine.read_event_range(session_id, params.get("startSeq", 0), params.get("limit", 1000), **options))


def _trace_session(engine: Any, params: dict[str, Any]) -> bytes:
    # Lineages can be thousands of levels deep: encode without recursion.
    return encode_lineage_trace(engine.trace_session(_session_id(params)))


def _trace_event(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.trace_event(_event_request(params)))


def _read_title_snapshots(engine: Any, params: dict[str, Any]) -> bytes:
    results = engine.read_title_snapshots(_session_ids(params))
    return _encode([title_result_to_builtins(result) for result in results])


def _read_title(engine: Any, params: dict[str, Any]) -> bytes:
    # interface.md: readTitle answers the SessionTitleObservation ({session, title?}).
    return _encode(engine.read_title_snapshot(_session_id(params)))


def _search_sessions(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.search_sessions(params))


def _search_events(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.search_events(params))


def _status(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.status())


def _list_workspaces(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.list_workspaces())


def _list_session_summaries(engine: Any, params: dict[str, Any]) -> bytes:
    return _encode(engine.list_session_summaries(params))


METHODS: Final[dict[str, Handler]] = {
    "listSessions": _list_sessions,
    "filterSessions": _filter_sessions,
    "readSession": _read_session,
    "listEvents": _list_events,
    "filterEvents": _filter_events,
    "readSurface": _read_surface,
    "readEvent": _read_event,
    "readEventRange": _read_event_range,
    "traceSession": _trace_session,
    "traceEvent": _trace_event,
    "readTitleSnapshots": _read_title_snapshots,
    "readTitle": _read_title,
    "searchSessions": _search_sessions,
    "searchEvents": _search_events,
    "status": _status,
    "listWorkspaces": _list_workspaces,
    "listSessionSummaries": _list_session_summaries,
}


# --------------------------------------------------------------------------- dispatch


def _error_response(request_id: Any, error: RpcError) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + _encode(request_id) + b',"error":' + _encode(error.to_builtins()) + b"}"


def _result_response(request_id: Any, result: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + _encode(request_id) + b',"result":' + result + b"}"


def _as_rpc_error(error: Exception) -> RpcError:
    if isinstance(error, RpcError):
        return error
    if isinstance(error, SessionQueryError):
        return RpcError(QUERY_ERROR, error.message, {"code": error.code})
    if isinstance(error, _REFERENCE_FAILURES):
        return RpcError(QUERY_ERROR, str(error), {"name": error_to_builtins(error)["name"]})
    return RpcError(INTERNAL_ERROR, f"Internal error: {type(error).__name__}: {error}")


_NO_ID: Final = object()


class Dispatcher:
    """Answers JSON-RPC requests against a query engine.

    ``engine`` is a :class:`readmodel.query.SessionQuery` (or anything with
    its methods), or a zero-argument factory: the engine is then opened on the
    first call that needs it, and re-tried on later calls while opening fails
    (so ``sessionq rpc`` can start before the index exists).
    """

    def __init__(self, engine: Any, methods: Mapping[str, Handler] | None = None) -> None:
        is_engine = hasattr(engine, "list_sessions")
        self._engine = engine if is_engine else None
        self._factory: Callable[[], Any] | None = None if is_engine else engine
        self.methods: dict[str, Handler] = dict(METHODS if methods is None else methods)

    def register(self, name: str, handler: Handler) -> None:
        """Add (or replace) a method."""
        self.methods[name] = handler

    def engine(self) -> Any:
        if self._engine is None:
            assert self._factory is not None
            self._engine = self._factory()
        return self._engine

    def handle_line(self, line: bytes | str) -> bytes | None:
        """The response line (without LF) for one input line; ``None`` when
        nothing is to be sent (a blank line, a notification, a batch of them)."""
        data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
        if not data.strip():
            return None
        try:
            message = decode_json_text(data)
        except JsonTextError as error:
            return _error_response(None, error.to_rpc_error())
        if type(message) is list:
            if not message:
                return _error_response(None, RpcError(INVALID_REQUEST, "Invalid Request"))
            responses = [response for item in message if (response := self.handle(item)) is not None]
            return b"[" + b",".join(responses) + b"]" if responses else None
        return self.handle(message)

    def handle(self, message: Any) -> bytes | None:
        """The encoded response to one decoded request (``None`` for a notification)."""
        if type(message) is not dict:
            return _error_response(None, RpcError(INVALID_REQUEST, "Invalid Request"))
        request_id = message.get("id", _NO_ID)
        if request_id is not _NO_ID and request_id is not None and type(request_id) not in (str, int, float):
            return _error_response(None, RpcError(INVALID_REQUEST, "Invalid Request"))
        respond_id = None if request_id is _NO_ID else request_id
        method = message.get("method")
        if message.get("jsonrpc") != "2.0" or type(method) is not str:
            return _error_response(respond_id, RpcError(INVALID_REQUEST, "Invalid Request"))
        try:
            handler = self.methods.get(method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            params = _object(message.get("params"))
            result = handler(self.engine(), params)
        except Exception as error:  # noqa: BLE001 - every failure becomes an error response
            if request_id is _NO_ID:
                return None
            return _error_response(respond_id, _as_rpc_error(error))
        if request_id is _NO_ID:
            return None
        return _result_response(respond_id, result)


def serve(dispatcher: Dispatcher, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """Answer every line of ``stdin`` on ``stdout`` until end of input; returns 0."""
    for line in stdin:
        response = dispatcher.handle_line(line)
        if response is not None:
            stdout.write(response + b"\n")
            stdout.flush()
    return 0
