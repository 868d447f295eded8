"""The ``words`` and ``substring`` modes over the SQLite index (semantics: :mod:`readmodel.search.modes`).

Both modes select the matching documents in SQL — ``words`` through
``documents_fts`` with an expression of quoted tokens, ``substring`` through
the candidate seam (:func:`readmodel.search.substring.index_candidates`, else
every document in scope) — with the metadata filters and the live overlay's
shadowing applied in the same statement, then rank them in Python
(:class:`readmodel.search.modes.Ranking`), whose keys need each document's
strength and whether its text is boilerplate.

Boilerplate needs the number of distinct sessions holding a text.  Matching
depends on the text alone, so an unscoped search already sees every copy of
every matching text; a scoped search (filters, or one session) looks the few
texts seen in fewer than :data:`BOILERPLATE_SESSIONS` sessions up in the whole
corpus, through the ``documents_text_key`` index on ``(length, substr(text,
1, 32))`` (migration 0008), reading at most that many sessions per text.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from typing import Any, Final

from readmodel.search.backend import Row
from readmodel.search.modes import BOILERPLATE_SESSIONS, Match, Ranking, words_expression
from readmodel.search.predicates import (
    BINDING_LIMIT,
    FIXED_BINDINGS,
    OUTER_PREDICATE_LIMIT,
    binding_error,
    budget_error,
    event_where,
    session_where,
)
from readmodel.search.requests import EventsRequest, SessionsRequest, bounded_terms
from readmodel.search.snippets import END_MARK, START_MARK
from readmodel.search.substring import count_occurrences, index_candidates, mark_occurrences, substring_pattern

TEXT_KEY_CHARS: Final = 32
"""Code points of a document's text in the ``documents_text_key`` index (with its length)."""

_PERSISTED: Final = """
  SELECT s."id" AS session_id, s."sid" AS header_json, s."created_at" AS created_at, s."cwd" AS cwd,
         s."parent_session" AS parent_session, 0 AS live, 1 AS persisted, d."docid" AS docid, d."seq" AS seq,
         d."type" AS type, d."time" AS time,
         CASE d."surface" WHEN 1 THEN 'current' WHEN 2 THEN 'shadowed' ELSE 'log-only' END AS surface,
         d."length" AS document_length, {text} AS text, {strength} AS strength
  FROM {source} JOIN "sessions" s ON s."sid" = d."sid"
  WHERE s."status" = 'ok' AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id"){conditions}"""
_LIVE: Final = """
  SELECT l."id" AS session_id, NULL AS header_json, l."created_at" AS created_at, l."cwd" AS cwd,
         l."parent_session" AS parent_session, 1 AS live, l."persisted" AS persisted, -ld."rowid" AS docid, ld."seq" AS seq,
         ld."type" AS type, ld."time" AS time, ld."surface" AS surface, ld."length" AS document_length, {text} AS text, {strength} AS strength
  FROM temp."live_docs" ld JOIN temp."live_sessions" l ON l."id" = ld."session_id"
  WHERE 1{conditions}"""
_HOLDERS: Final = f"""
  SELECT DISTINCT s."id" FROM "documents" d JOIN "sessions" s ON s."sid" = d."sid"
  WHERE d."length" = ? AND substr(d."text", 1, {TEXT_KEY_CHARS}) = ? AND d."text" = ? AND s."status" = 'ok' LIMIT ?"""
_LIVE_HOLDERS: Final = 'SELECT DISTINCT "session_id" FROM temp."live_docs" WHERE "length" = ? AND "text" = ? LIMIT ?'


class _Mode:
    """One words or substring query: how to select its documents and how to score one."""

    def __init__(self, backend: Any, conn: sqlite3.Connection, mode: str, query: str, prefix: bool) -> None:
        self.mode = mode
        self.query = query
        # With the C accelerator a words match's spans come from FTS5's position
        # lists (sessionq_spans, as the phrase mode counts them) and only the text
        # is read; without it highlight() marks the text and the marks are counted.
        self.accelerated = bool(backend._accelerated)
        if mode == "words":
            self.expression, terms = words_expression(query, prefix, lambda text: backend._terms(conn, text))
            bounded_terms(terms)
        else:
            self.pattern = substring_pattern(query)

    @property
    def empty(self) -> bool:
        return self.mode == "words" and not self.expression

    def persisted(self, conn: sqlite3.Connection, doc_range: tuple[int, int] | None) -> tuple[str, list[Any]]:
        range_sql = ' AND d."docid" BETWEEN ? AND ?' if doc_range is not None else ""
        range_args = list(doc_range) if doc_range is not None else []
        if self.mode == "words":
            text, strength, marks = self._words_columns("documents_fts")
            sql = _PERSISTED.format(
                text=text,
                strength=strength,
                source='"documents_fts" JOIN "documents" d ON d."docid" = "documents_fts"."rowid"',
                conditions=' AND "documents_fts" MATCH ?' + range_sql,
            )
            return sql, [*marks, self.expression, *range_args]
        conditions, args = range_sql, range_args
        candidates = index_candidates(conn, self.query, doc_range)
        if candidates is not None:
            conditions += f' AND d."docid" IN ({candidates[0]})'
            args = [*args, *candidates[1]]
        return _PERSISTED.format(text='d."text"', strength="NULL", source='"documents" d', conditions=conditions), args

    def _words_columns(self, table: str) -> tuple[str, str, list[str]]:
        """``(text, strength, params)`` columns of a words match in ``table``."""
        if self.accelerated:
            column = 'd."text"' if table == "documents_fts" else 'ld."text"'
            return column, f'sessionq_spans("{table}")', []
        return f'highlight("{table}", 0, ?, ?)', "NULL", [START_MARK, END_MARK]

    def live(self, live_session: str | None) -> tuple[str, list[Any]]:
        scope = ' AND ld."session_id" = ?' if live_session is not None else ""
        scope_args = [live_session] if live_session is not None else []
        if self.mode == "words":
            text, strength, marks = self._words_columns("live_docs")
            sql = _LIVE.format(text=text, strength=strength, conditions=' AND "live_docs" MATCH ?' + scope)
            return sql, [*marks, self.expression, *scope_args]
        return _LIVE.format(text='ld."text"', strength="NULL", conditions=scope), scope_args

    def strength(self, text: str, counted: int | None) -> int:
        """Highlighted spans: ``counted`` by SQL, else the marks of a words match's
        highlighted ``text``, else a substring's occurrences; 0: no match."""
        if counted is not None:
            return counted
        if self.mode == "words":
            return text.count(START_MARK)
        return count_occurrences(self.pattern, text)

    def mark(self, conn: sqlite3.Connection, docid: int) -> str:
        """A substring match's document with its occurrences marked."""
        if docid >= 0:
            found = conn.execute('SELECT "text" FROM "documents" WHERE "docid" = ?', (docid,)).fetchone()
        else:
            found = conn.execute('SELECT "text" FROM temp."live_docs" WHERE "rowid" = ?', (-docid,)).fetchone()
        return mark_occurrences(self.pattern, found[0]) if found else ""


def query_sessions(backend: Any, conn: sqlite3.Connection, request: SessionsRequest, offset: int, cache_key: tuple[str, ...]) -> list[Row]:
    """Cross-session search in ``words`` or ``substring`` mode (rows as ``sessions_page`` returns them)."""
    sessions, events = session_where(request.session_filters), event_where(request.event_filters)
    if len(sessions.fragments) + len(events.fragments) > OUTER_PREDICATE_LIMIT:
        raise budget_error()
    filters = sessions.params + events.params
    if FIXED_BINDINGS + len(filters) + 2 > BINDING_LIMIT:
        raise binding_error()
    mode = _Mode(backend, conn, request.match, request.query, request.prefix)
    if mode.empty:
        return []
    where = " AND ".join(fragment for fragment in (sessions.sql(), events.sql()) if fragment)

    def fetch(limit: int, skip: int) -> list[tuple[Any, ...]]:
        persisted, persisted_args = mode.persisted(conn, None)
        live, live_args = mode.live(None)
        sql = f"SELECT * FROM ({persisted} UNION ALL {live})" + (f" WHERE {where}" if where else "")
        ranking = _collect(conn, mode, sql, [*persisted_args, *live_args, *filters], Ranking(), scoped=bool(where))
        return [match.row() for match in ranking.sessions()[skip : skip + limit]]

    return _page(backend, conn, mode, backend._ranked(cache_key, fetch, offset, request.limit + 1))


def query_events(
    backend: Any, conn: sqlite3.Connection, request: EventsRequest, sid: int | None, offset: int, cache_key: tuple[str, ...]
) -> list[Row]:
    """Within-session search in ``words`` or ``substring`` mode (``sid`` ``None``: a live session)."""
    events = event_where(request.filters)
    if 1 + len(events.fragments) > OUTER_PREDICATE_LIMIT:
        raise budget_error()
    if FIXED_BINDINGS + len(events.params) + 1 + 2 > BINDING_LIMIT:
        raise binding_error()
    mode = _Mode(backend, conn, request.match, request.query, request.prefix)
    if mode.empty:
        return []
    where = " AND ".join(["session_id = ?", *([events.sql()] if events.fragments else [])])

    def fetch(limit: int, skip: int) -> list[tuple[Any, ...]]:
        if sid is None:
            inner, args = mode.live(request.session_id)
        else:
            inner, args = mode.persisted(conn, (sid << 32, (sid << 32) | 0xFFFFFFFF))
        sql = f"SELECT * FROM ({inner}) WHERE {where}"
        ranking = _collect(conn, mode, sql, [*args, request.session_id, *events.params], Ranking(keep_all=True), scoped=True)
        return [match.row() for match in ranking.events()[skip : skip + limit]]

    return _page(backend, conn, mode, backend._ranked(cache_key, fetch, offset, request.limit + 1))


def _collect(conn: sqlite3.Connection, mode: _Mode, sql: str, args: list[Any], ranking: Ranking, *, scoped: bool) -> Ranking:
    """Score every row of ``sql`` into ``ranking``, then settle which texts are boilerplate."""
    rows = conn.execute(sql, args)
    for session_id, header, _created, _cwd, _parent, live, persisted, docid, seq, etype, time, surface, length, text, counted in rows:
        strength = mode.strength(text, counted)
        if strength:
            digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            ranking.add(Match(session_id, header, live, persisted, docid, seq, etype, time, surface, length, strength, digest))
    if scoped:
        for digest in ranking.rare_digests():
            ranking.add_holders(digest, _holders(conn, ranking.representative(digest).docid))
    return ranking


def _holders(conn: sqlite3.Connection, docid: int) -> list[str]:
    """Up to :data:`BOILERPLATE_SESSIONS` ids of sessions (stored or live) holding the text of ``docid``."""
    if docid >= 0:
        found = conn.execute('SELECT "text" FROM "documents" WHERE "docid" = ?', (docid,)).fetchone()
    else:
        found = conn.execute('SELECT "text" FROM temp."live_docs" WHERE "rowid" = ?', (-docid,)).fetchone()
    if found is None:
        return []
    text = found[0]
    stored = conn.execute(_HOLDERS, (len(text), text[:TEXT_KEY_CHARS], text, BOILERPLATE_SESSIONS)).fetchall()
    live = conn.execute(_LIVE_HOLDERS, (len(text), text, BOILERPLATE_SESSIONS)).fetchall()
    return [row[0] for row in (*stored, *live)]


def _page(backend: Any, conn: sqlite3.Connection, mode: _Mode, rows: list[Row]) -> list[Row]:
    """Headers and marked texts of one page's rows."""
    if mode.mode == "words":
        return backend._highlight(conn, rows, mode.expression)
    marker: Callable[[Row], str] = lambda row: mode.mark(conn, row.docid)
    return backend._highlight(conn, rows, "", marker)
