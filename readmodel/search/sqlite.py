"""The SQLite FTS5 search backend, with the live overlay and the optional C accelerator.

Ranking runs in SQL over the index's ``documents_fts`` (unicode61 tokens): a
match's strength is its number of highlight spans, counted by the C
accelerator (:mod:`readmodel.search.accelerator`) from FTS5's position lists
when it is built, else from posting lists (``fts5vocab``) or ``highlight()``
itself.  The live overlay (sessions held in memory by the host) lives in
connection-local TEMP tables that shadow the index for the same session id,
as in the reference.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from readmodel.core.errors import SessionQueryError
from readmodel.core.vocabulary import Header
from readmodel.projection.extraction import build_documents
from readmodel.projection.surface import SurfaceFoldError, classify_events, invalid_surface_error
from readmodel.search import accelerator as ftsaux
from readmodel.search.backend import Row
from readmodel.search.config import SearchConfig
from readmodel.search.cursors import CursorCodec
from readmodel.search.engine import SessionSearch
from readmodel.search.postings import phrase_spans_from_postings
from readmodel.search.predicates import (
    BINDING_LIMIT,
    FIXED_BINDINGS,
    OUTER_PREDICATE_LIMIT,
    Where,
    binding_error,
    budget_error,
    event_where,
    session_where,
)
from readmodel.search import sqlitemodes
from readmodel.search import sqlranking
from readmodel.search.requests import EventsRequest, SessionsRequest, bounded_terms, match_expression
from readmodel.search.snippets import END_MARK, START_MARK, prefix_decides_snippet, sanitize_text, snippet_source_decides
from readmodel.store import doctext
from readmodel.store.readonly import reader_uri


RANKED_CACHE_ROWS: Final = 500
"""Rows of a ranking kept per (request, generation) for cheap later pages."""
RANKED_FIRST_ROWS: Final = 64
"""Rows a first request ranks (about three default pages)."""
RANKED_CACHE_SIZE: Final = 32
PROBE_TOKENS: Final = 4
"""A longer phrase is first probed with its first and last this many tokens:
when either matches nothing in scope, neither does the phrase, which is then
never run (a probe costs about this many tokens' share of the phrase)."""


# The first prefix of a document tried for a snippet (plus four snippet widths;
# the second try is sixteen times as long, then the whole document).
_SNIPPET_PREFIX_CHARS: Final = 2048

_TEMP_DDL: Final = (
    # External content, so emptying it ('delete-all') does not re-tokenise the old text.
    'CREATE TEMP TABLE IF NOT EXISTS "snippet_text" ("id" INTEGER PRIMARY KEY, "text" TEXT NOT NULL)',
    'CREATE VIRTUAL TABLE IF NOT EXISTS temp."snippet_scratch" USING fts5("text", content=\'snippet_text\', '
    'content_rowid=\'id\', tokenize=\'unicode61\')',
    'CREATE TEMP TABLE IF NOT EXISTS "live_sessions" ("id" TEXT PRIMARY KEY, "header_json" BLOB NOT NULL, '
    '"created_at" REAL, "cwd" TEXT, "parent_session" TEXT, "persisted" INTEGER NOT NULL, '
    '"generation" INTEGER NOT NULL, "fingerprint" TEXT NOT NULL)',
    'CREATE VIRTUAL TABLE IF NOT EXISTS temp."live_docs" USING fts5("text", "session_id" UNINDEXED, "seq" UNINDEXED, '
    '"type" UNINDEXED, "time" UNINDEXED, "surface" UNINDEXED, "length" UNINDEXED, tokenize=\'unicode61\')',
)


def _live_fingerprint(header: Header, events: Sequence[Any]) -> str:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(msgspec.json.encode(header))
    for event in events:
        digest.update(msgspec.json.encode(event))
    return digest.hexdigest()


@dataclass
class _LiveState:
    """What this connection's TEMP overlay holds, and the process-local generations."""

    fingerprints: dict[str, str] = field(default_factory=dict)
    epoch: int = 0
    next_generation: int = 0


# --------------------------------------------------------------------------- ranking SQL

# The candidate set: one row per matching document, persisted rows shadowed by
# live rows of the same session.  ``match_count`` is the number of highlighted
# spans FTS5's highlight() would produce.  Without the C accelerator (below):
# for a one-token phrase every token instance is its own span, so the count
# comes straight from the posting list (fts5vocab), which is far cheaper than
# highlighting every matching document; phrases of rarer tokens are counted from
# the posting lists too, and the rest by the markers of highlight() itself.
_SESSION_COLUMNS: Final = """s."id" AS session_id, s."sid" AS header_json, s."created_at" AS created_at, s."cwd" AS cwd,
         s."parent_session" AS parent_session, 0 AS live, 1 AS persisted, d."docid" AS docid, d."seq" AS seq,
         d."type" AS type, d."time" AS time,
         CASE d."surface" WHEN 1 THEN 'current' WHEN 2 THEN 'shadowed' ELSE 'log-only' END AS surface,
         d."length" AS document_length"""
_MARKS: Final = "((length(CAST({h} AS BLOB)) - length(CAST(replace({h}, ?, '') AS BLOB))) / 3)"
_PERSISTED_BY_TOKEN: Final = """
  SELECT {columns}, c."n" AS match_count
  FROM (SELECT "doc", count(*) AS "n" FROM temp."documents_terms" WHERE "term" = CAST(? AS TEXT){doc_range} GROUP BY "doc") c
  JOIN "documents" d ON d."docid" = c."doc" JOIN "sessions" s ON s."sid" = d."sid"
  WHERE s."status" = 'ok' AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id")
"""
_PERSISTED_BY_PHRASE: Final = """
  SELECT {columns}, {marks} AS match_count
  FROM "documents_fts" JOIN "documents" d ON d."docid" = "documents_fts"."rowid" JOIN "sessions" s ON s."sid" = d."sid"
  WHERE "documents_fts" MATCH ? AND s."status" = 'ok'
    AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id"){doc_range}
"""
_LIVE_BRANCH: Final = """
  SELECT l."id" AS session_id, NULL AS header_json, l."created_at" AS created_at, l."cwd" AS cwd,
         l."parent_session" AS parent_session, 1 AS live, l."persisted" AS persisted, -ld."rowid" AS docid, ld."seq" AS seq,
         ld."type" AS type, ld."time" AS time, ld."surface" AS surface, ld."length" AS document_length, {marks} AS match_count
  FROM temp."live_docs" ld JOIN temp."live_sessions" l ON l."id" = ld."session_id"
  WHERE "live_docs" MATCH ?{scope}
"""
_RANK: Final = "match_count DESC, document_length ASC, time DESC"
# The same order (plus seq DESC, unique within a session) as one fixed-width text
# key, so each session's strongest event is a plain max() per group: SQLite takes
# the bare columns from that row, which is cheaper than a window function.
_RANK_KEY: Final = (
    "printf('%010d%012d%017d%012d', match_count, 999999999999 - document_length, time + 9007199254740991, seq)"
)
_TERMS_DDL: Final = (
    'CREATE VIRTUAL TABLE IF NOT EXISTS temp."query_terms" USING fts5("text", tokenize=\'unicode61\')',
    'CREATE VIRTUAL TABLE IF NOT EXISTS temp."query_terms_v" USING fts5vocab(temp, "query_terms", instance)',
    'CREATE VIRTUAL TABLE IF NOT EXISTS temp."documents_terms" USING fts5vocab(main, "documents_fts", instance)',
    'CREATE VIRTUAL TABLE IF NOT EXISTS temp."documents_term_rows" USING fts5vocab(main, "documents_fts", row)',
)
_PERSISTED_BY_COUNTS: Final = """
  SELECT {columns}, c."n" AS match_count
  FROM (SELECT json_extract(j."value", '$[0]') AS "doc", json_extract(j."value", '$[1]') AS "n" FROM json_each(?) j) c
  JOIN "documents" d ON d."docid" = c."doc" JOIN "sessions" s ON s."sid" = d."sid"
  WHERE s."status" = 'ok' AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id")
"""


# With the C accelerator (readmodel/ftsaux.py) every match's span count is one
# call on FTS5's position list, and a ranking is pruned before anything but
# the filters' own columns is joined: per session only the documents with the
# session's highest count can be its strongest, and a session whose highest
# count is below the k-th highest of all sessions has k sessions ahead of it,
# so it cannot reach the first k places.  The aggregate sessionq_leaders() does
# that grouping in one pass over the matches (they come in docid order, so in
# session order); only the surviving documents are joined for the remaining
# keys (length, time, session id, seq).  Filters and the live overlay's
# shadowing apply to the matches first, so nothing they exclude can raise the
# cut.  Within one session the cut is the k-th highest count itself.
_SPANS_OF: Final = 'sessionq_spans("{table}")'
_MATCHES: Final = """
  "matches" AS MATERIALIZED (
    SELECT "documents_fts"."rowid" AS "doc", sessionq_spans("documents_fts") AS "n"
    FROM "documents_fts" WHERE "documents_fts" MATCH ?{conditions}
  )"""
# With event filters each match is joined to its document row first (the filters
# read its columns); FTS5 stays the outer loop, so the order is still docid order.
_FILTERED_MATCHES: Final = """
  "scored" AS MATERIALIZED (
    SELECT "documents_fts"."rowid" AS "doc", sessionq_spans("documents_fts") AS "n", d."seq" AS seq, d."type" AS type,
           d."time" AS time, CASE d."surface" WHEN 1 THEN 'current' WHEN 2 THEN 'shadowed' ELSE 'log-only' END AS surface
    FROM "documents_fts" JOIN "documents" d ON d."docid" = "documents_fts"."rowid"
    WHERE "documents_fts" MATCH ?{conditions}
  ),
  "matches" AS MATERIALIZED (SELECT "doc", "n" FROM "scored" WHERE {event_where})"""
# Session filters select the eligible sessions once, under the candidate column names.
_ELIGIBLE: Final = """
  "eligible" AS MATERIALIZED (
    SELECT "sid" FROM (
      SELECT s."sid" AS "sid", s."id" AS session_id, s."cwd" AS cwd, s."parent_session" AS parent_session,
             s."created_at" AS created_at, 0 AS live, 1 AS persisted
      FROM "sessions" s WHERE s."status" = 'ok'
    ) WHERE {session_where}
  ),"""
_IN_RANGE: Final = ' AND "documents_fts"."rowid" BETWEEN ? AND ?'
_IN_ELIGIBLE: Final = ' AND "documents_fts"."rowid" >> 32 IN (SELECT "sid" FROM "eligible")'
_NOT_SHADOWED: Final = (
    ' AND "documents_fts"."rowid" >> 32 NOT IN (SELECT s."sid" FROM temp."live_sessions" l JOIN "sessions" s ON s."id" = l."id")'
)
# Filters bind their values twice on the pruned paths (once to prune, once for
# the live rows); past this many the unpruned path keeps well inside SQLite's limit.
PRUNED_FILTER_BINDINGS: Final = 4_000
_LEADING_SESSIONS: Final = """
  candidates AS (
    SELECT {columns}, json_extract(j."value", '$[1]') AS match_count
    FROM json_each((SELECT sessionq_leaders("doc", "n", ?) FROM "matches")) j
    JOIN "documents" d ON d."docid" = json_extract(j."value", '$[0]') JOIN "sessions" s ON s."sid" = d."sid"
    WHERE s."status" = 'ok'
    UNION ALL {live}
  )"""
_LEADING_EVENTS: Final = """
  "cut" AS MATERIALIZED (SELECT coalesce((SELECT "n" FROM "matches" ORDER BY "n" DESC LIMIT 1 OFFSET ?), 0) AS "floor"),
  candidates AS (
    SELECT {columns}, m."n" AS match_count
    FROM "matches" m JOIN "documents" d ON d."docid" = m."doc" JOIN "sessions" s ON s."sid" = d."sid"
    WHERE m."n" >= (SELECT "floor" FROM "cut") AND s."status" = 'ok'
  )"""


class SqliteSearchBackend:
    """Search over one index database file, with an optional live overlay.

    Holds one read-only connection whose TEMP tables carry the live overlay.
    Thread-safe: calls are serialised.
    """

    def __init__(self, db_path: str | None, *, live: Any = None, config: SearchConfig | None = None, redact: bool = True) -> None:
        """``db_path`` is the index file (opened read-only), or ``None`` for live sessions only;
        with ``redact`` live sessions' documents hold secret markers, as the indexer stores them."""
        self.config = config or SearchConfig()
        self.live = live
        self.redact = redact
        self._lock = threading.Lock()
        self._live_state = _LiveState()
        self._conn: sqlite3.Connection | None = None
        self._db_path = db_path
        self._codec: CursorCodec | None = None
        self._accelerated = False  # whether the connection has readmodel.search.accelerator's functions
        self._ranked_rows: OrderedDict[tuple[str, ...], tuple[list[tuple[Any, ...]], bool]] = OrderedDict()
        # Per generation: whether documents of a length are held by enough sessions to be boilerplate (sqlitemodes).
        self._length_verdicts: tuple[str, dict[int, bool]] = ("", {})
        self._ineligible: tuple[str, bool] = ("", True)  # (generation, whether a stored session is not searchable)
        self._sql_ranking = True  # words/substring ranked by SQLite when it can (sqlranking); false: always in Python
        self._texts = False  # whether the index stores distinct texts, schema 0018 (set with the connection)

    # -- connection -----------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                if self._db_path is None:
                    conn = _empty_index()
                else:
                    conn = sqlite3.connect(reader_uri(self._db_path), uri=True, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA busy_timeout = 30000")
                # As every sessionq connection: the doclist of one common word alone
                # outgrows SQLite's default 2 MB page cache.
                conn.execute("PRAGMA cache_size = -65536")
                doctext.install(conn)  # the documents view's text (schema 0016)
                for ddl in (*_TEMP_DDL, *_TERMS_DDL):
                    conn.execute(ddl)
                self._accelerated = ftsaux.install(conn)
                self._texts = sqlranking.install(conn)
                # Unquoted names: a missing column is an error, never SQLite's string-literal fallback.
                identity, secret = conn.execute("SELECT identity, cursor_secret FROM index_meta").fetchone()
                codec = CursorCodec(identity, secret)
            except (sqlite3.Error, ValueError, TypeError) as exc:
                raise SessionQueryError("SESSION_QUERY_INDEX_FAILED", f"session-search SQLite index failed to open: {exc}", exc) from exc
            self._conn = conn
            self._codec = codec
        return self._conn

    def open(self) -> None:
        """Open the connection now (``openAt: startup``) so failures surface early."""
        with self._lock:
            self._connection()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- public operations ------------------------------------------------------

    @contextmanager
    def snapshot(self, signal: Any) -> Iterator[_Snapshot]:
        """One read transaction with the live overlay synced, serialised and cancellable."""
        with self._serialised(signal), self._cancellable(signal):
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                self._sync_live(conn)
                assert self._codec is not None
                yield _Snapshot(self, conn, self._codec)
            finally:
                _finish(conn)

    # -- internals ----------------------------------------------------------------

    @contextmanager
    def _serialised(self, signal: Any) -> Iterator[None]:
        """Hold the connection lock; a queued call stays cancellable while it waits."""
        if signal is None:
            with self._lock:
                yield
            return
        while not self._lock.acquire(timeout=0.02):
            if signal.aborted:
                raise _aborted(signal)
        try:
            yield
        finally:
            self._lock.release()

    @contextmanager
    def _cancellable(self, signal: Any) -> Iterator[None]:
        """Abort checks before and after, and a SQLite progress handler in between
        that interrupts the running statement once ``signal`` is aborted."""
        if signal is None:
            yield
            return
        if signal.aborted:
            raise _aborted(signal)
        conn = self._connection()
        conn.set_progress_handler(lambda: 1 if signal.aborted else 0, 1000)
        try:
            yield
        except sqlite3.OperationalError as exc:
            if signal.aborted:
                raise _aborted(signal) from exc
            raise
        finally:
            conn.set_progress_handler(None, 0)
        if signal.aborted:
            raise _aborted(signal)

    def _global_generation(self, conn: sqlite3.Connection) -> str:
        main = conn.execute('SELECT "global_generation" FROM "index_meta"').fetchone()[0]
        return f"{main}.{self._live_state.epoch}"

    def _target(self, conn: sqlite3.Connection, session_id: str) -> tuple[Header, str, int | None]:
        live = conn.execute('SELECT "header_json", "generation" FROM temp."live_sessions" WHERE "id" = ?', (session_id,)).fetchone()
        if live is not None:
            return msgspec.json.decode(live[0]), f"live:{live[1]}", None
        row = conn.execute(
            'SELECT "sid", "header_json", "generation", "status", "error_code", "error_message" FROM "sessions" WHERE "id" = ?',
            (session_id,),
        ).fetchone()
        if row is None:
            raise SessionQueryError("SESSION_QUERY_SESSION_NOT_FOUND", f'session "{session_id}" not found')
        if row[3] != "ok":
            raise SessionQueryError(row[4], row[5])
        return msgspec.json.decode(row[1]), f"persisted:{row[2]}", row[0]

    def _sync_live(self, conn: sqlite3.Connection, listed: Sequence[Any] | None = None) -> None:
        """Bring the TEMP overlay in line with the live source (only changed sessions are rewritten);
        ``listed``: the source's listing already taken (one listing for a whole snapshot)."""
        if self.live is None:
            return
        state = self._live_state
        sessions = {session.header["id"]: session for session in (self.live.list() if listed is None else listed)}
        changed = False
        for session_id in [sid for sid in state.fingerprints if sid not in sessions]:
            conn.execute('DELETE FROM temp."live_docs" WHERE "session_id" = ?', (session_id,))
            conn.execute('DELETE FROM temp."live_sessions" WHERE "id" = ?', (session_id,))
            del state.fingerprints[session_id]
            changed = True
        for session_id, session in sessions.items():
            header, events = session.header, list(session.events)
            persisted = conn.execute('SELECT 1 FROM "sessions" WHERE "id" = ?', (session_id,)).fetchone() is not None
            fingerprint = _live_fingerprint(header, events) + (":p" if persisted else ":l")
            if state.fingerprints.get(session_id) == fingerprint:
                continue
            try:
                surfaces = classify_events(events)
            except SurfaceFoldError as error:
                raise invalid_surface_error(error) from error
            documents = build_documents(session_id, events, surfaces, self.redact)
            conn.execute('DELETE FROM temp."live_docs" WHERE "session_id" = ?', (session_id,))
            conn.execute('DELETE FROM temp."live_sessions" WHERE "id" = ?', (session_id,))
            state.next_generation += 1
            created = header.get("createdAt")
            cwd, parent = header.get("cwd"), header.get("parentSession")
            conn.execute(
                'INSERT INTO temp."live_sessions" VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
                (
                    session_id,
                    msgspec.json.encode(header),
                    created if type(created) in (int, float) else None,
                    cwd if type(cwd) is str else None,
                    parent if type(parent) is str else None,
                    1 if persisted else 0,
                    state.next_generation,
                    fingerprint,
                ),
            )
            conn.executemany(
                'INSERT INTO temp."live_docs" ("text", "session_id", "seq", "type", "time", "surface", "length") VALUES (?, ?, ?, ?, ?, ?, ?)',
                [(text, session_id, doc.seq, doc.type, doc.time, doc.surface, len(text)) for doc in documents for text in (sanitize_text(doc.text),)],
            )
            state.fingerprints[session_id] = fingerprint
            changed = True
        if changed:
            state.epoch += 1

    @staticmethod
    def _terms(conn: sqlite3.Connection, query: str) -> list[bytes]:
        """The query's tokens exactly as FTS5 stores them, as raw UTF-8 bytes.

        FTS5 cuts every token longer than 32,768 bytes to its first 32,768, in
        a document and in a query alike (so two such tokens match when those
        bytes agree), and the cut may fall inside a character: terms are
        therefore read and bound as bytes, never decoded.
        """
        conn.execute('DELETE FROM temp."query_terms"')
        conn.execute('INSERT INTO temp."query_terms" ("text") VALUES (?)', (query,))
        return [row[0] for row in conn.execute('SELECT CAST("term" AS BLOB) FROM temp."query_terms_v" ORDER BY "offset"')]

    def _long_phrase_absent(
        self, conn: sqlite3.Connection, terms: list[bytes], *, doc_range: tuple[int, int] | None = None, live_session: str | None = None
    ) -> bool:
        """Whether a short window of a long phrase already proves it matches nothing in scope.

        Every match of the phrase contains a match of its first and of its last
        :data:`PROBE_TOKENS` tokens, so when either window matches no document
        in scope the phrase matches none either.  The scope is as
        :meth:`_window_occurs` takes it.  ``False`` means only "not proven".
        """
        if len(terms) <= PROBE_TOKENS:
            return False
        windows = {tuple(terms[:PROBE_TOKENS]): None, tuple(terms[-PROBE_TOKENS:]): None}
        for window in windows:
            probe = self._window_phrase(conn, list(window))
            if probe is not None and not self._window_occurs(conn, probe, doc_range=doc_range, live_session=live_session):
                return True
        return False

    @classmethod
    def _window_phrase(cls, conn: sqlite3.Connection, window: list[bytes]) -> str | None:
        """An FTS5 phrase whose tokens are exactly ``window``; ``None`` when no
        text is known to tokenise to them (a term cut inside a character, or one
        that the tokenizer does not give back unchanged)."""
        try:
            text = " ".join(term.decode("utf-8") for term in window)
        except UnicodeDecodeError:
            return None
        return match_expression(text) if cls._terms(conn, text) == window else None

    @staticmethod
    def _window_occurs(conn: sqlite3.Connection, phrase: str, *, doc_range: tuple[int, int] | None, live_session: str | None) -> bool:
        """Whether ``phrase`` matches any document a search reads: with ``doc_range``
        the stored documents in it, with ``live_session`` that live session's,
        with neither every stored and live document.  Shadowing and filters are
        ignored: a superset of the scope is enough to prove absence."""
        checks: list[tuple[str, list[Any]]] = []
        if live_session is None:
            clause = ' AND "rowid" BETWEEN ? AND ?' if doc_range is not None else ""
            checks.append((f'SELECT 1 FROM "documents_fts" WHERE "documents_fts" MATCH ?{clause} LIMIT 1', [phrase, *(doc_range or ())]))
        if doc_range is None:
            clause = ' AND "session_id" = ?' if live_session is not None else ""
            checks.append((f'SELECT 1 FROM temp."live_docs" WHERE "live_docs" MATCH ?{clause} LIMIT 1', [phrase, *([] if live_session is None else [live_session])]))
        return any(conn.execute(sql, args).fetchone() is not None for sql, args in checks)

    def _candidates(
        self,
        conn: sqlite3.Connection,
        terms: list[bytes],
        phrase: str,
        doc_range: tuple[int, int] | None = None,
        live_session: str | None = None,
    ) -> tuple[str, list[Any]]:
        """The ``candidates`` CTE and its parameters.

        ``doc_range`` limits the persisted side to one session's documents
        (docids are ``sid << 32 | seq``); ``live_session`` limits the live side.
        Within-session searches pass exactly one of them and exclude the other side.
        """
        scoped = doc_range is not None or live_session is not None
        range_args = list(doc_range) if doc_range is not None else []
        if doc_range is None and scoped:
            persisted, persisted_args = 'SELECT * FROM (SELECT NULL AS session_id) WHERE 0', []
        elif self._accelerated:
            clause = ' AND "documents_fts"."rowid" BETWEEN ? AND ?' if doc_range is not None else ""
            marks = _SPANS_OF.format(table="documents_fts")
            persisted = _PERSISTED_BY_PHRASE.format(columns=_SESSION_COLUMNS, marks=marks, doc_range=clause)
            persisted_args = [phrase, *range_args]
        elif len(terms) == 1:
            clause = ' AND "doc" BETWEEN ? AND ?' if doc_range is not None else ""
            persisted = _PERSISTED_BY_TOKEN.format(columns=_SESSION_COLUMNS, doc_range=clause)
            persisted_args = [terms[0], *range_args]
        elif (counted := phrase_spans_from_postings(conn, terms, phrase, doc_range)) is not None:
            persisted = _PERSISTED_BY_COUNTS.format(columns=_SESSION_COLUMNS)
            persisted_args = [msgspec.json.encode(counted).decode()]
        else:
            clause = ' AND "documents_fts"."rowid" BETWEEN ? AND ?' if doc_range is not None else ""
            marks = _MARKS.format(h='highlight("documents_fts", 0, ?, ?)')
            persisted = _PERSISTED_BY_PHRASE.format(columns=_SESSION_COLUMNS, marks=marks, doc_range=clause)
            persisted_args = [START_MARK, END_MARK, START_MARK, END_MARK, START_MARK, phrase, *range_args]
        if scoped and live_session is None:
            return f"WITH candidates AS ({persisted})", persisted_args
        live, live_args = self._live_candidates(phrase, live_session)
        if scoped:
            return f"WITH candidates AS ({live})", live_args
        return f"WITH candidates AS ({persisted} UNION ALL {live})", [*persisted_args, *live_args]

    def _matches(
        self, phrase: str, *, doc_range: tuple[int, int] | None = None, sessions: Where | None = None, events: Where | None = None
    ) -> tuple[str, list[Any]]:
        """The ``matches`` CTE (preceded by what it needs) and its parameters: the
        docid and span count of every persisted match that passes the filters,
        in docid order, without sessions the live overlay shadows."""
        prefix, args, conditions = "", [], ""
        if sessions is not None and sessions.fragments:
            prefix = _ELIGIBLE.format(session_where=sessions.sql())
            args += sessions.params
            conditions += _IN_ELIGIBLE
        args.append(phrase)
        if doc_range is not None:
            conditions += _IN_RANGE
            args += list(doc_range)
        if self._live_state.fingerprints:
            conditions += _NOT_SHADOWED
        if events is not None and events.fragments:
            return prefix + _FILTERED_MATCHES.format(conditions=conditions, event_where=events.sql()), [*args, *events.params]
        return prefix + _MATCHES.format(conditions=conditions), args

    def _live_candidates(self, phrase: str, live_session: str | None = None) -> tuple[str, list[Any]]:
        """The live overlay's candidate rows (one session's with ``live_session``) and their parameters."""
        scope = ' AND ld."session_id" = ?' if live_session else ""
        scope_args = [live_session] if live_session else []
        if self._accelerated:
            return _LIVE_BRANCH.format(marks=_SPANS_OF.format(table="live_docs"), scope=scope), [phrase, *scope_args]
        marks = _MARKS.format(h='highlight("live_docs", 0, ?, ?)')
        return _LIVE_BRANCH.format(marks=marks, scope=scope), [START_MARK, END_MARK, START_MARK, END_MARK, START_MARK, phrase, *scope_args]

    def _ranked(self, key: tuple[str, ...], fetch: Callable[[int, int], list[tuple[Any, ...]]], offset: int, need: int) -> list[Row]:
        """Rows ``offset .. offset + need`` of a ranking, served from a small cache.

        The ranking of one request over one generation never changes, so a
        call keeps the leading rows it ranked (only their identity columns) and
        later pages — a cursor walk, the tools' internal paging — are cut from
        them instead of ranking every match again.  The first call ranks
        :data:`RANKED_FIRST_ROWS` (a pruned ranking costs less the fewer rows
        it must produce); each miss doubles that, up to :data:`RANKED_CACHE_ROWS`.
        """
        cached = self._ranked_rows.get(key)
        held = 0
        if cached is not None:
            self._ranked_rows.move_to_end(key)
            rows, complete = cached
            if complete or offset + need <= len(rows):
                return [Row(*row) for row in rows[offset : offset + need]]
            held = len(rows)
        if offset + need > RANKED_CACHE_ROWS:
            return [Row(*row) for row in fetch(need, offset)]
        want = min(RANKED_CACHE_ROWS, max(offset + need, 2 * held, RANKED_FIRST_ROWS))
        rows = fetch(want, 0)
        self._ranked_rows[key] = (rows, len(rows) < want)
        while len(self._ranked_rows) > RANKED_CACHE_SIZE:
            self._ranked_rows.popitem(last=False)
        return [Row(*row) for row in rows[offset : offset + need]]

    def _query_sessions(self, conn: sqlite3.Connection, request: SessionsRequest, offset: int, cache_key: tuple[str, ...]) -> list[Row]:
        sessions, events = session_where(request.session_filters), event_where(request.event_filters)
        if len(sessions.fragments) + len(events.fragments) > OUTER_PREDICATE_LIMIT:
            raise budget_error()
        filters = sessions.params + events.params
        if FIXED_BINDINGS + len(filters) + 2 > BINDING_LIMIT:
            raise binding_error()
        if request.match != "phrase":
            return sqlitemodes.query_sessions(self, conn, request, sessions, events, offset, cache_key)
        phrase = match_expression(request.query)
        terms = bounded_terms(self._terms(conn, request.query))
        if not terms:
            return []  # a phrase without tokens matches nothing
        where = " AND ".join(fragment for fragment in (sessions.sql(), events.sql()) if fragment)

        def fetch(limit: int, skip: int) -> list[tuple[Any, ...]]:
            # Built only when the ranking cache cannot answer: building may count phrase spans.
            if self._long_phrase_absent(conn, terms):
                return []
            if self._accelerated and len(filters) <= PRUNED_FILTER_BINDINGS:
                matches, args = self._matches(phrase, sessions=sessions, events=events)
                live, live_args = self._live_candidates(phrase)
                cte = "WITH" + matches + "," + _LEADING_SESSIONS.format(columns=_SESSION_COLUMNS, live=live)
                args += [limit + skip, *live_args]
            else:
                cte, args = self._candidates(conn, terms, phrase)
            sql = (
                cte
                + ", filtered AS (SELECT * FROM candidates"
                + (f" WHERE {where}" if where else "")
                + "), best AS (SELECT session_id, header_json, live, persisted, docid, seq, type, time, surface, match_count, "
                + f"document_length, max({_RANK_KEY}) FROM filtered GROUP BY session_id) "
                + "SELECT session_id, header_json, live, persisted, docid, seq, type, time, surface FROM best "
                + f"ORDER BY {_RANK}, session_id ASC, seq DESC LIMIT ? OFFSET ?"
            )
            return conn.execute(sql, [*args, *filters, limit, skip]).fetchall()

        rows = self._ranked(cache_key, fetch, offset, request.limit + 1)
        return self._highlight(conn, rows, phrase)

    def _query_events(
        self, conn: sqlite3.Connection, request: EventsRequest, sid: int | None, offset: int, cache_key: tuple[str, ...]
    ) -> list[Row]:
        events = event_where(request.filters)
        if 1 + len(events.fragments) > OUTER_PREDICATE_LIMIT:
            raise budget_error()
        if FIXED_BINDINGS + len(events.params) + 1 + 2 > BINDING_LIMIT:
            raise binding_error()
        if request.match != "phrase":
            return sqlitemodes.query_events(self, conn, request, events, sid, offset, cache_key)
        phrase = match_expression(request.query)
        terms = bounded_terms(self._terms(conn, request.query))
        if not terms:
            return []
        where = events.sql()
        doc_range = None if sid is None else (sid << 32, (sid << 32) | 0xFFFFFFFF)

        def fetch(limit: int, skip: int) -> list[tuple[Any, ...]]:
            # Only the target's documents are read (docid ranges and rowid ranges).
            scope: dict[str, Any] = {"live_session": request.session_id} if doc_range is None else {"doc_range": doc_range}
            if self._long_phrase_absent(conn, terms, **scope):
                return []
            if doc_range is None:
                cte, args = self._candidates(conn, terms, phrase, live_session=request.session_id)
            elif self._accelerated and len(events.params) <= PRUNED_FILTER_BINDINGS:
                matches, args = self._matches(phrase, doc_range=doc_range, events=events)
                cte = "WITH" + matches + "," + _LEADING_EVENTS.format(columns=_SESSION_COLUMNS)
                args += [limit + skip - 1]
            else:
                cte, args = self._candidates(conn, terms, phrase, doc_range=doc_range)
            sql = (
                cte
                + " SELECT session_id, header_json, live, persisted, docid, seq, type, time, surface FROM candidates WHERE session_id = ?"
                + (f" AND {where}" if where else "")
                + f" ORDER BY {_RANK}, seq DESC LIMIT ? OFFSET ?"
            )
            return conn.execute(sql, [*args, request.session_id, *events.params, limit, skip]).fetchall()

        rows = self._ranked(cache_key, fetch, offset, request.limit + 1)
        return self._highlight(conn, rows, phrase)

    def _marked_document(self, conn: sqlite3.Connection, docid: int, phrase: str) -> str:
        """The highlighted text the snippet of one stored document needs.

        ``highlight()`` tokenises a whole document, which costs milliseconds for
        the largest tool outputs, while the snippet only needs the text around
        the first match.  With the accelerator, ``sessionq_snippet_source()``
        returns just that part of ``highlight()``'s output, grown once if it
        does not provably decide the snippet (:func:`snippet_source_decides`).
        Without it, two prefixes are highlighted in a scratch FTS5 table with
        the same tokenizer, and the first that provably decides the snippet
        (:func:`prefix_decides_snippet`) is used.  The whole document is the
        fallback of both.
        """
        width = self.config.snippet_chars
        first = _SNIPPET_PREFIX_CHARS + 4 * width
        if self._accelerated:
            sql = (
                'SELECT sessionq_snippet_source("documents_fts", ?, ?, ?, ?) FROM "documents_fts" '
                'WHERE "documents_fts" MATCH ? AND "rowid" = ?'
            )
            for scale in (1, 16):
                before = 16 * (width + 3) * scale  # _head_window tries 4 * (width + 3) first
                source = conn.execute(sql, (START_MARK, END_MARK, before, first * scale, phrase, docid)).fetchone()
                if source is None or source[0] is None:
                    break
                marked = snippet_source_decides(source[0], width)
                if marked is not None:
                    return marked
        else:
            found = conn.execute('SELECT "text" FROM "documents" WHERE "docid" = ?', (docid,)).fetchone()
            text = found[0] if found else ""
            # Two tries, then the whole text: a match deep in a huge document costs
            # little more than highlighting it whole.
            for size in (first, 16 * first):
                if size >= len(text):
                    break
                marked_prefix = self.scratch_highlight(conn, text[:size], phrase)
                if marked_prefix is not None and prefix_decides_snippet(marked_prefix, width):
                    return marked_prefix
        sql = 'SELECT highlight("documents_fts", 0, ?, ?) FROM "documents_fts" WHERE "documents_fts" MATCH ? AND "rowid" = ?'
        whole = conn.execute(sql, (START_MARK, END_MARK, phrase, docid)).fetchone()
        return whole[0] if whole else ""

    @staticmethod
    def scratch_highlight(conn: sqlite3.Connection, text: str, expression: str) -> str | None:
        """``highlight()`` of ``expression`` in ``text`` alone (the scratch FTS5 table, with
        documents_fts's tokenizer); ``None``: ``text`` does not match."""
        conn.execute('INSERT INTO temp."snippet_scratch" ("snippet_scratch") VALUES (\'delete-all\')')
        conn.execute('DELETE FROM temp."snippet_text"')
        conn.execute('INSERT INTO temp."snippet_text" ("id", "text") VALUES (1, ?)', (text,))
        conn.execute('INSERT INTO temp."snippet_scratch" ("rowid", "text") VALUES (1, ?)', (text,))
        sql = 'SELECT highlight("snippet_scratch", 0, ?, ?) FROM temp."snippet_scratch" WHERE "snippet_scratch" MATCH ?'
        found = conn.execute(sql, (START_MARK, END_MARK, expression)).fetchone()
        return None if found is None else found[0]

    def _highlight(self, conn: sqlite3.Connection, rows: list[Row], phrase: str, marker: Callable[[Row], str] | None = None) -> list[Row]:
        """Headers and highlighted text of the page's rows only.

        Ranking carries just the session's rowid; the header JSON and the
        highlighted document (for the snippet) are fetched for the few rows of
        the page, not for every match.  ``marker`` (the substring mode) marks
        a row's text instead of FTS5's ``highlight()`` of ``phrase``.
        """
        for row in rows:
            if row.live:
                found_header = conn.execute('SELECT "header_json" FROM temp."live_sessions" WHERE "id" = ?', (row.session_id,)).fetchone()
            else:
                found_header = conn.execute('SELECT "header_json" FROM "sessions" WHERE "sid" = ?', (row.header_json,)).fetchone()
            row.header_json = found_header[0]
            if marker is not None:
                row.marked_text = marker(row)
            elif row.docid >= 0:
                row.marked_text = self._marked_document(conn, row.docid, phrase)
            else:
                sql = 'SELECT highlight("live_docs", 0, ?, ?) FROM temp."live_docs" WHERE "live_docs" MATCH ? AND "rowid" = ?'
                found = conn.execute(sql, (START_MARK, END_MARK, phrase, -row.docid)).fetchone()
                row.marked_text = found[0] if found else ""
        return rows


class _Snapshot:
    """:class:`readmodel.search.backend.SearchSnapshot` over one open read transaction."""

    __slots__ = ("backend", "conn", "codec")

    def __init__(self, backend: SqliteSearchBackend, conn: sqlite3.Connection, codec: CursorCodec) -> None:
        self.backend, self.conn, self.codec = backend, conn, codec

    def generation(self) -> str:
        return self.backend._global_generation(self.conn)

    def target(self, session_id: str) -> tuple[Header, str, int | None]:
        return self.backend._target(self.conn, session_id)

    def sessions_page(self, request: SessionsRequest, offset: int, cache_key: tuple[str, ...]) -> list[Row]:
        return self.backend._query_sessions(self.conn, request, offset, cache_key)

    def events_page(self, request: EventsRequest, handle: int | None, offset: int, cache_key: tuple[str, ...]) -> list[Row]:
        return self.backend._query_events(self.conn, request, handle, offset, cache_key)


def sqlite_search(db_path: str | None, *, live: Any = None, config: SearchConfig | None = None, redact: bool = True) -> SessionSearch:
    """A :class:`SessionSearch` over the SQLite index at ``db_path`` (``None``: live sessions only)."""
    config = config or SearchConfig()
    return SessionSearch(SqliteSearchBackend(db_path, live=live, config=config, redact=redact), config)


def _empty_index() -> sqlite3.Connection:
    """An in-memory, empty index: searching live sessions when no index is bound."""
    import secrets
    import uuid

    from sqlalchemy import create_engine
    from sqlalchemy.schema import CreateIndex, CreateTable

    from readmodel.store.schema import DOCUMENTS_VIEW_DDL, FTS_DDL
    from readmodel.store.schemacheck import sqlite_metadata
    from readmodel.store.texts import TRIGGERS_DDL

    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    doctext.install(conn)  # the documents view's functions
    dialect = create_engine("sqlite://").dialect
    for table in sqlite_metadata().sorted_tables:  # an SQLite index's own layout (documents a view)
        conn.execute(str(CreateTable(table).compile(dialect=dialect)))
        for index in table.indexes:
            conn.execute(str(CreateIndex(index).compile(dialect=dialect)))
    for ddl in (DOCUMENTS_VIEW_DDL, *TRIGGERS_DDL, FTS_DDL):
        conn.execute(ddl)
    conn.execute(
        'INSERT INTO "index_meta" ("singleton", "identity", "global_generation", "created_at", "cursor_secret") VALUES (1, ?, 0, 0, ?)',
        (uuid.uuid4().hex, secrets.token_bytes(32)),
    )
    return conn


def _finish(conn: sqlite3.Connection) -> None:
    """End the read transaction (an interrupted statement may already have ended it)."""
    if conn.in_transaction:
        conn.execute("COMMIT")


def _aborted(signal: Any) -> SessionQueryError:
    reason = getattr(signal, "reason", None)
    return SessionQueryError("SESSION_QUERY_ABORTED", "session-search was aborted", reason if isinstance(reason, BaseException) else None)
