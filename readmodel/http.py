"""The HTTP API: session-log export, JSON reads/searches and the web page.

``create_app`` builds a Starlette app over one index database:

* ``GET``/``HEAD /api/session.export`` — the streaming ZIP of export-spec §9;
* ``POST /api/rpc/<method>`` — every method of :data:`readmodel.rpc.METHODS`
  with the params object as body; the result JSON is byte-identical to
  ``sessionq rpc``'s ``result``; a query error answers
  ``{"error": {"code", "message"}}`` with a 4xx/5xx status;
* ``GET /api/rpc/<method>?name=value…`` — the same calls with the params in
  the query string (string params verbatim, all others as JSON values), for
  links and ``curl``;
* ``GET /api/openapi.json`` and the static page at ``/``.

Safety: a Host-header allow-list (DNS-rebinding defence) and an optional
bearer token, which ``sessionq serve`` requires when binding off loopback
(``?access_token=`` is accepted on the export download only, and the access
log never shows its value).

Resource bounds (:class:`Limits`): a request body larger than ``max_body``
answers 413 and is never held whole (it is read incrementally, chunked
bodies too); a body or request head not received within ``read_timeout``
ends the connection (408 for a body); ``max_connections`` bounds concurrent
connections (uvicorn answers 503 beyond it).  :func:`server_config` applies
the server-side bounds to uvicorn.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote_plus

import msgspec
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import (
    FileResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from readmodel.artifacts import (
    ARTIFACT_NAME,
    TEXT_SLICE,
    AttachmentStore,
    ImageScanner,
    RawArtifact,
    locate_artifact,
    open_raw,
)
from readmodel.errors import SessionQueryError
from readmodel.rpc import METHODS, JsonTextError, RpcError, _as_rpc_error, decode_json_text

if TYPE_CHECKING:
    import uvicorn

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
STATIC_DIR: Final = Path(__file__).with_name("static")
DEFAULT_LEVEL: Final = 6

BAD_EXPORT_PARAMS: Final = "missing or invalid sessionId query parameter"
NOT_FOUND: Final = "session not found"
PREPARE_FAILED: Final = "session log export failed to prepare the stored artifact"
UNAVAILABLE: Final = "session log export is unavailable: missing session-query, session-persistence, or attachments service"
EXPORT_PATH: Final = "/api/session.export"


@dataclass(frozen=True)
class Limits:
    """Bounds on what one client can make the server hold or wait for.

    ``max_body``: bytes of a request body (413 beyond); ``read_timeout``:
    seconds to receive a request head, and separately its body (the
    connection is closed after); ``max_connections``: concurrent connections
    (503 beyond); ``backlog``: pending connections the kernel queues;
    ``keep_alive``: seconds an idle connection stays open between requests.
    """

    max_body: int = 1 << 20
    read_timeout: float = 10.0
    max_connections: int = 100
    backlog: int = 128
    keep_alive: float = 5.0


class ExportStreamError(Exception):
    """A failure after the 200 status: the body is broken, never truncated-but-valid."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def safe_id(session_id: str) -> str:
    """Each UTF-16 code unit outside ``[A-Za-z0-9_-]`` becomes ``_`` (astral → ``__``)."""
    out: list[str] = []
    for ch in session_id:
        if ch.isascii() and (ch.isalnum() or ch in "_-"):
            out.append(ch)
        else:
            out.append("__" if ord(ch) > 0xFFFF else "_")
    return "".join(out)


# --------------------------------------------------------------------------- export


class _Sink:
    """A non-seekable byte sink for :class:`zipfile.ZipFile` (data-descriptor mode)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self.buffered = 0
        self.peak = 0

    def write(self, data: bytes) -> int:
        if data:
            self._parts.append(bytes(data))
            self.buffered += len(data)
            self.peak = max(self.peak, self.buffered)
        return len(data)

    def flush(self) -> None:
        pass

    def drain(self) -> Iterator[bytes]:
        if self._parts:
            data = b"".join(self._parts)
            self._parts.clear()
            self.buffered = 0
            yield data


class Exporter:
    """Prepares and streams one session's export archive."""

    def __init__(
        self,
        db: str,
        engine_factory: Callable[[], Any],
        root: str | None,
        attachments: AttachmentStore | None,
        level: int = DEFAULT_LEVEL,
        slice_units: int = TEXT_SLICE,
    ) -> None:
        if type(level) is not int or not 0 <= level <= 9:
            raise ValueError("sessionExportCompressionLevel must be an integer between 0 and 9")
        self.db = db
        self.engine_factory = engine_factory
        self.root = root
        self.attachments = attachments
        self.level = level
        self.slice_units = slice_units
        # Entries of unknown size must declare ZIP64 up front to exceed 2 GiB;
        # artifacts whose stored file is this large get it (plaintext may be
        # several times the zstd file size).
        self.zip64_threshold = 64 << 20
        self.line_cap = 8 << 20  # image-scan buffering bound for lines without images
        self.last_sink: _Sink | None = None

    def read_raw(self, session_id: str) -> RawArtifact | None:
        return open_raw(locate_artifact(self.db, session_id, self.root), session_id)

    def prepare(self, session_id: str) -> tuple[RawArtifact, Iterator[str]] | None:
        """Open the root artifact and validate its header (raises on failure)."""
        artifact = self.read_raw(session_id)
        if artifact is None:
            return None
        slices = artifact.text_slices(self.slice_units)
        try:
            first = next(slices, None)
        except BaseException:
            artifact.close()
            raise

        def primed() -> Iterator[str]:
            try:
                if first is not None:
                    yield first
                    yield from slices
            finally:
                slices.close()  # type: ignore[attr-defined]
                artifact.close()

        return artifact, primed()

    def _descendants(self, root_id: str) -> list[str]:
        trace = self.engine_factory().trace_session(root_id)
        seen = {root_id}
        order: list[str] = []
        stack = list(reversed(trace.descendants))
        while stack:
            node = stack.pop()
            node_id = node.session.header["id"]
            if node_id in seen:
                continue
            seen.add(node_id)
            order.append(node_id)
            stack.extend(reversed(node.descendants))
        return order

    def _zip64(self, path: Path) -> bool:
        try:
            return path.stat().st_size >= self.zip64_threshold
        except OSError:
            return True

    def stream(
        self, root_id: str, root_slices: Iterator[str], include_descendants: bool, root_path: Path | None = None
    ) -> Iterator[bytes]:
        sink = _Sink()
        self.last_sink = sink
        scanner = ImageScanner(self.line_cap)
        with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=self.level) as archive:
            root_zip64 = True if root_path is None else self._zip64(root_path)
            yield from self._text_entry(archive, sink, ARTIFACT_NAME, root_slices, scanner, root_zip64)
            self._rescan_if_needed(scanner, root_id)
            if include_descendants:
                for child_id in self._descendants(root_id):
                    artifact = self.read_raw(child_id)
                    if artifact is None:
                        raise ExportStreamError(f'subagent "{child_id}" has no stored log artifact')
                    name = f"subagents/{safe_id(child_id)}/{artifact.name}"
                    slices = artifact.text_slices(self.slice_units)
                    yield from self._text_entry(archive, sink, name, slices, scanner, self._zip64(artifact.path))
                    self._rescan_if_needed(scanner, child_id)
            for attachment_id, ref in scanner.refs.items():
                if self.attachments is None:
                    raise ExportStreamError("no attachment store is configured")
                ext = self.attachments.extension(ref)
                with archive.open(f"media/{attachment_id}.{ext}", "w") as entry:
                    for piece in self.attachments.read_image(ref):
                        entry.write(piece)
                        yield from sink.drain()
                yield from sink.drain()
        yield from sink.drain()

    def _rescan_if_needed(self, scanner: ImageScanner, session_id: str) -> None:
        """A long line mentioned an image past the scanner's cap: read the artifact again."""
        if not scanner.needs_rescan:
            return
        artifact = self.read_raw(session_id)
        if artifact is None:
            raise ExportStreamError(f'session "{session_id}" lost its stored log artifact during export')
        scanner.rescan(artifact.text_slices(self.slice_units))

    @staticmethod
    def _text_entry(
        archive: zipfile.ZipFile,
        sink: _Sink,
        name: str,
        slices: Iterable[str],
        scanner: ImageScanner,
        zip64: bool,
    ) -> Iterator[bytes]:
        try:
            with archive.open(name, "w", force_zip64=zip64) as entry:
                for text in slices:
                    entry.write(text.encode("utf-8"))
                    scanner.feed(text)
                    yield from sink.drain()
        finally:
            close = getattr(slices, "close", None)
            if close is not None:
                close()
        scanner.end_artifact()
        yield from sink.drain()


# --------------------------------------------------------------------------- JSON API

_BAD_REQUEST_CODES: Final = frozenset(
    {
        "SESSION_QUERY_INVALID_FILTER",
        "SESSION_QUERY_INVALID_LIMIT",
        "SESSION_QUERY_INVALID_QUERY",
        "SESSION_QUERY_INVALID_CURSOR",
        "SESSION_QUERY_INVALID_WINDOW",
        "SESSION_QUERY_INVALID_CONFIG",
    }
)


def error_status(code: str) -> int:
    if code.endswith("_NOT_FOUND"):
        return 404
    if code in _BAD_REQUEST_CODES:
        return 400
    if code == "SESSION_QUERY_STALE_CURSOR":
        return 409
    if code == "SESSION_QUERY_SEARCH_DISABLED":
        return 503
    return 500


def _json_error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = msgspec.json.encode({"error": {"code": code, "message": message}})
    return Response(body, status_code=status, media_type="application/json", headers=headers)


class _BodyRefused(Exception):
    """A request body the API will not read (too large, or too slow)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


_CLOSE: Final = {"connection": "close"}  # the rest of the body is never read: end the connection


def _too_large(limits: Limits) -> _BodyRefused:
    return _BodyRefused(_json_error(413, "PAYLOAD_TOO_LARGE", f"request body exceeds {limits.max_body} bytes", _CLOSE))


async def read_body(request: Request, limits: Limits) -> bytes:
    """The whole body, read incrementally: never more than ``limits.max_body``
    bytes are held (a larger declared ``Content-Length`` is refused unread),
    and the read must finish within ``limits.read_timeout`` seconds.  Raises
    :class:`_BodyRefused` with the 413/408 answer."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limits.max_body):
        raise _too_large(limits)
    body = bytearray()
    try:
        async with asyncio.timeout(limits.read_timeout):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limits.max_body:
                    raise _too_large(limits)
    except TimeoutError:
        message = f"request body not received within {limits.read_timeout:g} s"
        raise _BodyRefused(_json_error(408, "REQUEST_TIMEOUT", message, _CLOSE)) from None
    return bytes(body)


# --------------------------------------------------------------------------- app


def create_app(
    db: str,
    root: str | None = None,
    attachments: str | None = None,
    token: str | None = None,
    allowed_hosts: Iterable[str] | None = None,
    *,
    port: int | None = None,
    compression_level: int = DEFAULT_LEVEL,
    engine: Any = None,
    limits: Limits = Limits(),
) -> Starlette:
    """The sessionq HTTP app over the index ``db``.

    ``allowed_hosts`` are host names accepted in the Host header (default:
    the loopback names); with ``port`` set the header must carry that port
    (or none).  With ``token`` every ``/api/`` request needs
    ``Authorization: Bearer <token>``; the export download alone also accepts
    ``?access_token=`` (a link cannot carry a header).  ``limits`` bounds
    request bodies (size and read time).
    """
    hosts = frozenset(h.lower() for h in (LOOPBACK_NAMES if allowed_hosts is None else allowed_hosts))
    lock = threading.Lock()
    state: dict[str, Any] = {"engine": engine}

    def get_engine() -> Any:
        with lock:
            if state["engine"] is None:
                from readmodel.query import SessionQuery

                state["engine"] = SessionQuery.open(db)
            return state["engine"]

    store = AttachmentStore(attachments) if attachments is not None else None
    exporter = Exporter(db, get_engine, root, store, compression_level)

    def host_allowed(header: str) -> bool:
        header = header.strip().lower()
        if header.startswith("["):
            name, _, rest = header.partition("]")
            name += "]"
            port_text = rest[1:] if rest.startswith(":") else None
            if rest and port_text is None:
                return False
        else:
            name, sep, port_text_raw = header.partition(":")
            port_text = port_text_raw if sep else None
        if name not in hosts:
            return False
        if port_text is None or port is None:
            return True
        return port_text == str(port)

    def authorized(request: Request) -> bool:
        if token is None:
            return True
        supplied = request.headers.get("authorization", "")
        if supplied.startswith("Bearer ") and hmac.compare_digest(supplied[7:].encode(), token.encode()):
            return True
        if request.scope["path"] != EXPORT_PATH:
            return False  # a token in a URL ends up in logs and histories: downloads only
        query_token = request.query_params.get("access_token")
        return query_token is not None and hmac.compare_digest(query_token.encode(), token.encode())

    async def export(request: Request) -> Response:
        params = dict(request.query_params)  # last value wins for repeated names
        session_id = params.get("sessionId")
        include = params.get("includeDescendants")
        if not session_id or include not in (None, "true", "false"):
            return PlainTextResponse(BAD_EXPORT_PARAMS, status_code=400)
        head = request.method == "HEAD"
        if exporter.attachments is None:
            return _plain(UNAVAILABLE, 500, head)
        try:
            prepared = await run_in_threadpool(exporter.prepare, session_id)
        except Exception:  # noqa: BLE001 - private-safe: never echo host paths
            return _plain(PREPARE_FAILED, 500, head)
        if prepared is None:
            return _plain(NOT_FOUND, 404, head)
        artifact, slices = prepared
        headers = {"content-disposition": f'attachment; filename="dsh-session-{safe_id(session_id)}.zip"'}
        if head:
            artifact.close()
            return Response(None, status_code=200, media_type="application/zip", headers=headers)
        body = exporter.stream(session_id, slices, include == "true", artifact.path)
        return StreamingResponse(body, media_type="application/zip", headers=headers)

    async def rpc(request: Request) -> Response:
        method = request.path_params["method"]
        handler = METHODS.get(method)
        if handler is None:
            return _json_error(404, "METHOD_NOT_FOUND", f"Method not found: {method}")
        if request.method == "GET":
            try:
                params = query_params(method, request.query_params.multi_items())
            except RpcError as error:
                return _json_error(400, "INVALID_PARAMS", error.message)
        else:
            try:
                raw = await read_body(request, limits)
            except _BodyRefused as refused:
                return refused.response
            except ClientDisconnect:
                return Response(None, status_code=400)  # nobody is left to read it
            try:
                params = decode_json_text(raw) if raw.strip(b" \t\r\n") else {}
            except JsonTextError as error:
                return _json_error(400, "PARSE_ERROR", f"request body is {error.detail or 'not valid JSON'}")
            if type(params) is not dict:
                return _json_error(400, "INVALID_PARAMS", "Invalid params: params must be an object")

        def call() -> bytes:
            return handler(get_engine(), params)

        try:
            result = await run_in_threadpool(call)
        except RpcError as error:
            return _json_error(400, "INVALID_PARAMS", error.message)
        except SessionQueryError as error:
            return _json_error(error_status(error.code), error.code, error.message)
        except Exception as error:  # noqa: BLE001
            mapped = _as_rpc_error(error)
            name = (mapped.data or {}).get("name", "INTERNAL_ERROR") if isinstance(mapped.data, dict) else "INTERNAL_ERROR"
            return _json_error(500, name, mapped.message)
        return Response(result, media_type="application/json")

    async def openapi(request: Request) -> Response:
        return Response(msgspec.json.encode(openapi_document()), media_type="application/json")

    async def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        path = STATIC_DIR / name
        if "/" in name or name.startswith(".") or not path.is_file():
            return PlainTextResponse("not found", status_code=404)
        return FileResponse(path)

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        Route(EXPORT_PATH, export, methods=["GET", "HEAD"]),
        Route("/api/rpc/{method}", rpc, methods=["GET", "POST"]),
        Route("/api/openapi.json", openapi, methods=["GET"]),
    ]
    app = Starlette(routes=routes)

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            rejection: Response | None = None
            if not host_allowed(request.headers.get("host", "")):
                rejection = PlainTextResponse("invalid host header", status_code=421)
            elif scope["path"].startswith("/api/") and not authorized(request):
                rejection = PlainTextResponse("unauthorized", status_code=401, headers={"www-authenticate": "Bearer"})
            if rejection is not None:
                await rejection(scope, receive, send)
                return
        await inner(scope, receive, send)

    inner = app.build_middleware_stack()
    app.middleware_stack = guarded  # type: ignore[assignment]
    app.state.exporter = exporter
    return app


# --------------------------------------------------------------------------- server


def scrub_access_token(target: str) -> str:
    """``target`` (a path with its raw query) with every ``access_token``
    value replaced by ``***``; names are compared decoded, as the app reads them."""
    path, sep, query = target.partition("?")
    if not sep:
        return target
    parts = []
    for part in query.split("&"):
        name = part.partition("=")[0]
        parts.append(name + "=***" if unquote_plus(name) == "access_token" else part)
    return path + "?" + "&".join(parts)


class AccessTokenScrubber(logging.Filter):
    """Keeps ``?access_token=`` values out of uvicorn's access log lines
    (whose third argument is the request target)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], scrub_access_token(args[2]), *args[3:])
        return True


def _head_deadline_protocol(head_timeout: float) -> type:
    """uvicorn's h11 protocol with a deadline on each request head.

    uvicorn's own keep-alive timer stops at the first byte of a request, so
    a client trickling a head (or the unread body of an answered request)
    could hold a connection forever.  This timer runs whenever the
    connection waits for a request head (h11: we owe no response) and closes
    the connection when the head is not complete within ``head_timeout``.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadlineProtocol(H11Protocol):  # type: ignore[misc]
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._watch_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_head_timer()
            super().connection_lost(exc)

        def _watch_head(self) -> None:
            if self.conn.our_state is h11.SEND_RESPONSE or self.transport.is_closing():
                self._stop_head_timer()  # a request head arrived: the app owns the pace now
            elif self._head_timer is None:
                self._head_timer = self.loop.call_later(head_timeout, self._head_overdue)

        def _stop_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_overdue(self) -> None:
            self._head_timer = None
            if self.conn.our_state is not h11.SEND_RESPONSE:
                self.transport.close()

    return HeadDeadlineProtocol


def server_config(app: Any, host: str, port: int, limits: Limits = Limits(), **options: Any) -> uvicorn.Config:
    """The uvicorn configuration ``sessionq serve`` runs ``app`` with: the
    connection bounds of ``limits``, the head deadline, and an access log
    that never shows an access token.  ``options`` go to uvicorn as is."""
    import uvicorn

    options.setdefault("log_level", "info")
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=_head_deadline_protocol(limits.read_timeout),
        limit_concurrency=limits.max_connections,
        backlog=limits.backlog,
        timeout_keep_alive=limits.keep_alive,
        **options,
    )
    access = logging.getLogger("uvicorn.access")  # configured by uvicorn.Config above
    if not any(isinstance(f, AccessTokenScrubber) for f in access.filters):
        access.addFilter(AccessTokenScrubber())
    return config


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


def _plain(text: str, status: int, head: bool) -> Response:
    if head:
        return Response(None, status_code=status, media_type="text/plain; charset=utf-8")
    return PlainTextResponse(text, status_code=status)


# --------------------------------------------------------------------------- OpenAPI

_STR: Final = {"type": "string"}
_SEQ: Final = {"type": "integer", "minimum": 0}
_FILTERS: Final = {"type": "array", "items": {"type": "object", "required": ["kind"], "properties": {"kind": _STR}}}
_WINDOW: Final = {"type": "integer", "minimum": 0, "maximum": 50}
_LIMIT: Final = {"type": ["integer", "null"], "minimum": 1}
_CURSOR: Final = {"type": ["string", "null"]}
_OPTIONAL_FILTERS: Final = {**_FILTERS, "type": ["array", "null"]}  # null means absent, as in the reference


def _params(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


# name → (summary, params schema); semantic rules (filter kinds, ranges,
# cursor validity) are the engine's and answer 400 with the query error code.
_METHOD_DOCS: Final[dict[str, tuple[str, dict[str, Any]]]] = {
    "listSessions": ("listSessions(): every session record", _params([])),
    "filterSessions": ("filterSessions({filters})", _params(["filters"], filters=_FILTERS)),
    "readSession": ("readSession({sessionId}): header and events", _params(["sessionId"], sessionId=_STR)),
    "listEvents": ("listEvents({sessionId}): event records with their surface", _params(["sessionId"], sessionId=_STR)),
    "filterEvents": (
        "filterEvents({sessionId, filters})",
        _params(["sessionId", "filters"], sessionId=_STR, filters=_FILTERS),
    ),
    "readSurface": ("readSurface({sessionId}): the folded surface", _params(["sessionId"], sessionId=_STR)),
    "readEvent": (
        "readEvent({sessionId, seq, before?, after?})",
        _params(["sessionId", "seq"], sessionId=_STR, seq=_SEQ, before=_WINDOW, after=_WINDOW),
    ),
    "readEventRange": (
        "readEventRange({sessionId, startSeq?, limit?}): a run of events with their surface (sessionq extension)",
        _params(["sessionId"], sessionId=_STR, startSeq=_SEQ, limit={"type": "integer", "minimum": 1, "maximum": 5000}),
    ),
    "traceSession": ("traceSession({sessionId}): ancestors and descendants", _params(["sessionId"], sessionId=_STR)),
    "traceEvent": ("traceEvent({sessionId, seq})", _params(["sessionId", "seq"], sessionId=_STR, seq=_SEQ)),
    "readTitleSnapshots": (
        "readTitleSnapshots({sessionIds})",
        _params(["sessionIds"], sessionIds={"type": "array", "items": _STR}),
    ),
    "readTitle": ("readTitle({sessionId})", _params(["sessionId"], sessionId=_STR)),
    "searchSessions": (
        "searchSessions({query, sessionFilters?, eventFilters?, limit?, cursor?})",
        _params(
            ["query"],
            query=_STR,
            sessionFilters=_OPTIONAL_FILTERS,
            eventFilters=_OPTIONAL_FILTERS,
            limit=_LIMIT,
            cursor=_CURSOR,
        ),
    ),
    "searchEvents": (
        "searchEvents({sessionId, query, filters?, limit?, cursor?})",
        _params(
            ["sessionId", "query"],
            sessionId=_STR,
            query=_STR,
            filters=_OPTIONAL_FILTERS,
            limit=_LIMIT,
            cursor=_CURSOR,
        ),
    ),
    "status": ("status(): index status", _params([])),
}


def _query_parameter(name: str, schema: dict[str, Any], required: bool) -> dict[str, Any]:
    if _is_text(schema):
        return {"name": name, "in": "query", "required": required, "schema": {"type": "string"}}
    return {"name": name, "in": "query", "required": required, "content": {"application/json": {"schema": schema}}}


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
