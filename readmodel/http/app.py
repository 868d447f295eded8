"""The HTTP API: session-log export, JSON reads/searches and the web page.

``create_app`` builds a Starlette app over one index database:

* ``GET``/``HEAD /api/session.export`` — the streaming ZIP of export-spec §9;
* ``GET``/``HEAD /api/session.html?sessionId=…[&includeLogOnly=true][&redact=all]`` — the
  session's transcript as one self-contained HTML file
  (:mod:`readmodel.export.transcript`, a sessionq extension);
* ``POST /api/rpc/<method>`` — every method of :data:`readmodel.rpc.METHODS`
  with the params object as body; the result JSON is byte-identical to
  ``sessionq rpc``'s ``result``; a query error answers
  ``{"error": {"code", "message"}}`` with a 4xx/5xx status;
* ``GET /api/rpc/<method>?name=value…`` — the same calls with the params in
  the query string (string params verbatim, all others as JSON values), for
  links and ``curl``;
* ``GET /api/events`` — index generations as server-sent events
  (:mod:`readmodel.http.events`, a sessionq extension the page listens to);
* ``GET /api/openapi.json`` and the static page at ``/``.

Safety: a Host-header allow-list (DNS-rebinding defence) and an optional
bearer token, which ``sessionq serve`` requires when binding off loopback
(``?access_token=`` is accepted on the two export downloads only, and the access
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
import errno
import hmac
import ipaddress
import logging
import socket
import threading
from collections.abc import Iterable
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

from readmodel.export.archive import DEFAULT_LEVEL, Exporter, safe_id
from readmodel.export.artifacts import (
    AttachmentStore,
)
from readmodel.export.transcript import TRANSCRIPT_CSS, TranscriptOptions, prepare_transcript, session_title
from readmodel.core.errors import SessionQueryError
from readmodel.http.events import EVENTS_PATH, FeedLimits, GenerationFeed
from readmodel.http.openapi import openapi_document, query_params
from readmodel.projection.secrets import POLICIES, Policy, policy_from_env, redacts_raw
from readmodel.rpc import METHODS, JsonTextError, RpcError, _as_rpc_error, decode_json_text

if TYPE_CHECKING:
    import uvicorn

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
STATIC_DIR: Final = Path(__file__).with_name("static")

BAD_EXPORT_PARAMS: Final = "missing or invalid sessionId query parameter"
BAD_REDACT_PARAM: Final = "invalid redact query parameter (index, all or off)"
NOT_FOUND: Final = "session not found"
PREPARE_FAILED: Final = "session log export failed to prepare the stored artifact"
UNAVAILABLE: Final = "session log export is unavailable: missing session-query, session-persistence, or attachments service"
EXPORT_PATH: Final = "/api/session.export"
HTML_EXPORT_PATH: Final = "/api/session.html"
DOWNLOAD_PATHS: Final = frozenset({EXPORT_PATH, HTML_EXPORT_PATH})
"""Routes a link downloads: they alone accept ``?access_token=``."""
HTML_EXPORT_HEADERS: Final = {
    # The file runs no script and loads nothing; if a browser renders it from here, it still cannot.
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox allow-popups allow-popups-to-escape-sandbox",
    "x-content-type-options": "nosniff",
}


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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
    feed_limits: FeedLimits = FeedLimits(),
    redact: Policy | None = None,
) -> Starlette:
    """The sessionq HTTP app over the index ``db``.

    ``allowed_hosts`` are host names accepted in the Host header (default:
    the loopback names); with ``port`` set the header must carry that port
    (or none).  With ``token`` every ``/api/`` request needs
    ``Authorization: Bearer <token>``; the two export downloads alone also accept
    ``?access_token=`` (a link cannot carry a header).  ``limits`` bounds
    request bodies (size and read time); ``feed_limits`` the event stream
    (poll interval, heartbeat, subscribers).  ``redact`` is the secret-redaction
    policy (``$SESSIONQ_REDACT`` when not given): under ``all`` raw reads and
    exports are redacted whatever a request asks; a request's ``redact=all``
    asks for it under the other policies.
    """
    policy = policy_from_env(redact)
    hosts = frozenset(h.lower() for h in (LOOPBACK_NAMES if allowed_hosts is None else allowed_hosts))
    lock = threading.Lock()
    state: dict[str, Any] = {"engine": engine}

    def get_engine() -> Any:
        with lock:
            if state["engine"] is None:
                from readmodel.query import SessionQuery

                state["engine"] = SessionQuery.open(db, redact=policy)
            return state["engine"]

    feed = GenerationFeed(get_engine, feed_limits)
    store = AttachmentStore(attachments) if attachments is not None else None
    exporter = Exporter(db, get_engine, root, store, compression_level, redact=redacts_raw(policy))

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
        if request.scope["path"] not in DOWNLOAD_PATHS:
            return False  # a token in a URL ends up in logs and histories: downloads only
        query_token = request.query_params.get("access_token")
        return query_token is not None and hmac.compare_digest(query_token.encode(), token.encode())

    async def export(request: Request) -> Response:
        params = dict(request.query_params)  # last value wins for repeated names
        session_id = params.get("sessionId")
        include = params.get("includeDescendants")
        redact = params.get("redact")  # a sessionq extension: ``all`` scrubs every log in the archive
        if not session_id or include not in (None, "true", "false") or redact not in (None, *POLICIES):
            message = BAD_EXPORT_PARAMS if redact in (None, *POLICIES) else BAD_REDACT_PARAM
            return PlainTextResponse(message, status_code=400)
        head = request.method == "HEAD"
        if exporter.attachments is None:
            return _plain(UNAVAILABLE, 500, head)
        try:
            prepared = await run_in_threadpool(lambda: exporter.prepare(session_id, redact=True if redact == "all" else None))
        except Exception:  # noqa: BLE001 - private-safe: never echo host paths
            return _plain(PREPARE_FAILED, 500, head)
        if prepared is None:
            return _plain(NOT_FOUND, 404, head)
        artifact, slices = prepared
        headers = {"content-disposition": f'attachment; filename="dsh-session-{safe_id(session_id)}.zip"'}
        if head:
            artifact.close()
            return Response(None, status_code=200, media_type="application/zip", headers=headers)
        body = exporter.stream(session_id, slices, include == "true", artifact.path, redact=True if redact == "all" else None)
        return StreamingResponse(body, media_type="application/zip", headers=headers)

    async def export_html(request: Request) -> Response:
        params = dict(request.query_params)  # last value wins for repeated names
        session_id = params.get("sessionId")
        log_only = params.get("includeLogOnly")
        redact = params.get("redact")  # as on the ZIP export: ``all`` scrubs detected secrets
        head = request.method == "HEAD"
        if not session_id or log_only not in (None, "true", "false") or redact not in (None, *POLICIES):
            message = "sessionId is required; includeLogOnly must be true or false"
            message = message if redact in (None, *POLICIES) else BAD_REDACT_PARAM
            return _json_error(400, "INVALID_PARAMS", message) if not head else _head_error(400)
        # A request can add redaction, never lift the server's ``all`` policy.
        options = TranscriptOptions(include_log_only=log_only == "true", redact=redact == "all" or redacts_raw(policy))

        def prepare() -> Any:
            engine = get_engine()
            if head:  # the status of the GET without the reading
                engine.read_event_range(session_id, 0, 1)
                return None
            return prepare_transcript(engine, session_id, title=session_title(engine, session_id), options=options)

        try:
            transcript = await run_in_threadpool(prepare)
        except SessionQueryError as error:
            status = error_status(error.code)
            return _head_error(status) if head else _json_error(status, error.code, error.message)
        except Exception as error:  # noqa: BLE001 - one JSON answer, never a traceback
            return _head_error(500) if head else _json_error(500, "INTERNAL_ERROR", _as_rpc_error(error).message)
        headers = {"content-disposition": f'attachment; filename="dsh-session-{safe_id(session_id)}.html"', **HTML_EXPORT_HEADERS}
        if head:
            return Response(None, status_code=200, media_type="text/html; charset=utf-8", headers=headers)
        return StreamingResponse(transcript.chunks(), media_type="text/html; charset=utf-8", headers=headers)

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
        path = TRANSCRIPT_CSS if name == TRANSCRIPT_CSS.name else STATIC_DIR / name  # shared with the HTML export
        if "/" in name or name.startswith(".") or not path.is_file():
            return PlainTextResponse("not found", status_code=404)
        return FileResponse(path)

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        Route(EXPORT_PATH, export, methods=["GET", "HEAD"]),
        Route(HTML_EXPORT_PATH, export_html, methods=["GET", "HEAD"]),
        Route("/api/rpc/{method}", rpc, methods=["GET", "POST"]),
        Route("/api/openapi.json", openapi, methods=["GET"]),
        Route(EVENTS_PATH, feed.endpoint, methods=["GET"]),
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
    app.state.feed = feed
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


class StartupError(Exception):
    """Why ``sessionq serve`` cannot start (one line, no traceback)."""


def check_index(db: str) -> None:
    """Raise :class:`StartupError` unless ``db`` is a sessionq index this
    version reads (missing, empty, foreign, another revision, damaged)."""
    from readmodel.store.database import open_reader
    from readmodel.store.urls import is_postgres

    try:
        if is_postgres(db):
            from readmodel.store.pgreader import PostgresIndexStore

            PostgresIndexStore.open(db).close()
            return
        open_reader(db).dispose()
    except SessionQueryError as exc:
        raise StartupError(exc.message) from None


def bind_listener(host: str, port: int) -> socket.socket:
    """The listening socket for ``host:port``, bound now so that a taken port
    (or an unknown host) is one :class:`StartupError` before the server starts."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: restarts do not wait for TIME_WAIT
        sock.bind((host, port))
        sock.listen(Limits.backlog)
        sock.set_inheritable(True)
    except OSError as exc:
        sock.close()
        reason = "the port is already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise StartupError(f"cannot listen on {host}:{port}: {reason}") from None
    return sock


def server(config: uvicorn.Config) -> uvicorn.Server:
    """A uvicorn server for ``config`` whose graceful shutdown first ends the
    app's event streams (an open page would otherwise hold it forever)."""
    import uvicorn

    class Server(uvicorn.Server):  # type: ignore[misc]
        async def shutdown(self, sockets: Any = None) -> None:
            feed = getattr(getattr(self.config.app, "state", None), "feed", None)
            if feed is not None:
                feed.close()
            await super().shutdown(sockets)

    return Server(config)


def _head_error(status: int) -> Response:
    """The head of a JSON error answer (HEAD carries no body)."""
    return Response(None, status_code=status, media_type="application/json")


def _plain(text: str, status: int, head: bool) -> Response:
    if head:
        return Response(None, status_code=status, media_type="text/plain; charset=utf-8")
    return PlainTextResponse(text, status_code=status)
