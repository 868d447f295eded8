"""The write-side commands: ``sessionq index``, ``status``, ``db upgrade|current|check``, ``prune``, ``demo-root``.

They are plain click commands registered on the group in :mod:`indexer.cli`.
The shared CLI plumbing (exit statuses, ``--db``, JSON output) comes from
:mod:`readmodel.cli.support`; this module never imports :mod:`indexer.cli`,
which imports it (and ``python -m indexer.cli`` runs as ``__main__``).  Heavy imports (watchdog, rich, alembic) happen only
inside the commands, so they do not slow down every other invocation.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

import click

from readmodel.cli.support import db_option as _db_option
from readmodel.cli.support import root_option as _root_option
from readmodel.cli.support import emit_json, examples
from readmodel.cli.support import handles_errors as _handles_errors
from readmodel.cli.support import redact_option as _redact_option

F = TypeVar("F", bound=Callable[..., Any])


def _refuse_foreign(db: str) -> None:
    """Refuse a path that is not a (writable) sessionq index before anything is created beside it (the lock)."""
    from readmodel.store.database import IndexDatabaseError, check_writer_target

    try:
        check_writer_target(db)
    except IndexDatabaseError as exc:
        raise click.ClickException(str(exc)) from None


def _checked_source(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    from readmodel.store.sources import check_source

    if value is None:
        return None
    try:
        return check_source(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _default_source() -> str:
    from readmodel.store.sources import default_source

    return default_source()


def _source_option(func: F) -> F:
    """``--source NAME`` ($SESSIONQ_SOURCE, default: the host name): the indexer source a command acts for."""
    return click.option(
        "--source",
        "source",
        envvar="SESSIONQ_SOURCE",
        default=_default_source,
        show_default="$SESSIONQ_SOURCE, else this host's name",
        callback=_checked_source,
        metavar="NAME",
        help="The source (host) this daemon indexes for: it writes and deletes only that source's sessions (a sessionq extension).",
    )(func)


def _root_has_transcripts(root: str) -> bool:
    pattern = os.path.join(glob.escape(root), "*", "*", "session.jsonl*")
    return next(glob.iglob(pattern), None) is not None


# -- index -------------------------------------------------------------------------------


@click.command(
    "index",
    epilog=examples(
        "sessionq index                      the default root into the default index, then watch",
        "sessionq index --once --root ~/.dsh/sessions --db ./var/index.db",
        "sessionq index --poll 2             poll instead of inotify (network file systems)",
    ),
)
@_root_option
@_db_option
@click.option("--once", is_flag=True, help="One full pass (tails indexed as the inspect view), a summary, exit 0.")
@click.option("--poll", type=click.FloatRange(min=0.05), default=None, metavar="S", help="Poll the root every S seconds instead of inotify (network file systems).")
@click.option("--rescan", type=click.FloatRange(min=0), default=300.0, show_default=True, metavar="S", help="Full rescan every S seconds as a safety net (0: never).")
@click.option("--settle", type=click.FloatRange(min=0), default=None, metavar="S", help="Index a torn or open tail once the file has been still for S seconds.  [default: 1.0; 0 with --once]")
@click.option("--debounce", type=click.FloatRange(min=0), default=0.01, show_default=True, metavar="S", help="Writes to one log closer than this are one burst: its first is reconciled at once, the rest together once it is quiet.")
@click.option("--upgrade", is_flag=True, help="Migrate an index with an older schema instead of refusing it.")
@click.option("--compression", type=click.Choice(["auto", "zstd", "none"]), default="auto", show_default=True, help="Transcript encoding of the root (auto: detect from the files).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True)
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True, help="key=value lines, or one JSON object per line.")
@click.option("--progress/--no-progress", default=None, help="Progress bar for the initial pass.  [default: when stderr is a terminal]")
@click.option("--workers", type=click.IntRange(min=0), default=None, metavar="N", help="Processes that prepare new sessions in large passes; the one writer commits them.  [default: one per core, at most 4; 0: the writer alone]")
@_redact_option
@_source_option
@_handles_errors
def index_command(
    root: str,
    db: str,
    once: bool,
    poll: float | None,
    rescan: float,
    settle: float | None,
    debounce: float,
    upgrade: bool,
    compression: str,
    log_level: str,
    log_format: str,
    progress: bool | None,
    workers: int | None,
    redact: str,
    source: str,
) -> None:
    """Reconcile the root into the index, then keep watching (the indexer daemon).

    The daemon labels the sessions it indexes with its --source and writes
    and deletes only those; daemons of different sources may share one index.
    Only one indexer per source may write an index: a second one exits at
    once with status 1.  SIGINT/SIGTERM finish (or roll back) the current
    transaction and exit 0.
    """
    import sys

    from readmodel.store.database import IndexDatabaseError, open_writer

    from .daemon import Daemon, DaemonError, DaemonOptions, IndexLock, PassFailed
    from .freshbuild import discard_stale, fresh_target
    from .logs import configure_logging
    from .layout import Compression, detect_compression
    from .reconcile import DEFAULT_SETTLE_SECONDS, Reconciler

    configure_logging(log_level, log_format)
    root = os.path.abspath(root)
    server = _is_postgres(db)
    if not server:
        _refuse_foreign(db)
    if once and not os.path.isdir(root):
        # Reconciling a missing root would empty the index; the daemon waits for it instead.
        raise click.ClickException(f"the root {root} does not exist")
    engine = None
    if server:
        # The server's advisory lock is taken with the connection (retried while unreachable).
        engine, lock = _postgres_writer(db, source, upgrade=upgrade, once=once)
    else:
        lock = IndexLock(db, source)
        try:
            lock.acquire()
        except DaemonError as exc:
            raise click.ClickException(str(exc)) from None
        discard_stale(db, source)  # a killed fresh build's file (ours: we hold the source's lock)
    try:
        if compression != "auto":
            mode = Compression(compression)
        elif _root_has_transcripts(root):
            mode = detect_compression(root)
        else:
            mode = _stored_compression(db) or Compression.ZSTD

        def daemon_for(engine: Any, cold_start: Any = None) -> Daemon:
            _note_root_change(engine, root, source)
            reconciler = Reconciler(
                engine,
                root,
                mode,
                settle_seconds=settle if settle is not None else (0.0 if once else DEFAULT_SETTLE_SECONDS),
                workers=workers,
                redact=redact.lower(),  # type: ignore[arg-type]  # a click.Choice of the policies
                source=source,
                cold_start=cold_start,
            )
            if server:
                reconciler.writer.lock = lock  # type: ignore[attr-defined]  # taken again after a reconnect
            options = DaemonOptions(
                poll=poll,
                rescan=rescan,
                quiet=debounce,
                max_delay=max(debounce * 4, 0.1),
                progress=sys.stderr.isatty() if progress is None else progress,
            )
            daemon = Daemon(engine, root, mode, reconciler, options)
            daemon.install_signal_handlers()
            return daemon

        def run_once(daemon: Daemon) -> Any:
            try:
                return daemon.run_once()
            except PassFailed as exc:
                if _debugging():
                    raise  # the traceback shows the real error as its cause
                what = f"cannot index into {db}" if exc.disk_full else "the reconcile pass failed"
                raise click.ClickException(f"{what}: {exc}") from None

        try:
            fresh = None if server or not once else fresh_target(db)
            if fresh is not None and _root_has_transcripts(root):
                # No index yet: build it whole in a file of its own (indexer.freshbuild).  The
                # daemon writes in place instead, so readers see sessions as they are committed.
                report, interrupted = _fresh_build(fresh, root, mode.value, source, daemon_for, run_once, db, workers)
                if interrupted:
                    return
                if report is not None:
                    click.echo(_summary(root, db, report))
                    return
            if not server:
                try:
                    engine = open_writer(db, root=root, compression=mode.value, allow_upgrade=upgrade, source=source)
                except IndexDatabaseError as exc:
                    raise click.ClickException(str(exc)) from None
                except Exception as exc:
                    _refuse_full_disk(db, exc)
                    raise
            assert engine is not None
            daemon = daemon_for(engine)
            if once:
                report = run_once(daemon)
                if report is not None:
                    click.echo(_summary(root, db, report))
            else:
                daemon.run()
        except KeyboardInterrupt:
            # A second signal: the open transaction was rolled back on the way here.
            pass
    finally:
        if engine is not None:
            engine.dispose()
        lock.release()


def _fresh_build(
    path: str,
    root: str,
    compression: str,
    source: str,
    daemon_for: Callable[..., Any],
    run_once: Callable[[Any], Any],
    db: str,
    workers: int | None = None,
) -> tuple[Any, bool]:
    """Build a missing index in a file of its own and publish it (:mod:`indexer.freshbuild`).

    The pass's workers, listing and dictionary training begin before the new
    file's schema is created (:mod:`indexer.coldstart`).  Returns the pass's
    report (``None`` when another source's daemon published an index first:
    the caller indexes into that one) and whether a signal interrupted the
    pass (nothing is published then).
    """
    from readmodel.store.database import IndexDatabaseError

    from .coldstart import ColdStart
    from .freshbuild import Superseded, building
    from .layout import Compression

    cold_start = ColdStart(root, Compression(compression), workers)
    try:
        with building(path, root=root, compression=compression, source=source) as build:
            daemon = daemon_for(build.engine, cold_start)
            report = run_once(daemon)
            if report is None or daemon.stopping:
                return None, True
            build.complete()
    except IndexDatabaseError as exc:
        raise click.ClickException(str(exc)) from None
    except Superseded:
        return None, False
    except click.ClickException:
        raise
    except Exception as exc:
        _refuse_full_disk(db, exc)
        raise
    finally:
        cold_start.close()  # workers no pass took (the pass shuts down those it took)
    return report, False


def _postgres_writer(db: str, source: str, *, upgrade: bool, once: bool) -> tuple[Any, Any]:
    """The engine and the held source lock of a PostgreSQL index.

    An unreachable server is one line and exit 1 with ``--once``; the daemon
    logs it once and retries with back-off (1 s doubling to 60 s).
    """
    import logging
    import time

    import psycopg

    from readmodel.store.postgres import PostgresError, Unreachable, connect_message
    from readmodel.store.postgres import open_writer as open_postgres

    from .pgwriter import LockHeld, SourceLock

    delay, told = 1.0, False
    while True:
        lock = SourceLock(db, source)
        try:
            lock.acquire()
            try:
                engine = open_postgres(db, allow_upgrade=upgrade, source=source)
                try:
                    lock.settle()  # running: db upgrade refuses from now on
                except BaseException:
                    engine.dispose()
                    raise
                return engine, lock
            except BaseException:
                lock.release()
                raise
        except LockHeld as exc:
            raise click.ClickException(str(exc)) from None
        except (Unreachable, psycopg.OperationalError) as exc:
            message = str(exc) if isinstance(exc, Unreachable) else connect_message(db, exc)
            if once:
                raise click.ClickException(message) from None
            if not told:
                logging.getLogger("sessionq.daemon").error(f"{message}; retrying with back-off")
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 60.0)
        except PostgresError as exc:
            raise click.ClickException(str(exc)) from None


def _debugging() -> bool:
    """The root ``--debug`` flag: show the real error's traceback instead of a one-line message."""
    return bool(click.get_current_context().find_root().params.get("debug"))


def _refuse_full_disk(db: str, exc: BaseException) -> None:
    """Report a full disk met while creating or migrating the index as one (not as an SQL error)."""
    from readmodel.store.database import sqlite_path

    from .storage import disk_full_message, is_disk_full

    path = sqlite_path(db)
    if is_disk_full(exc, path) and not _debugging():
        raise click.ClickException(f"cannot index into {db}: {disk_full_message(path)}") from None


def _stored_compression(db: str) -> Any:
    """The compression an existing index was built with, for an empty root."""
    from readmodel.store.database import create_index_engine, sqlite_path

    from .layout import Compression

    path = sqlite_path(db)
    if path is None or not os.path.exists(path):
        return None
    engine = create_index_engine(db, readonly=True)
    try:
        with engine.connect() as conn:
            value = conn.exec_driver_sql('SELECT "compression" FROM "index_meta"').scalar()
        return Compression(value) if value in ("zstd", "none") else None
    except Exception:  # noqa: BLE001 - foreign or empty files are refused by open_writer next
        return None
    finally:
        engine.dispose()


def _note_root_change(engine: Any, root: str, source: str) -> None:
    """Warn when this source indexed another root before (its sessions are replaced; other sources' stay)."""
    import logging

    from sqlalchemy import text

    with engine.connect() as conn:
        stored = conn.execute(text('SELECT "root" FROM "sources" WHERE "source" = :source'), {"source": source}).scalar()
    if stored and os.path.abspath(stored) != root:
        logging.getLogger("sessionq.daemon").warning(
            "this source indexed another root into this index; its sessions will be replaced",
            extra={"fields": {"source": source, "stored_root": stored, "root": root}},
        )


EXPECTED_LAYOUT: Final = "<root>/<project>/<session-id>/session.jsonl.zstd (or session.jsonl)"


def _summary(root: str, db: str, report: Any) -> str:
    from readmodel.store.urls import mask_url

    db = mask_url(db)
    changes = f"{report.reloaded} loaded, {report.appended} appended, {report.deleted} removed, {report.failed} failed, {report.unchanged} unchanged"
    line = (
        f"indexed {report.scanned} sessions from {root} into {db} in {report.seconds:.2f} s "
        f"({changes}; {report.events} events written; {report.problems} layout problems)"
    )
    if report.scanned == 0:
        # An empty or mis-laid root: say what a root looks like (and where the problems are listed).
        line += f"\nno session logs found under {root}; expected {EXPECTED_LAYOUT}"
        if report.problems:
            line += "; `sessionq status` lists the files that did not fit"
    return line


# -- status ------------------------------------------------------------------------------


@click.command("status", epilog=examples("sessionq status", "sessionq status --db ./var/index.db --json"))
@_db_option
@click.option("--json", "as_json", is_flag=True, help="Print the status object as JSON.")
@_handles_errors
def status_command(db: str, as_json: bool) -> None:
    """Index identity, schema, generation, counts, errors, layout problems, lag (read-only)."""
    from readmodel.store.status import format_status, read_status

    status = read_status(db)
    if as_json:
        emit_json(status)
    else:
        click.echo(format_status(status))


# -- db ----------------------------------------------------------------------------------


@click.group("db", epilog=examples("sessionq db current", "sessionq db upgrade --db ./var/index.db", "sessionq db check"))
def db_group() -> None:
    """Alembic migrations of the index schema."""


def _open_existing(db: str) -> Any:
    """A read-only engine on an existing sessionq index (refuses foreign and empty files)."""
    from readmodel.store.database import IndexDatabaseError, open_existing

    try:
        return open_existing(db)
    except IndexDatabaseError as exc:
        raise click.ClickException(str(exc)) from None


@db_group.command("current")
@_db_option
@_handles_errors
def db_current(db: str) -> None:
    """Print the index's schema revision (and whether it is the head).  PostgreSQL URLs too."""
    from readmodel.store.revisions import current_revision, head_revision

    with _index_connection(db) as conn:
        current = current_revision(conn)
    head = head_revision()
    click.echo(f"{current or '(none)'}" + (" (head)" if current == head else f" (head is {head}; run `sessionq db upgrade`)"))


@db_group.command("check")
@_db_option
@_handles_errors
def db_check(db: str) -> None:
    """Compare the index's schema with the models; exit 1 on any drift.  PostgreSQL URLs too."""
    from readmodel.store.schemacheck import schema_drift

    from readmodel.store.postgres import mask_url
    from readmodel.store.postgres import schema_drift as postgres_drift

    with _index_connection(db) as conn:
        drift = postgres_drift(conn) if _is_postgres(db) else schema_drift(conn)
    shown = mask_url(db)
    if drift:
        for line in drift:
            click.echo(f"drift: {line}", err=True)
        raise click.ClickException(f"{shown}: the schema does not match the models ({len(drift)} differences)")
    click.echo(f"{shown}: schema matches the models")


def _is_postgres(db: str) -> bool:
    from readmodel.store.urls import is_postgres

    return is_postgres(db)


@contextmanager
def _index_connection(db: str) -> Iterator[Any]:
    """A connection to an existing index: a SQLite file, or PostgreSQL for a URL."""
    if _is_postgres(db):
        with _postgres_index(db) as conn:
            yield conn
        return
    engine = _open_existing(db)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


@contextmanager
def _postgres_index(db: str) -> Iterator[Any]:
    """A connection to an existing sessionq index on PostgreSQL; refusals are one line, exit 1."""
    from readmodel.store.postgres import PostgresError, open_existing

    try:
        engine, conn = open_existing(db)
    except PostgresError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        yield conn
    finally:
        conn.close()
        engine.dispose()


def _postgres_upgrade(db: str, source: str) -> None:
    from readmodel.store.postgres import PostgresError, mask_url, upgrade

    try:
        before, head = upgrade(db, source=source)
    except PostgresError as exc:
        raise click.ClickException(str(exc)) from None
    _report_upgrade(mask_url(db), before, head)


def _report_upgrade(shown: str, before: str | None, head: str) -> None:
    """The one line ``db upgrade`` prints, for either backend (``shown``: the index, password masked)."""
    if before == head:
        click.echo(f"{shown}: already at {head} (head)")
    elif before is None:
        click.echo(f"{shown}: created at {head} (head)")
    else:
        click.echo(f"{shown}: upgraded {before} -> {head} (head)")


@db_group.command("upgrade")
@_db_option
@_source_option
@_handles_errors
def db_upgrade(db: str, source: str) -> None:
    """Migrate the index to the head revision (creating it when absent).

    Takes the indexer's lock, so it refuses to run while a daemon writes.
    An index from before sources (schema 0012) labels its sessions with
    --source.
    """
    from readmodel.store.database import (
        IndexDatabaseError,
        create_index_engine,
        current_revision,
        head_revision,
        open_writer,
        reclaim_free_pages,
        sqlite_path,
    )

    from .daemon import DaemonError, IndexLock

    if _is_postgres(db):
        _postgres_upgrade(db, source)
        return
    _refuse_foreign(db)
    lock = IndexLock(db)
    try:
        lock.acquire()
    except DaemonError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        before: str | None = None
        path = sqlite_path(db)
        if path is None or os.path.exists(path):
            probe = create_index_engine(db, readonly=True)
            try:
                with probe.connect() as conn:
                    before = current_revision(conn)
            except Exception:  # noqa: BLE001 - open_writer below gives the real verdict
                before = None
            finally:
                probe.dispose()
        try:
            engine = open_writer(db, allow_upgrade=True, source=source)
        except IndexDatabaseError as exc:
            raise click.ClickException(str(exc)) from None
        engine.dispose()
        _report_upgrade(db, before, head_revision())
        if before is not None and before != head_revision():
            reclaimed = reclaim_free_pages(db)
            if reclaimed:
                click.echo(f"{db}: {reclaimed / 1e6:.1f} MB of free pages given back (VACUUM)")
    finally:
        lock.release()


# -- prune -------------------------------------------------------------------------------


@click.command("prune")
@_db_option
@click.option("--source", "source", required=True, callback=_checked_source, metavar="NAME", help="The source whose sessions to remove.")
@click.option("--yes", is_flag=True, help="Remove without asking (needed when standard input is not a terminal).")
@_handles_errors
def prune_command(db: str, source: str, yes: bool) -> None:
    """Remove every session a source indexed (a sessionq extension).

    A host that stops keeps its sessions in the index; this removes them on
    purpose, in one transaction.  It takes the source's lock, so it refuses
    while that source's daemon runs.  Asks for confirmation on a terminal;
    elsewhere --yes is required.

    Exit status: 0 removed (or nothing to remove), 1 refused (no --yes without
    a terminal, declined, the source's daemon running, an unusable index),
    2 a usage error (no or an invalid --source).

    \b
    Examples:
      sessionq prune --source old-laptop            # asks first
      sessionq prune --source ci-runner-7 --yes
    """
    import sys

    from readmodel.store.database import IndexDatabaseError, open_writer

    from .daemon import DaemonError, IndexLock
    from .pruning import prune_source, source_counts

    if _is_postgres(db):
        engine, lock = _postgres_writer(db, source, upgrade=False, once=True)
    else:
        _refuse_foreign(db)
        lock = IndexLock(db, source)
        try:
            lock.acquire()
        except DaemonError as exc:
            raise click.ClickException(str(exc)) from None
    try:
        if not _is_postgres(db):
            try:
                engine = open_writer(db)
            except IndexDatabaseError as exc:
                raise click.ClickException(str(exc)) from None
        try:
            counts = source_counts(engine, source)
            if counts.sessions == 0 and not counts.known:
                click.echo(f"{_shown(db)}: source {source} has no sessions here; nothing to remove")
                return
            if not yes:
                if not sys.stdin.isatty():
                    raise click.ClickException(
                        f"would remove {counts.sessions} sessions of source {source} from {_shown(db)}; pass --yes to confirm"
                    )
                if not click.confirm(f"Remove the {counts.sessions} sessions of source {source} from {_shown(db)}?", default=False):
                    raise click.ClickException("nothing removed")
            removed = prune_source(engine, source)
        finally:
            engine.dispose()
        click.echo(f"{_shown(db)}: removed {removed} sessions of source {source}")
    finally:
        lock.release()


def _shown(db: str) -> str:
    from readmodel.store.urls import mask_url

    return mask_url(db)


# -- demo root ---------------------------------------------------------------------------


@click.command("demo-root", epilog=examples("sessionq demo-root ./var/sample-root && sessionq index --once --root ./var/sample-root"))
@click.argument("directory", type=click.Path(file_okay=False, path_type=str))
@click.option("--force", is_flag=True, help="Rewrite the demo sessions even if the directory already holds transcripts.")
@_handles_errors
def demo_root_command(directory: str, force: bool) -> None:
    """Write the small self-made demo root into DIRECTORY (for trying sessionq without logs)."""
    from .samples import build_sample_root

    if _root_has_transcripts(directory) and not force:
        click.echo(f"{directory} already holds transcripts; leaving it as it is (use --force to rewrite)")
        return
    paths = build_sample_root(Path(directory))
    click.echo(f"wrote {len(paths)} demo sessions under {directory}")


COMMANDS: tuple[click.Command, ...] = (index_command, status_command, db_group, prune_command, demo_root_command)
"""Registered on the ``sessionq`` group by :mod:`indexer.cli`."""
