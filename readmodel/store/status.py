"""The index's health report (``sessionq status`` and the ``status`` RPC method).

Read-only: the database is opened with ``mode=ro`` and every figure comes from
one read snapshot, so the report is consistent and safe to take while the
daemon writes.  The JSON shape (camelCase, optional keys omitted)::

    {"database", "fileSize", "identity", "schemaRevision", "headRevision",
     "root"?, "compression"?, "createdAt", "generation",
     "writerPid"?, "lastReconcileAt"?, "lagMs"?,
     "sessions", "events", "documents", "heldTails", "syntheticTails",
     "sessionsInError": [{"sessionId", "path", "status", "code", "message"}],
     "layoutProblems": [{"kind", "path", "message", "observedAt"}],
     "schemaProblems": [{"problem", "fatal"}], "repair"?,
     "redaction"?: {"policy", "fingerprint", "stored", "pending"},
     "substringIndex"?: {"scheme", "stored", "pending", "documents", "texts"?, "bytes"?},
     "rawBlocks"?: {"bytes", "dictionary", "rebuildShrinks"},
     "sources"?: [{"source", "root"?, "sessions", "events", "sessionsInError",
                   "identityProblems", "layoutProblems", "generation"?, "lastReconcileAt"?, "lagMs"?,
                   "writerPid"?}]}

``sources`` (a sessionq extension; absent before schema 0012) reports each
indexer source (:mod:`readmodel.store.sources`) that indexed into the index
or still has sessions in it: its counts, when its daemon last reconciled and
the pid of its running daemon; ``identityProblems`` counts the transcripts
whose session id another source already holds (listed in ``layoutProblems``
with kind ``identity``); ``generation`` is the source's own counter (bumped by
each of its batches that changed something).  On a PostgreSQL index the
top-level ``generation`` is the sum of those counters plus the prunes'
(:func:`_server_generation`: no global row is written per batch there) and
``lastReconcileAt`` the latest source's.  From schema 0012 on, entries of
``sessionsInError`` and ``layoutProblems`` carry their ``source``.

``redaction`` (a sessionq extension; absent before schema 0007) compares the
fingerprint of the secret redaction the documents were derived with
(``stored``, ``null`` before the first complete pass) with the one the
policy in ``$SESSIONQ_REDACT`` derives: ``pending`` means the indexer's next
full pass re-derives every session's documents.

``substringIndex`` (a sessionq extension; absent before schema 0009) describes
the gram index substring search narrows its candidates with
(:mod:`readmodel.store.gramindex`): the gram scheme this sessionq uses, the
one the index was built with, ``pending`` when they differ (the indexer's next
full pass rebuilds it; substring search verifies every document meanwhile),
the documents it covers, the distinct texts it indexes (``texts``, schema
0018 on: one row of grams per distinct text) and its size on disk.

``rawBlocks`` (a sessionq extension; schema 0011 on) gives the stored size of
the raw event blocks and the id of the zstd dictionary they are compressed
with (``null``: none).  A cold build of a large root trains one; an index built
before schema 0011 has none, and ``rebuildShrinks`` then says that rebuilding
it (a fresh database) would compress its blocks with one.

``schemaProblems`` lists objects of the head schema missing from the index
(checked only at the head revision); ``fatal`` ones make queries refuse the
index, and ``repair`` then says how to rebuild it.  Values that come from
session logs are bounded (:mod:`readmodel.core.clipping`): a hostile log's
megabyte-long id cannot make the report megabytes long.

Times are epoch milliseconds, like every time in the reference's shapes;
``lagMs`` is now minus the last reconcile (how stale readers may be).  An idle
daemon reconciles only on changes and at its periodic rescan, so with
``writerPid`` present a growing lag means "nothing changed", not "behind".
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from sqlalchemy import Connection, inspect
from sqlalchemy.exc import DBAPIError

from readmodel.core.clipping import clip, clip_message, clip_path
from readmodel.store.database import (
    IndexDatabaseError,
    check_identity,
    open_existing,
    snapshot,
    sqlite_path,
    unusable_message,
)
from readmodel.core.errors import SessionQueryError
from readmodel.projection.secrets import index_fingerprint, policy_from_env
from readmodel.store.revisions import current_revision, head_revision
from readmodel.store.schemacheck import SchemaProblem, damage_message, repair_hint, schema_problems
from readmodel.store.blocks import DICTIONARY_MIN_BYTES


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(round(seconds * 1000))


def file_size(db: str) -> int | None:
    """Bytes on disk of a SQLite index including its write-ahead log (``None`` for URLs)."""
    path = sqlite_path(db)
    if path is None:
        return None
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += os.stat(path + suffix).st_size
        except FileNotFoundError:
            pass
    return total


def writer_lock_path(db: str) -> str | None:
    """The indexer's sidecar lock file ``<db>.lock`` (``None`` for non-file databases).

    The daemon holds an exclusive ``flock`` on it and writes its pid into it.
    """
    path = sqlite_path(db)
    return None if path is None else os.path.abspath(path) + ".lock"


def source_lock_path(db: str, source: str) -> str | None:
    """The lock file ``<db>.source-<NAME>.lock`` of one source's daemon (``None`` for non-file databases)."""
    path = writer_lock_path(db)
    return None if path is None else f"{path[: -len('.lock')]}.source-{source}.lock"


def source_writer_pids(db: str) -> dict[str, int]:
    """``source -> pid`` of the live daemons writing ``db``, read from their lock files."""
    path = writer_lock_path(db)
    if path is None:
        return {}
    prefix = os.path.basename(path[: -len(".lock")]) + ".source-"
    directory = os.path.dirname(path)
    found: dict[str, int] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return {}
    for name in names:
        if name.startswith(prefix) and name.endswith(".lock"):
            pid = _live_pid(os.path.join(directory, name))
            if pid is not None:
                found[name[len(prefix) : -len(".lock")]] = pid
    return found


def writer_pid(db: str) -> int | None:
    """The pid of the live indexer writing ``db``, if any.

    Read from the lock file without touching the lock (probing the lock could
    make a daemon that is starting at that instant believe it is taken).  A
    daemon killed with SIGKILL leaves its pid behind, so the process must exist.
    """
    path = writer_lock_path(db)
    if path is None:
        return None
    pid = _live_pid(path)
    if pid is not None:
        return pid
    pids = sorted(source_writer_pids(db).values())
    return pids[0] if pids else None


def _live_pid(path: str) -> int | None:
    """The pid written in a lock file, if that process exists."""
    try:
        with open(path, "rb") as fh:
            pid = int(fh.read(32).strip() or 0)
    except (OSError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # exists, owned by someone else
    return pid


def collect_status(conn: Connection, db: str, *, now: float | None = None) -> dict[str, Any]:
    """The status object from one open read snapshot ``conn``.

    Raises :class:`IndexDatabaseError` when the index is empty, or so damaged
    that the report itself cannot be read (the message names the repair).
    """
    if conn.dialect.name != "sqlite":
        from readmodel.store.postgres import check_identity as check_postgres_identity

        if check_postgres_identity(conn, db):
            raise IndexDatabaseError(f"{_shown(db)} is empty; run `sessionq db upgrade` first")
        return _report(conn, db, now)  # the schema checks are SQLite's (sqlite_master, FTS5)
    if check_identity(conn, db):
        raise IndexDatabaseError(f"{db} is empty; run `sessionq index` first")
    problems = schema_problems(conn) if current_revision(conn) == head_revision() else []
    try:
        out = _report(conn, db, now)
    except (DBAPIError, sqlite3.Error) as exc:
        if problems:
            raise IndexDatabaseError(damage_message(db, [problem.text for problem in problems])) from exc
        raise
    _add_schema_problems(out, db, problems)
    return out


def _add_schema_problems(out: dict[str, Any], db: str, problems: list[SchemaProblem]) -> None:
    out["schemaProblems"] = [{"problem": problem.text, "fatal": problem.fatal} for problem in problems]
    if any(problem.fatal for problem in problems):
        out["repair"] = repair_hint(db)


def _report(conn: Connection, db: str, now: float | None) -> dict[str, Any]:
    meta = conn.exec_driver_sql(
        'SELECT "identity", "global_generation", "root", "compression", "created_at", "last_reconcile_at" FROM "index_meta"'
    ).one()
    out: dict[str, Any] = {"database": os.path.abspath(p) if (p := sqlite_path(db)) else _shown(db)}
    size = file_size(db)
    if size is not None:
        out["fileSize"] = size
    out["identity"] = meta[0]
    out["schemaRevision"] = current_revision(conn) or ""
    out["headRevision"] = head_revision()
    if meta[2] is not None:
        out["root"] = meta[2]
    if meta[3] is not None:
        out["compression"] = meta[3]
    out["createdAt"] = _ms(meta[4])
    generation, last = meta[1], meta[5]
    if conn.dialect.name != "sqlite":
        generation, last = _server_generation(conn, generation, last)
    out["generation"] = generation
    pid = writer_pid(db)
    if pid is not None:
        out["writerPid"] = pid
    if last is not None:
        out["lastReconcileAt"] = _ms(last)
        out["lagMs"] = max(0, _ms((time.time() if now is None else now) - last) or 0)
    # Per-session counters are maintained by the reconciler, so these stay
    # cheap on large indexes (no scan of the events table).
    counts = conn.exec_driver_sql(
        'SELECT count(*), coalesce(sum(CASE WHEN "status" = \'ok\' THEN "event_count" END), 0), '
        "coalesce(sum(CASE WHEN \"tail_state\" = 'held' THEN 1 END), 0), "
        "coalesce(sum(CASE WHEN \"tail_state\" = 'settled' THEN 1 END), 0) FROM \"sessions\""
    ).one()
    out["sessions"], out["events"], out["heldTails"], out["syntheticTails"] = (int(v) for v in counts)
    out["documents"] = int(conn.exec_driver_sql('SELECT count(*) FROM "documents"').scalar() or 0)
    sourced = _has_table(conn, "sources")
    source_column = ', "source"' if sourced else ""
    out["sessionsInError"] = [
        {"sessionId": clip(row[0]), "path": clip_path(row[1]), "status": row[2], "code": row[3] or "", "message": clip_message(row[4] or ""), **_source_of(row, 5)}
        for row in conn.exec_driver_sql(
            f'SELECT "id", "path", "status", "error_code", "error_message"{source_column} FROM "sessions" WHERE "status" <> \'ok\' ORDER BY "path"'
        )
    ]
    out["layoutProblems"] = [
        {"kind": row[0], "path": clip_path(row[1]), "message": clip_message(row[2]), "observedAt": _ms(row[3]), **_source_of(row, 4)}
        for row in conn.exec_driver_sql(f'SELECT "kind", "path", "message", "observed_at"{source_column} FROM "layout_problems" ORDER BY "path"')
    ]
    _add_redaction(conn, out)
    if conn.dialect.name == "sqlite":  # the FTS5 gram index and the block dictionaries are SQLite's
        _add_substring_index(conn, out)
        _add_raw_blocks(conn, out)
    if sourced:
        out["sources"] = _sources(conn, db, time.time() if now is None else now)
    return out


def _server_generation(conn: Connection, base: int, last: float | None) -> tuple[int, float | None]:
    """A server index's generation and last reconcile, without a global hot row
    (:data:`readmodel.store.sources.SERVER_GENERATION_SQL`): the sum of the sources'
    counters and the prunes', and the latest source's reconcile."""
    if not _has_table(conn, "sources"):
        return base, last
    from readmodel.store.sources import SERVER_GENERATION_SQL

    total, latest = conn.exec_driver_sql(SERVER_GENERATION_SQL).one()
    if latest is not None and (last is None or latest > last):
        last = latest
    return int(total), last


def _add_substring_index(conn: Connection, out: dict[str, Any]) -> None:
    """The ``substringIndex`` entry, when the index has one (schema 0009 on)."""
    if "grams" not in _meta_columns(conn):
        return
    from readmodel.store import gramindex

    stats = gramindex.statistics(conn.connection.driver_connection.cursor())
    entry: dict[str, Any] = {"scheme": stats["scheme"], "stored": stats["stored"], "pending": stats["stored"] != stats["scheme"]}
    entry["documents"] = 0 if entry["pending"] else out["documents"]
    if conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE name = 'texts'").first() is not None:
        entry["texts"] = 0 if entry["pending"] else int(conn.exec_driver_sql('SELECT count(*) FROM "texts"').scalar() or 0)
    if stats["bytes"] is not None:
        entry["bytes"] = stats["bytes"]
    out["substringIndex"] = entry


def _add_raw_blocks(conn: Connection, out: dict[str, Any]) -> None:
    """The ``rawBlocks`` entry (schema 0011 on): block bytes, the dictionary, whether a rebuild shrinks them."""
    if conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE name = 'block_dictionaries'").first() is None:
        return
    dictionary = conn.exec_driver_sql('SELECT min("id") FROM "block_dictionaries"').scalar()
    size = conn.exec_driver_sql('SELECT coalesce(sum(length("data")), 0) FROM "event_blocks"').scalar() or 0
    out["rawBlocks"] = {"bytes": size, "dictionary": dictionary, "rebuildShrinks": dictionary is None and size >= DICTIONARY_MIN_BYTES}


def _has_table(conn: Connection, name: str) -> bool:
    if conn.dialect.name != "sqlite":
        return inspect(conn).has_table(name)
    return conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).first() is not None


def _shown(db: str) -> str:
    """``db`` as reports show it: a URL's password masked."""
    from readmodel.store.urls import mask_url

    return mask_url(db)


def _source_of(row: Any, index: int) -> dict[str, Any]:
    return {"source": row[index]} if len(row) > index else {}


_SOURCE_COUNTS = (
    'SELECT "source", count(*), coalesce(sum(CASE WHEN "status" = \'ok\' THEN "event_count" END), 0), '
    'coalesce(sum(CASE WHEN "status" <> \'ok\' THEN 1 END), 0) FROM "sessions" GROUP BY "source"'
)


def _sources(conn: Connection, db: str, now: float) -> list[dict[str, Any]]:
    """The per-source entries of the report, by source name."""
    counts = {row[0]: row[1:] for row in conn.exec_driver_sql(_SOURCE_COUNTS)}
    problems: dict[Any, list[int]] = {}
    for source, kind, number in conn.exec_driver_sql('SELECT "source", "kind", count(*) FROM "layout_problems" GROUP BY "source", "kind"'):
        entry = problems.setdefault(source, [0, 0])
        entry[0] += number
        entry[1] += number if kind == "identity" else 0
    registered = {row[0]: row[1:] for row in conn.exec_driver_sql('SELECT "source", "root", "last_reconcile_at", "generation" FROM "sources"')}
    pids = source_writer_pids(db)
    entries = []
    for source in sorted({*counts, *registered, *problems}, key=lambda name: (name is None, name or "")):
        sessions, events, in_error = counts.get(source, (0, 0, 0))
        root, last, generation = registered.get(source, (None, None, None))
        entry: dict[str, Any] = {"source": source}
        if root is not None:
            entry["root"] = root
        layout, identity = problems.get(source, [0, 0])
        entry.update(sessions=int(sessions), events=int(events), sessionsInError=int(in_error), identityProblems=identity, layoutProblems=layout)
        if generation is not None:
            entry["generation"] = int(generation)
        if last is not None:
            entry["lastReconcileAt"] = _ms(last)
            entry["lagMs"] = max(0, _ms(now - last) or 0)
        if source in pids:
            entry["writerPid"] = pids[source]
        entries.append(entry)
    return entries


def _meta_columns(conn: Connection) -> set[str]:
    """The columns ``index_meta`` has (older schemas lack the later ones)."""
    if conn.dialect.name != "sqlite":
        return {column["name"] for column in inspect(conn).get_columns("index_meta")}
    return {row[1] for row in conn.exec_driver_sql('PRAGMA table_info("index_meta")')}


def _add_redaction(conn: Connection, out: dict[str, Any]) -> None:
    """The ``redaction`` entry, when the index stores a fingerprint (schema 0007 on)."""
    if "redaction" not in _meta_columns(conn):
        return
    stored = conn.exec_driver_sql('SELECT "redaction" FROM "index_meta"').scalar()
    try:
        policy = policy_from_env()
    except ValueError:
        return  # an invalid $SESSIONQ_REDACT: the indexer refuses it, the report leaves it out
    expected = index_fingerprint(policy)
    pending = stored != expected and out["sessions"] > 0
    out["redaction"] = {"policy": policy, "fingerprint": expected, "stored": stored, "pending": pending}


def read_status(db: str) -> dict[str, Any]:
    """Open ``db`` read-only and report; raises ``SESSION_QUERY_INDEX_FAILED`` when it cannot.

    Any schema revision is reported (the report says whether to upgrade), and
    a damaged schema is reported with its repair as long as the figures can
    still be read.
    """
    from readmodel.store.urls import is_postgres

    if is_postgres(db):
        return _postgres_status(db)
    try:
        engine = open_existing(db)
    except IndexDatabaseError as exc:
        raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", str(exc), exc) from exc
    try:
        with snapshot(engine) as conn:
            return collect_status(conn, db)
    except IndexDatabaseError as exc:
        raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", str(exc), exc) from exc
    except (DBAPIError, sqlite3.Error) as exc:
        raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", unusable_message(db, exc), exc) from exc
    finally:
        engine.dispose()


def _postgres_status(db: str) -> dict[str, Any]:
    """The report of a PostgreSQL index, from one ``REPEATABLE READ READ ONLY`` transaction."""
    from readmodel.store.postgres import connect

    try:
        engine, conn = connect(db)
    except IndexDatabaseError as exc:
        raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", str(exc), exc) from exc
    try:
        with conn.begin():
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return collect_status(conn, db)
    except IndexDatabaseError as exc:
        raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", str(exc), exc) from exc
    except DBAPIError as exc:
        from readmodel.store.postgres import connect_message

        raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", connect_message(db, exc), exc) from exc
    finally:
        conn.close()
        engine.dispose()


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def format_status(status: dict[str, Any]) -> str:
    """The human rendering of :func:`collect_status`'s object."""
    lines = [
        f"index       {status['database']}" + (f" ({_bytes(status['fileSize'])})" if "fileSize" in status else ""),
        f"identity    {status['identity']}",
        f"schema      {status['schemaRevision'] or '(none)'}" + ("" if status["schemaRevision"] == status["headRevision"] else f" (this sessionq needs {status['headRevision']}; run `sessionq db upgrade`)"),
    ]
    if "root" in status:
        lines.append(f"root        {status['root']}" + (f" ({status['compression']})" if "compression" in status else ""))
    lines.append(f"generation  {status['generation']}")
    lines.append(f"indexer     running (pid {status['writerPid']})" if "writerPid" in status else "indexer     not running")
    if "lastReconcileAt" in status:
        lines.append(f"reconciled  {_when(status['lastReconcileAt'])} ({status['lagMs'] / 1000:.1f} s ago)")
    else:
        lines.append("reconciled  never")
    lines.append(
        f"sessions    {status['sessions']:,} ({len(status['sessionsInError'])} in error, "
        f"{status['heldTails']} held tails, {status['syntheticTails']} settled tails)"
    )
    lines.append(f"events      {status['events']:,}")
    lines.append(f"documents   {status['documents']:,}")
    if "redaction" in status:
        redaction = status["redaction"]
        pending = " (re-derivation pending: the indexer's next full pass re-derives every document)" if redaction["pending"] else ""
        lines.append(f"redaction   {redaction['policy']}{pending}")
    if "substringIndex" in status:
        grams = status["substringIndex"]
        size = f", {_bytes(grams['bytes'])}" if "bytes" in grams else ""
        if grams["pending"]:
            lines.append(f"substrings  index pending (the indexer's next full pass builds it{size}); substring search scans meanwhile")
        else:
            texts = f" as {grams['texts']:,} distinct texts" if "texts" in grams else ""
            lines.append(f"substrings  {grams['documents']:,} documents indexed{texts} ({grams['scheme']}{size})")
    if "rawBlocks" in status:
        raw = status["rawBlocks"]
        if raw["dictionary"] is not None:
            lines.append(f"raw blocks  {_bytes(raw['bytes'])}, zstd dictionary {raw['dictionary']}")
        else:
            shrink = " (built without one: a rebuild into a fresh database compresses them with one)" if raw["rebuildShrinks"] else ""
            lines.append(f"raw blocks  {_bytes(raw['bytes'])}, no zstd dictionary{shrink}")
    if status.get("schemaProblems"):
        lines.append("schema problems:")
        lines += [f"  {row['problem']}" + (" (queries refuse the index)" if row["fatal"] else " (slower queries)") for row in status["schemaProblems"]]
        if "repair" in status:
            lines.append(f"  repair: {status['repair']}")
    if len(status.get("sources", ())) > 1 or any(entry["identityProblems"] for entry in status.get("sources", ())):
        lines.append("sources:")
        for entry in status["sources"]:
            running = f", indexer pid {entry['writerPid']}" if "writerPid" in entry else ""
            reconciled = f"reconciled {_when(entry['lastReconcileAt'])}" if "lastReconcileAt" in entry else "never reconciled"
            reconciled += f", generation {entry['generation']}" if "generation" in entry else ""
            lines.append(
                f"  {entry['source']}  {entry['sessions']:,} sessions, {entry['sessionsInError']} in error, "
                f"{entry['identityProblems']} identity problems; {reconciled}{running}" + (f"\n    root: {entry['root']}" if "root" in entry else "")
            )
    elif status.get("sources"):
        lines.append(f"source      {status['sources'][0]['source']}")
    if status["sessionsInError"]:
        lines.append("sessions in error:")
        lines += [f"  {row['sessionId']}  {row['code']}  {row['message']}\n    log: {row['path']}" for row in status["sessionsInError"]]
    if status["layoutProblems"]:
        lines.append("layout problems:")
        lines += [f"  {row['kind']}  {row['message']}" for row in status["layoutProblems"]]
    return "\n".join(lines)
