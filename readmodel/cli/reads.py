"""The read-side ``sessionq`` commands: the exact reads and ``rpc``.

``read``, ``events``, ``docs``, ``surface``, ``event``, ``trace``,
``trace-event``, ``title``, ``search`` and ``rpc`` are plain click commands
(``sessions`` in :mod:`readmodel.cli.listing`, ``show`` in :mod:`readmodel.cli.transcript`)
collected in :data:`COMMANDS`; :mod:`indexer.cli` registers them on the
``sessionq`` group (``readmodel`` never imports ``indexer``).

Human output is a table; ``--json`` prints the reference's exact JSON.
Wherever a session id is taken, a unique prefix of it works
(:func:`readmodel.cli.inputs.resolve_id`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click
import msgspec

from readmodel.cli.inputs import PeopleCommand, resolve_id
from readmodel.cli.options import (
    builtins,
    combine,
    event_clauses,
    event_filter_options,
    filters_json_value,
    open_engine,
    open_session,
    session_clauses,
    session_filter_options,
    show,
)
from readmodel.cli.support import (
    db_option,
    default_attachments,
    default_root,
    emit_json,
    emit_json_bytes,
    examples,
    handles_errors,
    json_option,
    redact_option,
    redacts_reads,
    refuse_impossible_db,
)

F = TypeVar("F", bound=Callable[..., Any])


# --------------------------------------------------------------------------- commands


@click.command("read", cls=PeopleCommand, epilog=examples("sessionq read 6f31f323", "sessionq read 6f31f323 --json   the header and every raw event"))
@click.argument("session_id")
@db_option
@json_option
@redact_option  # secret redaction (issue 22): `--redact all` scrubs the printed log
@handles_errors
def read_command(session_id: str, db: str, as_json: bool, redact: str = "index") -> None:
    """Print a session's header and every event of its log, one line each (`show` reads better)."""
    engine, session_id = open_session(db, session_id)
    show(engine.read_session(session_id, redact=redacts_reads(redact)), as_json, "print_log")


@click.command("events", cls=PeopleCommand, epilog=examples("sessionq events 6f31f323"))
@click.argument("session_id")
@db_option
@json_option
@handles_errors
def events_command(session_id: str, db: str, as_json: bool) -> None:
    """List every event of a session: seq, type, time and surface (current, shadowed, log-only)."""
    engine, session_id = open_session(db, session_id)
    show(engine.list_events(session_id), as_json, "print_records")


@click.command(
    "docs",
    cls=PeopleCommand,
    epilog=examples("sessionq docs 6f31f323 --type user/message", "sessionq docs 6f31f323 --text 'frame scanner' --time-from 3h"),
)
@click.argument("session_id")
@event_filter_options
@click.option("--text", help="Only events containing this text (literal, case-insensitive, any whitespace).")
@click.option("--filters", "filters_json", metavar="JSON", help="The reference's event filter array, verbatim.")
@db_option
@json_option
@handles_errors
def docs_command(session_id: str, text: str | None, filters_json: str | None, db: str, as_json: bool, **options: Any) -> None:
    """List the searchable text of a session's events (messages, tool calls and results), filtered."""
    clauses = [*event_clauses(options), *([{"kind": "text", "text": text}] if text is not None else [])]
    engine, session_id = open_session(db, session_id)
    show(engine.filter_events(session_id, combine(filters_json_value(filters_json), clauses)), as_json, "print_documents")


@click.command("surface", cls=PeopleCommand, epilog=examples("sessionq surface 6f31f323"))
@click.argument("session_id")
@db_option
@json_option
@handles_errors
def surface_command(session_id: str, db: str, as_json: bool) -> None:
    """List what the model currently sees of a session (its surface), in order."""
    engine, session_id = open_session(db, session_id)
    show(engine.read_surface(session_id), as_json, "print_surface")


@click.command("event", cls=PeopleCommand, epilog=examples("sessionq event 6f31f323 16", "sessionq event 6f31f323 16 --before 2 --after 2"))
@click.argument("session_id")
@click.argument("seq", type=int)
@click.option("--before", type=int, help="Also show this many events before it (0 to 50).")
@click.option("--after", type=int, help="Also show this many events after it (0 to 50).")
@db_option
@json_option
@redact_option  # secret redaction (issue 22): `--redact all` scrubs the printed events
@handles_errors
def event_command(
    session_id: str, seq: int, before: int | None, after: int | None, db: str, as_json: bool, redact: str = "index"
) -> None:
    """Show one event (by its seq) with the events around it."""
    engine, session_id = open_session(db, session_id)
    request: dict[str, Any] = {"sessionId": session_id, "seq": seq}
    if before is not None:
        request["before"] = before
    if after is not None:
        request["after"] = after
    window = engine.read_event(request, redact=redacts_reads(redact))
    if as_json:
        emit_json(window)
        return
    from readmodel.cli.presentation import print_window

    print_window(builtins(window))


@click.command("trace", cls=PeopleCommand, epilog=examples("sessionq trace 6f31f323"))
@click.argument("session_id")
@db_option
@json_option
@handles_errors
def trace_command(session_id: str, db: str, as_json: bool) -> None:
    """Show a session's family: the sessions that started it (parents) and the subagents it started."""
    from readmodel.projection.lineage import encode_lineage_trace, lineage_trace_to_builtins

    engine, session_id = open_session(db, session_id)
    trace = engine.trace_session(session_id)
    if as_json:
        emit_json_bytes(encode_lineage_trace(trace))
        return
    from readmodel.cli.presentation import print_lineage

    print_lineage(lineage_trace_to_builtins(trace))


@click.command("trace-event", cls=PeopleCommand, epilog=examples("sessionq trace-event 6f31f323 42"))
@click.argument("session_id")
@click.argument("seq", type=int)
@db_option
@json_option
@handles_errors
def trace_event_command(session_id: str, seq: int, db: str, as_json: bool) -> None:
    """Show where one event came from and what became of it (replacements, sources, derived events)."""
    engine, session_id = open_session(db, session_id)
    observation = engine.trace_event({"sessionId": session_id, "seq": seq})
    if as_json:
        emit_json(observation)
        return
    from readmodel.cli.presentation import print_event_trace

    print_event_trace(builtins(observation))


@click.command("title", cls=PeopleCommand, epilog=examples("sessionq title 6f31f323 9a0b", "sessionq title 6f31f323 --json"))
@click.argument("session_ids", nargs=-1, required=True)
@db_option
@json_option
@handles_errors
def title_command(session_ids: tuple[str, ...], db: str, as_json: bool) -> None:
    """Show the title of each session (a session that cannot be read is reported, not fatal)."""
    from readmodel.core.requests import title_result_to_builtins

    engine = open_engine(db)
    # An ambiguous prefix lists its candidates and exits 2, as every command does; an unknown
    # id is answered in its row (not found), as the reference's readTitleSnapshots answers it.
    resolved = [resolve_id(engine, text) for text in session_ids]
    results = [title_result_to_builtins(result) for result in engine.read_title_snapshots(resolved)]
    if as_json:
        emit_json(results)
        return
    from readmodel.cli.presentation import print_titles

    print_titles(results)


@click.command(
    "search",
    cls=PeopleCommand,
    epilog=examples(
        "sessionq search 'frame scanner'",
        "sessionq search 'frame scanner' --page 2",
        "sessionq search zstd --cwd ~/work/app --created-from 2026-08-01",
        "sessionq search 'disk full' --session 6f31f323 --type tool/result",
        "sessionq search '\"exact phrase\"'            # quoted: the reference's phrase search",
        "sessionq search 数据库 --match substring",
    ),
)
@click.argument("query")
@click.option(
    "--match",
    type=click.Choice(["phrase", "words", "substring"]),
    help="phrase: the exact phrase (the reference's search); words: every word in any order, the last one "
    "also as a prefix (the default; a query wholly in double quotes is a phrase); substring: literal text, "
    "case-insensitive, any script (e.g. CJK, OutcomeUnknown, ->).",
)
@click.option("--session", "session_id", help="Search within this one session (an id or a unique prefix).")
@click.option("--limit", type=int, help="Matches per page (default 20, at most 100).")
@click.option("--page", type=click.IntRange(min=1), help="Show page N (follows the cursors from page 1).")
@click.option("--cursor", help="Continue from the cursor a previous page printed.")
@session_filter_options
@event_filter_options
@click.option("--session-filters", "session_filters_json", metavar="JSON", help="The reference's session filter array, verbatim.")
@click.option("--event-filters", "event_filters_json", metavar="JSON", help="The reference's event metadata filter array, verbatim.")
@db_option
@json_option
@handles_errors
def search_command(
    query: str,
    match: str | None,
    session_id: str | None,
    limit: int | None,
    page: int | None,
    cursor: str | None,
    session_filters_json: str | None,
    event_filters_json: str | None,
    db: str,
    as_json: bool,
    **options: Any,
) -> None:
    """Search every session's text (ranked, best session first), or one session's with --session."""
    if page is not None and cursor is not None:
        raise click.UsageError("give --page or --cursor, not both")
    event_filters = combine(filters_json_value(event_filters_json), event_clauses(options))
    session_filters = combine(filters_json_value(session_filters_json), session_clauses(options))
    from readmodel.search.modes import people_match

    mode, text = (match, query) if match is not None else people_match(query)
    request: dict[str, Any] = {"query": text, "match": mode}
    if limit is not None:
        request["limit"] = limit
    if cursor is not None:
        request["cursor"] = cursor
    engine = open_engine(db)
    if session_id is not None:
        session_id = resolve_id(engine, session_id)
        request.update(sessionId=session_id, filters=event_filters)
        run = engine.search_events
    else:
        request.update(sessionFilters=session_filters, eventFilters=event_filters)
        run = engine.search_sessions
    result = run(request)
    for _ in range((page or 1) - 1):
        if result.next_cursor is msgspec.UNSET:
            raise click.ClickException(f"there is no page {page}: the matches end before it")
        result = run({**request, "cursor": result.next_cursor})
    number = page or 1
    first_rank = (number - 1) * (limit or 20) + 1
    show(result, as_json, "print_search_page", within_session=session_id is not None, query=query, page_number=number, first_rank=first_rank)


def _rpc_help() -> str:
    from readmodel.rpc import METHODS

    return (
        "Answer JSON-RPC 2.0 requests on stdin, one JSON object per line, until end of input.\n\n"
        "\b\nMethods: " + ", ".join(METHODS) + "\n\n"
        "\b\nExamples:\n"
        """  echo '{"jsonrpc":"2.0","id":1,"method":"listSessionSummaries","params":{"limit":5}}' | sessionq rpc"""
    )


@click.command("rpc", help=_rpc_help(), short_help="Answer JSON-RPC 2.0 requests on stdin (one per line).")
@db_option
def rpc_command(db: str) -> None:
    from readmodel.rpc import Dispatcher, serve

    refuse_impossible_db(db)
    dispatcher = Dispatcher(lambda: open_engine(db))
    try:
        serve(dispatcher, sys.stdin.buffer, sys.stdout.buffer)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        # The client went away; nothing left to answer.
        sys.stderr.close()


from readmodel.cli.listing import sessions_command  # noqa: E402
from readmodel.cli.transcript import show_command  # noqa: E402

COMMANDS: list[click.Command] = [
    sessions_command,
    show_command,
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
@click.command(
    "serve",
    epilog=examples(
        "sessionq serve                      then open http://127.0.0.1:8765/",
        "sessionq serve --port 9000 --root ~/.dsh/sessions",
        "sessionq serve --host 0.0.0.0 --token \"$(openssl rand -hex 16)\"   beyond loopback: a token is required",
    ),
)
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
@redact_option  # secret redaction (issue 22): under `all` every raw read and export is scrubbed
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
    redact: str = "index",
) -> None:
    """HTTP API (/api/rpc/<method>, /api/session.export) and the web page."""
    from readmodel.http.app import LOOPBACK_NAMES, Limits, StartupError, bind_listener, check_index, create_app, is_loopback, server_config
    from readmodel.http.app import server as http_server

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
    try:  # one line and exit 1 before uvicorn says anything: no index, or the port is taken
        check_index(db)
        listening = bind_listener(host, port)
    except StartupError as exc:
        raise click.ClickException(str(exc)) from None
    app = create_app(db, root=root, attachments=attachments, token=token, allowed_hosts=hosts, port=port, limits=limits, redact=redact.lower())  # type: ignore[arg-type]
    server = http_server(server_config(app, host, port, limits))
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"sessionq: serving http://{shown}:{port}/ (Ctrl+C stops)", err=True)  # uvicorn names no URL for a given socket
    try:
        server.run(sockets=[listening])
    except KeyboardInterrupt:
        pass
    if not server.started:
        sys.exit(1)  # the server could not start (e.g. the port is taken); uvicorn logged why


COMMANDS.append(serve_command)


@click.command(
    "export",
    epilog=examples(
        "sessionq export 6f31f323                      writes dsh-session-<id>.zip",
        "sessionq export 6f31f323 --include-descendants -o work.zip",
        "sessionq export 6f31f323 --html -o notes.html  a transcript to read offline (one file)",
        "sessionq export 6f31f323 --html --all          log-only events too",
    ),
)
@click.argument("session_id")
@click.option("--include-descendants", is_flag=True, help="Also export every descendant (subagent) log.")
@click.option(
    "-o", "--output", "output", default=None,
    help="File to write (default: dsh-session-<id>.zip, or .html with --html; - for standard output with --html).",
)
@click.option("--html", "html", is_flag=True, help="A self-contained HTML transcript instead of the ZIP (a sessionq extension).")
@click.option("--all", "log_only", is_flag=True, help="With --html: also the log-only events (turn/step markers, streamed chunks).")
@db_option
@click.option("--root", "root", default=None, help="Session log root (relative index paths resolve against it).")
@click.option("--attachments", default=None, help="Attachment store for export media.")
@redact_option  # secret redaction (issue 22): `--redact all` scrubs the logs in the archive
@handles_errors
def export_command(
    session_id: str, include_descendants: bool, output: str | None, db: str, root: str | None, attachments: str | None,
    redact: str = "index", html: bool = False, log_only: bool = False,
) -> None:
    """Write the ZIP the HTTP export endpoint serves, or (--html) the session's
    transcript as one self-contained HTML file."""
    if html:
        if include_descendants:
            raise click.UsageError("--include-descendants applies to the ZIP export, not to --html")
        _export_html(session_id, output, db, redact, log_only)
        return
    if log_only:
        raise click.UsageError("--all applies to --html")
    from readmodel.core.errors import SessionQueryError
    from readmodel.export.archive import Exporter, safe_id
    from readmodel.export.artifacts import AttachmentStore

    if attachments is None:
        attachments = default_attachments()
    if root is None:
        root = default_root()
    engines: list[Any] = []

    def engine() -> Any:
        if not engines:
            engines.append(open_engine(db))
        return engines[0]

    exporter = Exporter(db, engine, root, AttachmentStore(attachments), redact=redacts_reads(redact))
    if not _indexed_log(db, session_id, root):  # an exact id needs no engine (nor SQLAlchemy's import)
        try:
            session_id = resolve_id(engine(), session_id)  # a unique id prefix names its session
        except SessionQueryError as error:
            raise click.ClickException(error.message) from None
    try:
        prepared = exporter.prepare(session_id)
    except Exception as error:  # noqa: BLE001
        raise click.ClickException(f"export failed to prepare the stored artifact: {error}") from None
    if prepared is None:
        raise click.ClickException("session not found")
    target = output or f"dsh-session-{safe_id(session_id)}.zip"
    try:
        _write_whole(target, exporter.stream(session_id, prepared[1], include_descendants, prepared[0].path))
    finally:
        for opened in engines:
            opened.close()
    click.echo(target)


def _indexed_log(db: str, session_id: str, root: str | None) -> bool:
    """Whether the index records a log for exactly ``session_id`` (``False`` when it cannot tell:
    the engine's path then resolves prefixes and words any failure)."""
    from readmodel.export.artifacts import locate_artifact

    try:
        return locate_artifact(db, session_id, root) is not None
    except Exception:  # noqa: BLE001 - answered by the engine's path
        return False


_WRITE_BUFFER = 1 << 20
"""The export file's buffer: the archive's chunks (≈ 70 KB each at level 1) are written
a MiB at a time, each write a system call that gives up the GIL the export's threads share."""


def _write_whole(target: str, chunks: Iterable[bytes]) -> None:
    """``chunks`` into the file ``target``, whole or not at all: written to
    ``TARGET.partial`` and renamed; on a failure nothing truncated is left behind.
    A target that exists and is not a regular file (``/dev/null``, ``/dev/stdout``,
    a FIFO) is written in place: renaming over it would replace the device."""
    import os

    if os.path.exists(target) and not os.path.isfile(target):
        try:
            with open(target, "wb", buffering=_WRITE_BUFFER) as fh:
                fh.writelines(chunks)
        except OSError as error:
            raise click.ClickException(f"export failed: {error}") from None
        return
    partial = target + ".partial"
    try:
        with open(partial, "wb", buffering=_WRITE_BUFFER) as fh:
            fh.writelines(chunks)
        os.replace(partial, target)
    except Exception as error:  # noqa: BLE001
        if os.path.exists(partial):
            os.unlink(partial)
        raise click.ClickException(f"export failed: {error}") from None


def _export_html(session_id: str, output: str | None, db: str, redact: str, log_only: bool) -> None:
    """``export --html``: the transcript file (or standard output with ``-o -``)."""
    from readmodel.export.archive import safe_id
    from readmodel.export.transcript import TranscriptOptions, prepare_transcript, session_title
    from readmodel.projection.secrets import parse_policy, redacts_raw

    options = TranscriptOptions(include_log_only=log_only, redact=redacts_raw(parse_policy(redact)))
    engine = open_engine(db)  # query errors exit as every read's do (handles_errors): 2, or 1 for the index
    try:
        session_id = resolve_id(engine, session_id)
        transcript = prepare_transcript(engine, session_id, title=session_title(engine, session_id), options=options)
        if output == "-":
            sys.stdout.buffer.writelines(transcript.chunks())
            sys.stdout.buffer.flush()
            return
        target = output or f"dsh-session-{safe_id(session_id)}.html"
        _write_whole(target, transcript.chunks())
    finally:
        engine.close()
    click.echo(target)


COMMANDS.append(export_command)
