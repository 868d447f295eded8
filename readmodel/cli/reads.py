"""The read-side ``sessionq`` commands: the exact reads and ``rpc``.

``sessions``, ``read``, ``events``, ``docs``, ``surface``, ``event``,
``trace``, ``trace-event``, ``title`` and ``rpc`` are plain click commands
collected in :data:`COMMANDS`; :mod:`indexer.cli` registers them on the
``sessionq`` group (``readmodel`` never imports ``indexer``).

Human output is a table; ``--json`` prints the reference's exact JSON.
Filters come as flags and/or ``--filters JSON`` (the reference's filter
array verbatim; flag clauses are appended after it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
import msgspec

from readmodel.cli.support import (
    db_option,
    default_attachments,
    default_root,
    emit_json,
    emit_json_bytes,
    handles_errors,
    json_option,
    refuse_impossible_db,
)

F = TypeVar("F", bound=Callable[..., Any])


def _open(db: str) -> Any:
    from readmodel.query import SessionQuery

    return SessionQuery.open(db)


def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


class _Number(click.ParamType):
    """A JSON number: an integer when it reads as one, else a float."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | float:
        if isinstance(value, (int, float)):
            return value
        try:
            return int(value)
        except ValueError:
            pass
        try:
            return float(value)
        except ValueError:
            self.fail(f"{value!r} is not a number", param, ctx)


NUMBER = _Number()


def _filters_json(text: str | None) -> list[Any]:
    """``--filters JSON``: the reference's filter array verbatim (validated by the engine)."""
    if text is None:
        return []
    try:
        value = msgspec.json.decode(text.encode())
    except msgspec.DecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--filters") from exc
    # A non-array is passed on: the engine answers SESSION_QUERY_INVALID_FILTER.
    return value


def _range(kind: str, low: Any, high: Any) -> list[dict[str, Any]]:
    if low is None and high is None:
        return []
    clause: dict[str, Any] = {"kind": kind}
    if low is not None:
        clause["from"] = low
    if high is not None:
        clause["to"] = high
    return [clause]


def _values(kind: str, values: tuple[str, ...], with_null: bool = False) -> list[dict[str, Any]]:
    if not values and not with_null:
        return []
    return [{"kind": kind, "values": [*values, *([None] if with_null else [])]}]


def _combine(base: Any, extra: list[dict[str, Any]]) -> Any:
    if not extra:
        return base
    if isinstance(base, list):
        return [*base, *extra]
    return base  # invalid --filters: let the engine report it


def _options(*options: Callable[[F], F]) -> Callable[[F], F]:
    """Apply a group of click options (in the order they are listed in --help)."""

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


session_filter_options = _options(
    click.option("--id", "ids", multiple=True, help="Only these session ids (repeatable)."),
    click.option("--cwd", "cwds", multiple=True, help="Only sessions in this working directory (repeatable)."),
    click.option("--no-cwd", is_flag=True, help="Also match sessions without a cwd."),
    click.option("--parent", "parents", multiple=True, help="Only children of this session (repeatable)."),
    click.option("--no-parent", is_flag=True, help="Also match sessions without a parent."),
    click.option("--created-from", type=NUMBER, help="createdAt lower bound (epoch ms, inclusive)."),
    click.option("--created-to", type=NUMBER, help="createdAt upper bound (epoch ms, inclusive)."),
)

event_filter_options = _options(
    click.option("--seq-from", type=NUMBER, help="Event seq lower bound (inclusive)."),
    click.option("--seq-to", type=NUMBER, help="Event seq upper bound (inclusive)."),
    click.option("--time-from", type=NUMBER, help="Event time lower bound (epoch ms, inclusive)."),
    click.option("--time-to", type=NUMBER, help="Event time upper bound (epoch ms, inclusive)."),
    click.option("--type", "types", multiple=True, help="Only events of this type (repeatable)."),
    click.option(
        "--surface", "surfaces", multiple=True, type=click.Choice(["current", "shadowed", "log-only"]), help="Only this surface (repeatable)."
    ),
)


def _session_clauses(options: dict[str, Any]) -> list[dict[str, Any]]:
    """Session filter clauses from the ``session_filter_options`` values (consumed)."""
    return [
        *_values("id", options.pop("ids")),
        *_values("cwd", options.pop("cwds"), options.pop("no_cwd")),
        *_range("created-at", options.pop("created_from"), options.pop("created_to")),
        *_values("parent", options.pop("parents"), options.pop("no_parent")),
    ]


def _event_clauses(options: dict[str, Any]) -> list[dict[str, Any]]:
    """Event metadata clauses from the ``event_filter_options`` values (consumed)."""
    return [
        *_range("seq", options.pop("seq_from"), options.pop("seq_to")),
        *_range("time", options.pop("time_from"), options.pop("time_to")),
        *_values("type", options.pop("types")),
        *_values("surface", options.pop("surfaces")),
    ]


def _show(value: Any, as_json: bool, printer: str, **extra: Any) -> None:
    """The exact JSON with ``--json``, else the named table printer of :mod:`readmodel.cli.presentation`."""
    if as_json:
        emit_json(value)
        return
    from readmodel.cli import presentation

    getattr(presentation, printer)(_builtins(value), **extra)


# --------------------------------------------------------------------------- commands


@click.command("sessions")
@session_filter_options
@click.option("--live", is_flag=True, help="Only sessions that are live (availability).")
@click.option("--persisted", is_flag=True, help="Only sessions that are persisted (availability).")
@click.option("--filters", "filters_json", help="A SessionResultFilter[] JSON array.")
@db_option
@json_option
@handles_errors
def sessions_command(live: bool, persisted: bool, filters_json: str | None, db: str, as_json: bool, **options: Any) -> None:
    """listSessions / filterSessions: every session, newest first."""
    availability = tuple(name for name, on in (("live", live), ("persisted", persisted)) if on)
    clauses = [*_session_clauses(options), *_values("availability", availability)]
    query = _open(db)
    if filters_json is None and not clauses:
        records = query.list_sessions()
    else:
        records = query.filter_sessions(_combine(_filters_json(filters_json), clauses))
    _show(records, as_json, "print_sessions")


@click.command("read")
@click.argument("session_id")
@db_option
@json_option
@handles_errors
def read_command(session_id: str, db: str, as_json: bool) -> None:
    """readSession: the header and the complete raw log."""
    _show(_open(db).read_session(session_id), as_json, "print_log")


@click.command("events")
@click.argument("session_id")
@db_option
@json_option
@handles_errors
def events_command(session_id: str, db: str, as_json: bool) -> None:
    """listEvents: seq, type, time and surface of every event."""
    _show(_open(db).list_events(session_id), as_json, "print_records")


@click.command("docs")
@click.argument("session_id")
@event_filter_options
@click.option("--text", help="Literal, whitespace-flexible, case-insensitive text.")
@click.option("--filters", "filters_json", help="A SessionEventResultFilter[] JSON array.")
@db_option
@json_option
@handles_errors
def docs_command(session_id: str, text: str | None, filters_json: str | None, db: str, as_json: bool, **options: Any) -> None:
    """filterEvents: the session's semantic documents, filtered."""
    clauses = [*_event_clauses(options), *([{"kind": "text", "text": text}] if text is not None else [])]
    _show(_open(db).filter_events(session_id, _combine(_filters_json(filters_json), clauses)), as_json, "print_documents")


@click.command("surface")
@click.argument("session_id")
@db_option
@json_option
@handles_errors
def surface_command(session_id: str, db: str, as_json: bool) -> None:
    """readSurface: the current model surface in model-history order."""
    _show(_open(db).read_surface(session_id), as_json, "print_surface")


@click.command("event")
@click.argument("session_id")
@click.argument("seq", type=int)
@click.option("--before", type=int, help="Events before the target (0..readWindowMax).")
@click.option("--after", type=int, help="Events after the target (0..readWindowMax).")
@db_option
@json_option
@handles_errors
def event_command(session_id: str, seq: int, before: int | None, after: int | None, db: str, as_json: bool) -> None:
    """readEvent: one event with its neighbours."""
    request: dict[str, Any] = {"sessionId": session_id, "seq": seq}
    if before is not None:
        request["before"] = before
    if after is not None:
        request["after"] = after
    window = _open(db).read_event(request)
    if as_json:
        emit_json(window)
        return
    from readmodel.cli.presentation import print_window

    print_window(_builtins(window))


@click.command("trace")
@click.argument("session_id")
@db_option
@json_option
@handles_errors
def trace_command(session_id: str, db: str, as_json: bool) -> None:
    """traceSession: ancestors and descendants of a session."""
    from readmodel.projection.lineage import encode_lineage_trace, lineage_trace_to_builtins

    trace = _open(db).trace_session(session_id)
    if as_json:
        emit_json_bytes(encode_lineage_trace(trace))
        return
    from readmodel.cli.presentation import print_lineage

    print_lineage(lineage_trace_to_builtins(trace))


@click.command("trace-event")
@click.argument("session_id")
@click.argument("seq", type=int)
@db_option
@json_option
@handles_errors
def trace_event_command(session_id: str, seq: int, db: str, as_json: bool) -> None:
    """traceEvent: replacements and provenance of one event."""
    observation = _open(db).trace_event({"sessionId": session_id, "seq": seq})
    if as_json:
        emit_json(observation)
        return
    from readmodel.cli.presentation import print_event_trace

    print_event_trace(_builtins(observation))


@click.command("title")
@click.argument("session_ids", nargs=-1, required=True)
@db_option
@json_option
@handles_errors
def title_command(session_ids: tuple[str, ...], db: str, as_json: bool) -> None:
    """readTitleSnapshots: the title of each session (per-id failures are reported, not fatal)."""
    from readmodel.core.requests import title_result_to_builtins

    results = [title_result_to_builtins(result) for result in _open(db).read_title_snapshots(list(session_ids))]
    if as_json:
        emit_json(results)
        return
    from readmodel.cli.presentation import print_titles

    print_titles(results)


@click.command("search")
@click.argument("query")
@click.option("--session", "session_id", help="Search within this session (searchEvents) instead of across sessions.")
@click.option("--limit", type=int, help="Page size (default 20, at most 100).")
@click.option("--cursor", help="Continue from a previous page's nextCursor.")
@session_filter_options
@event_filter_options
@click.option("--session-filters", "session_filters_json", help="A SessionResultFilter[] JSON array.")
@click.option("--event-filters", "event_filters_json", help="A SessionEventMetadataFilter[] JSON array.")
@db_option
@json_option
@handles_errors
def search_command(
    query: str,
    session_id: str | None,
    limit: int | None,
    cursor: str | None,
    session_filters_json: str | None,
    event_filters_json: str | None,
    db: str,
    as_json: bool,
    **options: Any,
) -> None:
    """searchSessions (ranked, one hit per session) or, with --session, searchEvents."""
    event_filters = _combine(_filters_json(event_filters_json), _event_clauses(options))
    session_filters = _combine(_filters_json(session_filters_json), _session_clauses(options))
    request: dict[str, Any] = {"query": query}
    if limit is not None:
        request["limit"] = limit
    if cursor is not None:
        request["cursor"] = cursor
    engine = _open(db)
    if session_id is not None:
        page = engine.search_events({**request, "sessionId": session_id, "filters": event_filters})
    else:
        page = engine.search_sessions({**request, "sessionFilters": session_filters, "eventFilters": event_filters})
    _show(page, as_json, "print_search_page", within_session=session_id is not None)


@click.command("rpc")
@db_option
def rpc_command(db: str) -> None:
    """JSON-RPC 2.0 over stdin/stdout, one JSON object per line; exits 0 at end of input."""
    from readmodel.rpc import Dispatcher, serve

    refuse_impossible_db(db)
    dispatcher = Dispatcher(lambda: _open(db))
    try:
        serve(dispatcher, sys.stdin.buffer, sys.stdout.buffer)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        # The client went away; nothing left to answer.
        sys.stderr.close()


COMMANDS: list[click.Command] = [
    sessions_command,
    read_command,
    events_command,
    docs_command,
    surface_command,
    event_command,
    trace_command,
    trace_event_command,
    title_command,
    search_command,
    rpc_command,
]

# ``mcp``: the model-facing session tools over MCP (readmodel.tools).
from readmodel.cli.mcp import mcp_command

COMMANDS.append(mcp_command)


# ``serve``: the HTTP API, the session-log export and the web page (readmodel.http.app).
@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback by default).")
@click.option("--port", default=8765, show_default=True, type=int)
@db_option
@click.option("--root", "root", default=None, help="Session log root (relative index paths resolve against it).")
@click.option(
    "--attachments",
    default=None,
    help="Attachment store for export media.",
    show_default="$SESSIONQ_ATTACHMENTS or $DSH_HOME/attachments/v1",
)
@click.option("--token", default=None, envvar="SESSIONQ_TOKEN", help="Bearer token (required off loopback).")
@click.option("--max-body", default=1 << 20, show_default=True, type=click.IntRange(min=0), help="Largest request body in bytes (413 beyond).")
@click.option(
    "--read-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds to receive a request head, and its body, before the connection is closed.",
)
@click.option("--max-connections", default=100, show_default=True, type=click.IntRange(min=1), help="Concurrent connections (503 beyond).")
def serve_command(
    host: str,
    port: int,
    db: str,
    root: str | None,
    attachments: str | None,
    token: str | None,
    max_body: int,
    read_timeout: float,
    max_connections: int,
) -> None:
    """HTTP API (/api/rpc/<method>, /api/session.export) and the web page."""
    import uvicorn

    from readmodel.http.app import LOOPBACK_NAMES, Limits, create_app, is_loopback, server_config

    refuse_impossible_db(db)
    if root is None:
        root = default_root()
    if attachments is None:
        attachments = default_attachments()
    hosts = list(LOOPBACK_NAMES)
    if not is_loopback(host):
        if not token:
            raise click.UsageError("--token is required when binding to a non-loopback address")
        hosts.append(host if ":" not in host else f"[{host}]")
    limits = Limits(max_body=max_body, read_timeout=read_timeout, max_connections=max_connections)
    app = create_app(db, root=root, attachments=attachments, token=token, allowed_hosts=hosts, port=port, limits=limits)
    server = uvicorn.Server(server_config(app, host, port, limits))
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:
        sys.exit(1)  # the server could not start (e.g. the port is taken); uvicorn logged why


COMMANDS.append(serve_command)


@click.command("export")
@click.argument("session_id")
@click.option("--include-descendants", is_flag=True, help="Also export every descendant (subagent) log.")
@click.option("-o", "--output", "output", default=None, help="ZIP file to write (default: dsh-session-<id>.zip).")
@db_option
@click.option("--root", "root", default=None, help="Session log root (relative index paths resolve against it).")
@click.option("--attachments", default=None, help="Attachment store for export media.")
def export_command(
    session_id: str, include_descendants: bool, output: str | None, db: str, root: str | None, attachments: str | None
) -> None:
    """Write the ZIP the HTTP export endpoint serves."""
    import os

    from readmodel.export.artifacts import AttachmentStore
    from readmodel.export.archive import Exporter, safe_id

    if attachments is None:
        attachments = default_attachments()
    if root is None:
        root = default_root()
    engines: list[Any] = []

    def engine() -> Any:
        if not engines:
            engines.append(_open(db))
        return engines[0]

    exporter = Exporter(db, engine, root, AttachmentStore(attachments))
    try:
        prepared = exporter.prepare(session_id)
    except Exception as error:  # noqa: BLE001
        raise click.ClickException(f"export failed to prepare the stored artifact: {error}") from None
    if prepared is None:
        raise click.ClickException("session not found")
    target = output or f"dsh-session-{safe_id(session_id)}.zip"
    partial = target + ".partial"
    try:
        with open(partial, "wb") as fh:
            fh.writelines(exporter.stream(session_id, prepared[1], include_descendants, prepared[0].path))
        os.replace(partial, target)
    except Exception as error:  # noqa: BLE001 - never leave a truncated archive behind
        if os.path.exists(partial):
            os.unlink(partial)
        raise click.ClickException(f"export failed: {error}") from None
    finally:
        for opened in engines:
            opened.close()
    click.echo(target)


COMMANDS.append(export_command)
