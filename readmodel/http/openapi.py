"""The OpenAPI 3.1 document of the HTTP API, and reading GET parameters by it.

Each RPC method's parameters are described once (:data:`_METHOD_DOCS`); the
document served at ``/api/openapi.json`` and the parsing of convenience
``GET /api/rpc/<method>?name=value`` calls both read that description.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from readmodel.rpc import METHODS, JsonTextError, RpcError, decode_json_text


def _is_text(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def query_params(method: str, items: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The params object of a convenience ``GET /api/rpc/<method>?...``.

    Only the method's documented parameters are read (others, such as
    ``access_token``, are ignored); for a repeated name the last value wins.
    String parameters are taken verbatim; every other parameter (numbers,
    filter arrays, ``sessionIds``) is a JSON value, e.g.
    ``filters=[{"kind":"type","values":["user/message"]}]``.
    """
    properties: dict[str, Any] = _METHOD_DOCS[method][1]["properties"] if method in _METHOD_DOCS else {}
    given = {name: value for name, value in items if name in properties}
    params: dict[str, Any] = {}
    for name, value in given.items():
        if _is_text(properties[name]):
            params[name] = value
            continue
        try:
            params[name] = decode_json_text(value)
        except JsonTextError as error:
            detail = "" if error.detail is None else f" ({error.detail})"
            raise RpcError(-32602, f"Invalid params: {name} must be a JSON value{detail}") from None
    return params


# --------------------------------------------------------------------------- OpenAPI

_STR: Final = {"type": "string"}
_SEQ: Final = {"type": "integer", "minimum": 0}
_FILTER_KIND: Final = {
    "type": "string",
    "description": "session filters: id, cwd, created-at, parent, availability, and the sessionq extension source "
    "(values: source names, the sessions those indexers stored); event filters: seq, time, type, surface, text",
}
_FILTERS: Final = {"type": "array", "items": {"type": "object", "required": ["kind"], "properties": {"kind": _FILTER_KIND}}}
_WINDOW: Final = {"type": "integer", "minimum": 0, "maximum": 50}
_LIMIT: Final = {"type": ["integer", "null"], "minimum": 1}
_CURSOR: Final = {"type": ["string", "null"]}
_OPTIONAL_FILTERS: Final = {**_FILTERS, "type": ["array", "null"]}  # null means absent, as in the reference
_MATCH: Final = {
    "type": ["string", "null"],
    "enum": ["phrase", "words", "substring", None],
    "description": (
        "Search mode (sessionq extension). phrase (default when absent or null): the reference's exact FTS5 phrase; "
        "words: every token in any order, the last one also as a prefix unless the query ends in whitespace, "
        '"quoted parts" as phrases; substring: the documents that filterEvents\' text clause selects (literal, '
        "case-insensitive, whitespace-flexible). words and substring demote text shared verbatim by many sessions. "
        "A cursor is valid only in the mode it came from."
    ),
}
_REDACT: Final = {
    "type": "string",
    "enum": ["index", "all", "off"],
    "description": "sessionq extension: `all` returns the events with every detected secret replaced by a marker "
    "such as [REDACTED:aws-access-key], pieces of streamed chunks included; `index`, `off` or none: the server's "
    "policy (a request cannot lift the server's `all`)",
}


def _params(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


# name → (summary, params schema); semantic rules (filter kinds, ranges,
# cursor validity) are the engine's and answer 400 with the query error code.
_METHOD_DOCS: Final[dict[str, tuple[str, dict[str, Any]]]] = {
    "listSessions": ("listSessions(): every session record", _params([])),
    "filterSessions": ("filterSessions({filters})", _params(["filters"], filters=_FILTERS)),
    "readSession": ("readSession({sessionId, redact?}): header and events", _params(["sessionId"], sessionId=_STR, redact=_REDACT)),
    "listEvents": ("listEvents({sessionId}): event records with their surface", _params(["sessionId"], sessionId=_STR)),
    "filterEvents": (
        "filterEvents({sessionId, filters})",
        _params(["sessionId", "filters"], sessionId=_STR, filters=_FILTERS),
    ),
    "readSurface": ("readSurface({sessionId, redact?}): the folded surface", _params(["sessionId"], sessionId=_STR, redact=_REDACT)),
    "readEvent": (
        "readEvent({sessionId, seq, before?, after?, redact?})",
        _params(["sessionId", "seq"], sessionId=_STR, seq=_SEQ, before=_WINDOW, after=_WINDOW, redact=_REDACT),
    ),
    "readEventRange": (
        "readEventRange({sessionId, startSeq?, limit?, redact?}): a run of events with their surface (sessionq extension)",
        _params(["sessionId"], sessionId=_STR, startSeq=_SEQ, limit={"type": "integer", "minimum": 1, "maximum": 5000}, redact=_REDACT),
    ),
    "traceSession": ("traceSession({sessionId}): ancestors and descendants", _params(["sessionId"], sessionId=_STR)),
    "traceEvent": ("traceEvent({sessionId, seq})", _params(["sessionId", "seq"], sessionId=_STR, seq=_SEQ)),
    "readTitleSnapshots": (
        "readTitleSnapshots({sessionIds})",
        _params(["sessionIds"], sessionIds={"type": "array", "items": _STR}),
    ),
    "readTitle": ("readTitle({sessionId})", _params(["sessionId"], sessionId=_STR)),
    "searchSessions": (
        "searchSessions({query, sessionFilters?, eventFilters?, limit?, cursor?, match?})",
        _params(
            ["query"],
            query=_STR,
            sessionFilters=_OPTIONAL_FILTERS,
            eventFilters=_OPTIONAL_FILTERS,
            limit=_LIMIT,
            cursor=_CURSOR,
            match=_MATCH,
        ),
    ),
    "searchEvents": (
        "searchEvents({sessionId, query, filters?, limit?, cursor?, match?})",
        _params(
            ["sessionId", "query"],
            sessionId=_STR,
            query=_STR,
            filters=_OPTIONAL_FILTERS,
            limit=_LIMIT,
            cursor=_CURSOR,
            match=_MATCH,
        ),
    ),
    "status": ("status(): index status", _params([])),
    "listWorkspaces": (
        "listWorkspaces(): sessions per workspace (cwd), newest activity first (sessionq extension)",
        _params([]),
    ),
    "listSessionSummaries": (
        "listSessionSummaries({cwd?, createdFrom?, createdTo?, limit?, cursor?}): a page of session titles, "
        "workspaces, times and event counts in listing order (sessionq extension; cwd null = sessions without one)",
        _params(
            [],
            cwd={"type": ["string", "null"]},
            createdFrom={"type": ["number", "null"]},  # null means absent, as the filters take it
            createdTo={"type": ["number", "null"]},
            limit={"type": ["integer", "null"], "minimum": 1, "maximum": 500},
            cursor=_CURSOR,
        ),
    ),
}


def _query_parameter(name: str, schema: dict[str, Any], required: bool) -> dict[str, Any]:
    if _is_text(schema):
        enum = {"enum": [value for value in schema["enum"] if type(value) is str]} if "enum" in schema else {}  # null stays out of a query string
        return {"name": name, "in": "query", "required": required, "schema": {"type": "string", **enum}}
    return {"name": name, "in": "query", "required": required, "content": {"application/json": {"schema": schema}}}


def _extension_paths() -> dict[str, Any]:
    """The routes beside the RPC methods and the ZIP export: the HTML
    transcript export and the event stream (sessionq extensions), and this
    document itself."""
    error = {"$ref": "#/components/schemas/Error"}
    json_error = {"content": {"application/json": {"schema": error}}}
    html = {
        verb: {
            "summary": "A session's transcript as one self-contained HTML file (sessionq extension)",
            "description": (
                "One file with no external resource and no script: messages as sanitised markdown, tool calls "
                "paired with their results, reasoning and long outputs collapsed, log-only events left out unless "
                "includeLogOnly=true; light and dark from prefers-color-scheme. Downloaded as an attachment; "
                "with a server token, ?access_token= is accepted here as on the ZIP export."
            ),
            "operationId": f"sessionHtml{verb.title()}",
            "parameters": [
                {"name": "sessionId", "in": "query", "required": True, "schema": {"type": "string", "minLength": 1}},
                {"name": "includeLogOnly", "in": "query", "required": False, "schema": {"type": "string", "enum": ["true", "false"]}},
                {"name": "redact", "in": "query", "required": False, "schema": _REDACT},
            ],
            "responses": {
                "200": {"description": "the HTML document", "content": {"text/html": {"schema": {"type": "string"}}}},
                "400": {"description": "missing sessionId, invalid includeLogOnly or redact", **json_error},
                "404": {"description": "session not found", **json_error},
                "500": {"description": "the session could not be read", **json_error},
            },
        }
        for verb in ("get", "head")
    }
    events = {
        "get": {
            "summary": "Index generations as server-sent events (sessionq extension)",
            "description": (
                "A text/event-stream: at once `retry: 2000` and one `generation` event "
                '(`data: {"generation": N}`, null when the index cannot be read), then one event whenever the '
                "index's generation moves (bursts coalesce), a `: heartbeat` comment every 15 s; the stream "
                "ends after 300 s (clients reconnect). 503 when too many streams are open or the server is "
                "shutting down."
            ),
            "operationId": "events",
            "parameters": [],
            "responses": {
                "200": {
                    "description": "the event stream",
                    "content": {
                        "text/event-stream": {
                            "schema": {
                                "description": "one server-sent event (comments such as heartbeats carry none)",
                                "type": "object",
                                "properties": {
                                    "event": {"const": "generation"},
                                    "data": {"type": "string", "contentMediaType": "application/json", "description": '{"generation": integer | null}'},
                                    "retry": {"type": "integer"},
                                },
                            }
                        }
                    },
                },
                "503": {"description": "too many event streams, or shutting down", "content": {"text/plain": {"schema": {"type": "string"}}}},
            },
        }
    }
    itself = {
        "get": {
            "summary": "This OpenAPI document",
            "operationId": "openapi",
            "parameters": [],
            "responses": {"200": {"description": "the document", "content": {"application/json": {"schema": {"type": "object"}}}}},
        }
    }
    return {"/api/session.html": html, "/api/events": events, "/api/openapi.json": itself}


def openapi_document() -> dict[str, Any]:
    error = {"$ref": "#/components/schemas/Error"}
    paths: dict[str, Any] = {
        "/api/session.export": {
            verb: {
                "summary": "Session log export (streaming ZIP)",
                "operationId": f"sessionExport{verb.title()}",
                "parameters": [
                    {"name": "sessionId", "in": "query", "required": True, "schema": {"type": "string", "minLength": 1}},
                    {
                        "name": "includeDescendants",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["true", "false"]},
                    },
                    {
                        "name": "redact",
                        "in": "query",
                        "required": False,
                        "description": "sessionq extension: `all` writes every log with detected secrets replaced by markers "
                        "(pieces of streamed chunks included); `index`, `off` or none: the server's policy",
                        "schema": {"type": "string", "enum": ["index", "all", "off"]},
                    },
                ],
                "responses": {
                    "200": {"description": "ZIP archive", "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}}},
                    "400": {"description": "missing or invalid sessionId query parameter", "content": {"text/plain": {"schema": {"type": "string"}}}},
                    "404": {"description": "session not found", "content": {"text/plain": {"schema": {"type": "string"}}}},
                    "500": {"description": "export failed to prepare", "content": {"text/plain": {"schema": {"type": "string"}}}},
                },
            }
            for verb in ("get", "head")
        }
    }
    paths.update(_extension_paths())
    responses = {
        "200": {"description": "the method's result, as `sessionq rpc` returns it", "content": {"application/json": {"schema": {}}}},
        "400": {"description": "invalid params or request", "content": {"application/json": {"schema": error}}},
        "404": {"description": "session or event not found", "content": {"application/json": {"schema": error}}},
        "409": {"description": "stale cursor", "content": {"application/json": {"schema": error}}},
        "500": {"description": "query failure", "content": {"application/json": {"schema": error}}},
        "503": {"description": "search disabled", "content": {"application/json": {"schema": error}}},
    }
    for method in METHODS:
        summary, params_schema = _METHOD_DOCS.get(method, (method, {"type": "object", "properties": {}}))
        paths[f"/api/rpc/{method}"] = {
            "get": {
                "summary": f"{summary} (convenience GET: string params verbatim, others as JSON)",
                "operationId": f"{method}Get",
                "parameters": [
                    _query_parameter(name, schema, name in params_schema.get("required", []))
                    for name, schema in params_schema.get("properties", {}).items()
                ],
                "responses": responses,
            },
            "post": {
                "summary": _METHOD_DOCS[method][0] if method in _METHOD_DOCS else method,
                "operationId": method,
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": _METHOD_DOCS[method][1] if method in _METHOD_DOCS else {"type": "object"}
                        }
                    },
                },
                "responses": {
                    **responses,
                    "408": {"description": "request body not received in time", "content": {"application/json": {"schema": error}}},
                    "413": {"description": "request body too large", "content": {"application/json": {"schema": error}}},
                },
            },
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "sessionq", "version": "0.1.0"},
        "paths": paths,
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                        }
                    },
                }
            },
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
