"""The SQLite FTS5 search backend, with the live overlay and the optional C accelerator.

Ranking runs over the index's ``texts_fts`` (unicode61 tokens, one row per
distinct text: :mod:`readmodel.search.phrasetexts`): a match's strength is its
number of highlight spans, counted once per text by the C accelerator
(:mod:`readmodel.search.accelerator`) from FTS5's position lists when it is
built, else from posting lists (``fts5vocab``) or ``highlight()`` itself.  The live overlay (sessions held in memory by the host) lives in
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
from readmodel.search import phrasetexts, sqlitemodes
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
SCOPE_FILTER_BINDINGS: Final = 4_000
"""Past this many filter values, step 1 of the phrase ranking is not narrowed by the filters
(it would bind them twice); the candidates still apply them, within SQLite's limit."""


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

# A match's strength is the number of highlighted spans FTS5's highlight() would
# produce, counted once per distinct text (texts_fts, readmodel.search.phrasetexts).
# With the C accelerator every match's span count is one call on FTS5's position
# list (sessionq_spans).  Without it: for a one-token phrase every token instance
# is its own span, so the count comes straight from the posting list
# (fts5vocab), which is far cheaper than highlighting every matching text;
# phrases of rarer tokens are counted from the posting lists too, and the rest
# by the markers of highlight() itself.
_MARKS: Final = "((length(CAST({h} AS BLOB)) - length(CAST(replace({h}, ?, '') AS BLOB))) / 3)"
_SPANS: Final = 'SELECT "rowid" AS "text_id", {n} AS "n" FROM "texts_fts" WHERE "texts_fts" MATCH ?'
_BY_TOKEN: Final = 'SELECT "doc" AS "text_id", count(*) AS "n" FROM temp."texts_terms" WHERE "term" = CAST(? AS TEXT) GROUP BY "doc"'
_BY_COUNTS: Final = (
    'SELECT json_extract(j."value", \'$[0]\') AS "text_id", json_extract(j."value", \'$[1]\') AS "n" FROM json_each(?) j'
)
# Step 1 of the texts-first ranking: the matching texts some document in scope holds.
_TEXTS: Final = 'WITH "m" AS MATERIALIZED ({selection}) SELECT m."text_id", m."n", t."length" FROM "m" JOIN "texts" t ON t."id" = m."text_id"{scope}'
_LIVE_ITEMS: Final = 'SELECT "rowid", {n} AS "n", "length" FROM temp."live_docs" WHERE "live_docs" MATCH ?{scope}'
_TERMS_DDL: Final = (
    'CREATE VIRTUAL TABLE IF NOT EXISTS temp."query_terms" USING fts5("text", tokenize=\'unicode61\')',
    'CREATE VIRTUAL TABLE IF NOT EXISTS temp."query_terms_v" USING fts5vocab(temp, "query_terms", instance)',
    'CREATE VIRTUAL TABLE IF NOT EXISTS temp."texts_terms" USING fts5vocab(main, "texts_fts", instance)',
    'CREATE VIRTUAL TABLE IF NOT EXISTS temp."texts_term_rows" USING fts5vocab(main, "texts_fts", row)',
)


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
            # Every stored text (a superset of one session's): one probe of the per-text index.
            checks.append(('SELECT 1 FROM "texts_fts" WHERE "texts_fts" MATCH ? LIMIT 1', [phrase]))
        if doc_range is None:
            clause = ' AND "session_id" = ?' if live_session is not None else ""
            checks.append((f'SELECT 1 FROM temp."live_docs" WHERE "live_docs" MATCH ?{clause} LIMIT 1', [phrase, *([] if live_session is None else [live_session])]))
        return any(conn.execute(sql, args).fetchone() is not None for sql, args in checks)

    def _strengths(self, conn: sqlite3.Connection, terms: list[bytes], phrase: str) -> tuple[str, list[Any]]:
        """``(text_id, n)`` of every stored text matching ``phrase``, ``n`` its highlight spans."""
        if self._accelerated:
            return _SPANS.format(n='sessionq_spans("texts_fts")'), [phrase]
        if len(terms) == 1:
            return _BY_TOKEN, [terms[0]]
        counted = phrase_spans_from_postings(conn, terms, phrase)
        if counted is not None:
            return _BY_COUNTS, [msgspec.json.encode(counted).decode()]
        marks = _MARKS.format(h='highlight("texts_fts", 0, ?, ?)')
        return _SPANS.format(n=marks), [START_MARK, END_MARK, START_MARK, END_MARK, START_MARK, phrase]

    def _live_items(self, phrase: str, live_session: str | None) -> tuple[str, list[Any]]:
        """``(rowid, n, length)`` of the live documents matching ``phrase`` (one session's with ``live_session``)."""
        scope = ' AND "session_id" = ?' if live_session is not None else ""
        scope_args = [live_session] if live_session is not None else []
        if self._accelerated:
            return _LIVE_ITEMS.format(n='sessionq_spans("live_docs")', scope=scope), [phrase, *scope_args]
        marks = _MARKS.format(h='highlight("live_docs", 0, ?, ?)')
        return _LIVE_ITEMS.format(n=marks, scope=scope), [START_MARK, END_MARK, START_MARK, END_MARK, START_MARK, phrase, *scope_args]

    def _phrase_matches(
        self,
        conn: sqlite3.Connection,
        terms: list[bytes],
        phrase: str,
        *,
        stored: bool = True,
        doc_range: tuple[int, int] | None = None,
        live: bool = True,
        live_session: str | None = None,
        sessions: Where | None = None,
        events: Where | None = None,
    ) -> phrasetexts.PhraseMatches:
        """One phrase search's matches (:class:`readmodel.search.phrasetexts.PhraseMatches`): the
        stored texts (``stored``; ``doc_range``: one session's documents) and the live documents
        (``live``; ``live_session``: one session's) in scope, with the filters."""
        sessions, events = sessions or Where(), events or Where()
        texts, texts_args = None, []
        if stored:
            selection, texts_args = self._strengths(conn, terms, phrase)
            # The filters narrow step 1 too (bound a second time), unless they are very many.
            narrow = len(sessions.params) + len(events.params) <= SCOPE_FILTER_BINDINGS
            scope, scope_args = sqlitemodes.in_scope(self, conn, 'm."text_id"', doc_range, *((sessions, events) if narrow else (Where(), Where())))
            texts, texts_args = _TEXTS.format(selection=selection, scope=scope.replace(" AND ", " WHERE ", 1)), [*texts_args, *scope_args]
        live_sql, live_args = None, []
        if live and self._live_state.fingerprints:
            live_sql, live_args = self._live_items(phrase, live_session)
        where = " AND ".join(fragment for fragment in (sessions.sql(), events.sql()) if fragment)
        grouped, grouped_args = self._grouped(sessions, events)
        return phrasetexts.PhraseMatches(texts, texts_args, live_sql, live_args, doc_range, where, [*sessions.params, *events.params], grouped, grouped_args)

    @staticmethod
    def _grouped(sessions: Where, events: Where) -> tuple[str | None, list[Any]]:
        """The conditions on a stored document ``e`` that let a cross-session ranking group
        documents by session first (:attr:`readmodel.search.phrasetexts.PhraseMatches.grouped`):
        the event filters, and the session filters as an eligibility test on its docid; ``None``
        when the filters are too many to bind a second time."""
        if len(sessions.params) + len(events.params) > SCOPE_FILTER_BINDINGS:
            return None, []
        conditions, args = "", []
        if sessions.fragments:
            conditions, args = f' AND e."docid" >> 32 IN (SELECT "sid" FROM ({sqlitemodes.ELIGIBLE}) WHERE {sessions.sql()})', list(sessions.params)
        if events.fragments:
            conditions += f" AND ({events.sql()})"
            args += events.params
        return conditions, args

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

        def fetch(limit: int, skip: int) -> list[tuple[Any, ...]]:
            # Built only when the ranking cache cannot answer: building may count phrase spans.
            if self._long_phrase_absent(conn, terms):
                return []
            matches = self._phrase_matches(conn, terms, phrase, sessions=sessions, events=events)
            return phrasetexts.ranked_sessions(conn, matches, limit, skip)

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
        doc_range = None if sid is None else (sid << 32, (sid << 32) | 0xFFFFFFFF)

        def fetch(limit: int, skip: int) -> list[tuple[Any, ...]]:
            # Only the target's documents are read: a stored session's (docid range) or a live one's.
            scope: dict[str, Any] = {"live_session": request.session_id} if doc_range is None else {"doc_range": doc_range}
            if self._long_phrase_absent(conn, terms, **scope):
                return []
            if doc_range is None:
                matches = self._phrase_matches(conn, terms, phrase, stored=False, live_session=request.session_id, events=events)
            else:
                matches = self._phrase_matches(conn, terms, phrase, doc_range=doc_range, live=False, events=events)
            return phrasetexts.ranked_events(conn, matches, request.session_id, limit, skip)

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
        held = conn.execute('SELECT "text_id" FROM "document_rows" WHERE "docid" = ?', (docid,)).fetchone()
        if held is None:
            return ""
        text_id = held[0]  # the document's marks are its text's (texts_fts is per text)
        if self._accelerated:
            sql = 'SELECT sessionq_snippet_source("texts_fts", ?, ?, ?, ?) FROM "texts_fts" WHERE "texts_fts" MATCH ? AND "rowid" = ?'
            for scale in (1, 16):
                before = 16 * (width + 3) * scale  # _head_window tries 4 * (width + 3) first
                source = conn.execute(sql, (START_MARK, END_MARK, before, first * scale, phrase, text_id)).fetchone()
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
        sql = 'SELECT highlight("texts_fts", 0, ?, ?) FROM "texts_fts" WHERE "texts_fts" MATCH ? AND "rowid" = ?'
        whole = conn.execute(sql, (START_MARK, END_MARK, phrase, text_id)).fetchone()
        return whole[0] if whole else ""

    @staticmethod
    def scratch_highlight(conn: sqlite3.Connection, text: str, expression: str) -> str | None:
        """``highlight()`` of ``expression`` in ``text`` alone (the scratch FTS5 table, with
        texts_fts's tokenizer); ``None``: ``text`` does not match."""
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

    from readmodel.store import textsearch
    from readmodel.store.schema import DOCUMENTS_VIEW_DDL
    from readmodel.store.schemacheck import sqlite_metadata
    from readmodel.store.texts import TRIGGERS_DDL

    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    doctext.install(conn)  # the documents view's functions
    dialect = create_engine("sqlite://").dialect
    for table in sqlite_metadata().sorted_tables:  # an SQLite index's own layout (documents a view)
        conn.execute(str(CreateTable(table).compile(dialect=dialect)))
        for index in table.indexes:
            conn.execute(str(CreateIndex(index).compile(dialect=dialect)))
    for ddl in (DOCUMENTS_VIEW_DDL, *TRIGGERS_DDL, *textsearch.DDL):
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
