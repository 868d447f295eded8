"""The ``words`` and ``substring`` modes over the SQLite index (semantics: :mod:`readmodel.search.modes`).

Both modes select the matching documents in SQL — ``words`` through
``texts_fts`` (per distinct text, then its documents) with an expression of quoted tokens, ``substring`` through
the candidate seam (:func:`readmodel.search.substring.index_candidates`, else
every document in scope) — with the metadata filters and the live overlay's
shadowing applied in the same statement, then rank them in Python
(:class:`readmodel.search.modes.Ranking`), whose keys need each document's
strength and whether its text is boilerplate.

Boilerplate needs the number of distinct sessions holding a text.  Matching
depends on the text alone, so an unscoped search already sees every copy of
every matching text; a scoped search (filters, or one session) looks the few
texts seen in fewer than :data:`BOILERPLATE_SESSIONS` sessions up in the whole
corpus by their text id (``texts``, schema 0018: one id per distinct text; a
live text, not stored, by its hash), reading at most that many sessions per
text.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any, Final

from readmodel.projection.texthash import text_hash
from readmodel.search.backend import Row
from readmodel.search.modes import BOILERPLATE_SESSIONS, Match, Ranking, words_expression
from readmodel.search import sqlranking
from readmodel.search.predicates import Where
from readmodel.search.requests import EventsRequest, SessionsRequest, bounded_terms
from readmodel.search.snippets import END_MARK, START_MARK, prefix_decides_snippet, snippet_source_decides
from readmodel.search.substring import compiled_substring, index_candidates, prepared_texts

_SNIPPET_PREFIX_CHARS: Final = 2048  # as readmodel.search.sqlite's first snippet window

_PERSISTED: Final = """
  SELECT s."id" AS session_id, s."sid" AS header_json, s."created_at" AS created_at, s."cwd" AS cwd,
         s."parent_session" AS parent_session, 0 AS live, 1 AS persisted, d."docid" AS docid, d."seq" AS seq,
         d."type" AS type, d."time" AS time,
         CASE d."surface" WHEN 1 THEN 'current' WHEN 2 THEN 'shadowed' ELSE 'log-only' END AS surface,
         d."length" AS document_length, {text} AS text, {strength} AS strength
  FROM {source} JOIN "sessions" s ON s."sid" = d."sid"{range}
  WHERE s."status" = 'ok' AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id"){conditions}"""
_LIVE: Final = """
  SELECT l."id" AS session_id, NULL AS header_json, l."created_at" AS created_at, l."cwd" AS cwd,
         l."parent_session" AS parent_session, 1 AS live, l."persisted" AS persisted, -ld."rowid" AS docid, ld."seq" AS seq,
         ld."type" AS type, ld."time" AS time, ld."surface" AS surface, ld."length" AS document_length, {text} AS text, {strength} AS strength
  FROM temp."live_docs" ld JOIN temp."live_sessions" l ON l."id" = ld."session_id"
  WHERE 1{conditions}"""
# The docid range of each session: with session filters SQLite reads the eligible
# sessions first, and documents has no index on sid.
_SESSION_RANGE: Final = ' AND d."docid" BETWEEN s."sid" << 32 AND (s."sid" << 32) | 4294967295'
# The sessions a search may return, with the columns session filters name (as in _PERSISTED).
ELIGIBLE: Final = """
  SELECT s."sid" AS sid, s."id" AS session_id, s."created_at" AS created_at, s."cwd" AS cwd, s."parent_session" AS parent_session,
         0 AS live, 1 AS persisted
  FROM "sessions" s WHERE s."status" = 'ok' AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id")"""
# A document's columns event filters name (as in _PERSISTED), and its text.
_EVENT_COLUMNS: Final = """
  SELECT d."docid" AS docid, d."text_id" AS text_id, d."seq" AS seq, d."type" AS type, d."time" AS time,
         CASE d."surface" WHEN 1 THEN 'current' WHEN 2 THEN 'shadowed' ELSE 'log-only' END AS surface
  FROM "document_rows" d"""
# For each wanted docid, up to N ids of stored sessions holding its text (the documents under its
# text id), joined by U+001F; one statement for every text a scoped search looks up.  A stored
# session a live one overlays is not in the search corpus: the live session counts instead.
_HOLDERS: Final = """
  SELECT w."value", (
    SELECT group_concat("id", char(31)) FROM (
      SELECT DISTINCT s."id" AS "id" FROM "document_rows" o JOIN "sessions" s ON s."sid" = o."docid" >> 32
      WHERE o."text_id" = h."text_id" AND s."status" = 'ok' AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id")
      LIMIT ?))
  FROM json_each(?) w JOIN "document_rows" h ON h."docid" = w."value"
"""
# A live text's stored holders: through its hash (equal hashes stand for equal texts here).
_STORED_HOLDERS: Final = """
  SELECT DISTINCT s."id" FROM "texts" t JOIN "document_rows" o ON o."text_id" = t."id" JOIN "sessions" s ON s."sid" = o."docid" >> 32
  WHERE t."hash" = ? AND s."status" = 'ok' AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id") LIMIT ?"""
_LENGTH_HOLDERS: Final = (
    'SELECT count(*) FROM (SELECT DISTINCT o."docid" >> 32 FROM "texts" t JOIN "document_rows" o ON o."text_id" = t."id" '
    'WHERE t."length" = ? LIMIT ?)'
)
_STORED_TEXT: Final = 'SELECT r."text_id", t."text_z" FROM "document_rows" r JOIN "texts" t ON t."id" = r."text_id" WHERE r."docid" = ?'
_LIVE_HOLDERS: Final = 'SELECT DISTINCT "session_id" FROM temp."live_docs" WHERE "length" = ? AND "text" = ? LIMIT ?'
_LIVE_LENGTH_HOLDERS: Final = 'SELECT count(DISTINCT "session_id") FROM temp."live_docs" WHERE "length" = ?'


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
            self.substring = compiled_substring(query)
            self.marked: dict[int, str] = {}  # marked stored texts by text id (mark)

    @property
    def substring_query(self) -> str | None:
        """The normalised query of a substring search (``None`` in words mode)."""
        return self.query if self.mode == "substring" else None

    @property
    def empty(self) -> bool:
        return self.mode == "words" and not self.expression

    def persisted(self, conn: sqlite3.Connection, doc_range: tuple[int, int] | None) -> tuple[str, list[Any]]:
        """The stored matches' rows (the slow path's)."""
        range_sql = ' AND d."docid" BETWEEN ? AND ?' if doc_range is not None else ""
        range_args = list(doc_range) if doc_range is not None else []
        if self.mode == "words":
            # Each matching text is scored once (texts_fts is per text), then joined to its documents.
            text, strength, marks = self._words_columns("texts_fts")
            texts = f'SELECT "rowid" AS "text_id", {text} AS "text", {strength} AS "strength" FROM "texts_fts" WHERE "texts_fts" MATCH ?'
            sql = _PERSISTED.format(
                text='m."text"',
                strength='m."strength"',
                source='"m" JOIN "document_rows" r ON r."text_id" = m."text_id" JOIN "documents" d ON d."docid" = r."docid"',
                range="",
                conditions=range_sql,
            )
            return f'SELECT * FROM (WITH "m" AS MATERIALIZED ({texts}) {sql})', [*marks, self.expression, *range_args]
        conditions, args = range_sql, range_args
        candidates = index_candidates(conn, self.query, doc_range)
        if candidates is not None:
            conditions += f' AND d."docid" IN (SELECT "docid" FROM "document_rows" WHERE "text_id" IN ({candidates[0]}))'
            args = [*args, *candidates[1]]
        return _PERSISTED.format(text='d."text"', strength="NULL", source='"documents" d', range=_SESSION_RANGE, conditions=conditions), args

    def matching(self, backend: Any, conn: sqlite3.Connection, doc_range: tuple[int, int] | None, sessions: Where, events: Where) -> tuple[str, list[Any]]:
        """``(text_id, strength)`` of the stored matches in scope, for the fast path
        (:class:`readmodel.search.sqlranking.Matches`): a words match's spans (a row per
        matching document), a substring candidate text's strength NULL (counted per text; a
        row per candidate text that a document in scope holds).

        Only what the scope needs is joined: the eligible sessions (status ok, not live,
        the session filters) as a set of sids when any session could be ineligible, the
        documents' columns only for event filters.
        """
        if self.mode == "words":
            # A row per matching text (texts_fts is per text) that some document in scope holds.
            scope, scope_args = in_scope(backend, conn, '"texts_fts"."rowid"', doc_range, sessions, events)
            sql = 'SELECT "rowid" AS "text_id", sessionq_spans("texts_fts") AS "strength" FROM "texts_fts" WHERE "texts_fts" MATCH ?' + scope
            return sql, [self.expression, *scope_args]
        eligible, eligible_args = "", []
        if sessions.fragments or _ineligible(backend, conn):
            eligible, eligible_args = f' AND "docid" >> 32 IN (SELECT "sid" FROM ({ELIGIBLE}) WHERE {sessions.sql() or "1"})', sessions.params
        # Substring: the candidate texts (the gram index's, else every text) that a document in
        # scope holds — an index seek per text on document_rows_text (docid bounds included).
        candidates = index_candidates(conn, self.query, doc_range)
        source, args = candidates if candidates is not None else ('SELECT "id" FROM "texts"', [])
        scope = ' AND e."docid" BETWEEN ? AND ?' if doc_range is not None else ""
        scope += eligible.replace(' AND "docid"', ' AND e."docid"')
        scope += f" AND ({events.sql()})" if events.fragments else ""
        # The seam's SELECT has one column, whatever its name: a CTE names it.
        sql = (
            f'WITH "c"("id") AS ({source}) SELECT c."id" AS "text_id", NULL AS "strength" FROM "c" '
            f'WHERE EXISTS (SELECT 1 FROM ({_EVENT_COLUMNS}) e WHERE e."text_id" = c."id"{scope})'
        )
        return sql, [*args, *(doc_range or ()), *eligible_args, *events.params]

    def holding(self, doc_range: tuple[int, int] | None) -> tuple[str, list[Any]]:
        """The stored rows holding one of the texts whose ids a JSON array bound first lists (then
        ``doc_range``'s bounds), as :meth:`persisted`'s columns, not matched again: a text's
        documents all match or none does (:class:`readmodel.search.sqlranking.Matches`)."""
        range_sql = ' AND d."docid" BETWEEN ? AND ?' if doc_range is not None else ""
        conditions = ' AND d."docid" IN (SELECT "docid" FROM "document_rows" WHERE "text_id" IN (SELECT "value" FROM json_each(?)))'
        sql = _PERSISTED.format(text="NULL", strength="NULL", source='"documents" d', range=_SESSION_RANGE, conditions=conditions + range_sql)
        return sql, list(doc_range) if doc_range is not None else []

    def _words_columns(self, table: str) -> tuple[str, str, list[str]]:
        """``(text, strength, params)`` columns of a words match in ``table``."""
        if self.accelerated:
            # A stored text is read later, and only when boilerplate is possible
            # (_settle): reading every match's text costs ~40x the match itself.
            column = "NULL" if table == "texts_fts" else 'ld."text"'
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
        return self.substring.count(text)

    def mark(self, conn: sqlite3.Connection, docid: int) -> str:
        """A substring match's document with its first occurrence (the snippet's) marked.

        A stored text is marked once per query however many of the page's rows hold it,
        from its prepared form (:data:`readmodel.search.substring.prepared_texts`)."""
        if docid >= 0:
            found = conn.execute(_STORED_TEXT, (docid,)).fetchone()
            if found is None:
                return ""
            if found[0] not in self.marked:
                self.marked[found[0]] = self.substring.mark_prepared(prepared_texts.get(conn, found[0], found[1]))
            return self.marked[found[0]]
        else:
            found = conn.execute('SELECT "text" FROM temp."live_docs" WHERE "rowid" = ?', (-docid,)).fetchone()
        return self.substring.mark_first(found[0]) if found else ""


def query_sessions(
    backend: Any, conn: sqlite3.Connection, request: SessionsRequest, sessions: Where, events: Where, offset: int, cache_key: tuple[str, ...]
) -> list[Row]:
    """Cross-session search in ``words`` or ``substring`` mode (rows as ``sessions_page`` returns them);
    ``sessions`` and ``events`` are the request's filters as predicates, their budgets checked."""
    filters = sessions.params + events.params
    mode = _Mode(backend, conn, request.match, request.query, request.prefix)
    if mode.empty:
        return []
    where = " AND ".join(fragment for fragment in (sessions.sql(), events.sql()) if fragment)

    def fetch(limit: int, skip: int) -> list[tuple[Any, ...]]:
        if sqlranking.applies(backend, mode.mode):
            return sqlranking.ranked_sessions(conn, _matches(backend, conn, mode, None, sessions, events), limit, skip)
        persisted, persisted_args = mode.persisted(conn, None)
        live, live_args = mode.live(None)
        sql = f"SELECT * FROM ({persisted} UNION ALL {live})" + (f" WHERE {where}" if where else "")
        ranking = _collect(backend, conn, mode, sql, [*persisted_args, *live_args, *filters], Ranking(), scoped=bool(where))
        return [match.row() for match in ranking.sessions()[skip : skip + limit]]

    return _page(backend, conn, mode, backend._ranked(cache_key, fetch, offset, request.limit + 1))


def query_events(
    backend: Any, conn: sqlite3.Connection, request: EventsRequest, events: Where, sid: int | None, offset: int, cache_key: tuple[str, ...]
) -> list[Row]:
    """Within-session search in ``words`` or ``substring`` mode (``sid`` ``None``: a live session;
    ``events``: the filters as predicates, their budgets checked)."""
    mode = _Mode(backend, conn, request.match, request.query, request.prefix)
    if mode.empty:
        return []
    where = " AND ".join(["session_id = ?", *([events.sql()] if events.fragments else [])])

    def fetch(limit: int, skip: int) -> list[tuple[Any, ...]]:
        if sid is not None and sqlranking.applies(backend, mode.mode):
            scope = Where()
            scope.add("session_id = ?", [request.session_id])
            matches = _matches(backend, conn, mode, (sid << 32, (sid << 32) | 0xFFFFFFFF), scope, events)
            return sqlranking.ranked_events(conn, matches, limit, skip)
        if sid is None:
            inner, args = mode.live(request.session_id)
        else:
            inner, args = mode.persisted(conn, (sid << 32, (sid << 32) | 0xFFFFFFFF))
        sql = f"SELECT * FROM ({inner}) WHERE {where}"
        ranking = _collect(backend, conn, mode, sql, [*args, request.session_id, *events.params], Ranking(keep_all=True), scoped=True)
        return [match.row() for match in ranking.events()[skip : skip + limit]]

    return _page(backend, conn, mode, backend._ranked(cache_key, fetch, offset, request.limit + 1))


def _matches(backend: Any, conn: sqlite3.Connection, mode: _Mode, doc_range: tuple[int, int] | None, sessions: Where, events: Where) -> sqlranking.Matches:
    """The fast path's view of one search's matches in scope (``sessions`` and ``events``: its filters)."""
    matching, matching_args = mode.matching(backend, conn, doc_range, sessions, events)
    holding, holding_args = mode.holding(doc_range)
    where = " AND ".join(fragment for fragment in (sessions.sql(), events.sql()) if fragment)
    return sqlranking.Matches(
        selection=matching,
        args=matching_args,
        holding=f"SELECT * FROM ({holding})" + (f" WHERE {where}" if where else ""),
        holding_args=[*holding_args, *sessions.params, *events.params],
        substring=mode.substring_query,
    )


def in_scope(
    backend: Any, conn: sqlite3.Connection, text_column: str, doc_range: tuple[int, int] | None, sessions: Where, events: Where
) -> tuple[str, list[Any]]:
    """``" AND EXISTS (...)"`` (and its parameters): some stored document in scope holds the text
    ``text_column`` names — in ``doc_range``, of an eligible session (status ok, not live, the
    session filters ``sessions``), passing the event filters ``events``.  ``("", [])`` when every
    stored text is in scope.  An index seek per text on ``document_rows_text``."""
    conditions, args = "", []
    if doc_range is not None:
        conditions, args = ' AND e."docid" BETWEEN ? AND ?', list(doc_range)
    if sessions.fragments or _ineligible(backend, conn):
        conditions += f' AND e."docid" >> 32 IN (SELECT "sid" FROM ({ELIGIBLE}) WHERE {sessions.sql() or "1"})'
        args += sessions.params
    if events.fragments:
        conditions += f" AND ({events.sql()})"
        args += events.params
    if not conditions:
        return "", []
    return f' AND EXISTS (SELECT 1 FROM ({_EVENT_COLUMNS}) e WHERE e."text_id" = {text_column}{conditions})', args


def _ineligible(backend: Any, conn: sqlite3.Connection) -> bool:
    """Whether any stored session is not searchable (status not ok, or overlaid by a live one);
    cached per generation (it reads every session's status)."""
    generation = backend._global_generation(conn)
    if backend._ineligible[0] != generation:
        sql = """SELECT EXISTS (SELECT 1 FROM "sessions" WHERE "status" <> 'ok') OR EXISTS (SELECT 1 FROM temp."live_sessions")"""
        backend._ineligible = (generation, bool(conn.execute(sql).fetchone()[0]))
    return backend._ineligible[1]


def _collect(backend: Any, conn: sqlite3.Connection, mode: _Mode, sql: str, args: list[Any], ranking: Ranking, *, scoped: bool) -> Ranking:
    """Score every row of ``sql`` into ``ranking``, then settle which texts are boilerplate."""
    matches: list[Match] = []
    rows = conn.execute(sql, args)
    for session_id, header, _created, _cwd, _parent, live, persisted, docid, seq, etype, time, surface, length, text, counted in rows:
        strength = mode.strength(text, counted)
        if strength:
            matches.append(Match(session_id, header, live, persisted, docid, seq, etype, time, surface, length, strength, None if text is None else _digest(text)))
    _settle(backend, conn, matches, scoped)
    for match in matches:
        ranking.add(match)
    if scoped:
        _add_holders(backend, conn, ranking)
    return ranking


def _digest(text: str) -> bytes:
    """Identifies a text among the matches: its length and Python's 64-bit string hash.

    Equal texts always agree; two different texts collide with probability
    about 2**-64 (and must have the same length), which could only reorder, never
    drop, a hit.  Hashing a whole document costs far less than blake2b over its
    UTF-8 encoding."""
    return len(text).to_bytes(8, "little") + hash(text).to_bytes(8, "little", signed=True)


def _settle(backend: Any, conn: sqlite3.Connection, matches: list[Match], scoped: bool) -> None:
    """Give every match whose text was not read a digest.

    A text held by at least :data:`BOILERPLATE_SESSIONS` sessions has copies
    of its length in that many sessions.  So a match whose length is held by
    fewer sessions is specific without reading its text, and gets a digest of
    its own (its docid).  The others' texts are read and digested.  Unscoped,
    every copy of a matching text is among the matches, so the matches' own
    lengths decide; scoped, the whole index's (cached per generation).
    """
    unread = [match for match in matches if match.digest is None]
    if not unread:
        return
    if scoped:
        suspect = _suspect_lengths(backend, conn, {match.length for match in unread})
    else:
        holders: dict[int, set[str]] = {}
        for match in matches:
            holders.setdefault(match.length, set()).add(match.session_id)
        suspect = {length for length, sessions in holders.items() if len(sessions) >= BOILERPLATE_SESSIONS}
    wanted = [match for match in unread if match.length in suspect]
    texts: dict[int, str] = {}
    for start in range(0, len(wanted), 500):
        docids = [match.docid for match in wanted[start : start + 500]]
        sql = f'SELECT "docid", "text" FROM "documents" WHERE "docid" IN ({", ".join("?" * len(docids))})'
        texts.update(conn.execute(sql, docids).fetchall())
    for match in unread:
        text = texts.get(match.docid) if match.length in suspect else None
        match.digest = _digest(text) if text is not None else b"doc:" + str(match.docid).encode()


def _suspect_lengths(backend: Any, conn: sqlite3.Connection, lengths: set[int]) -> set[int]:
    """Those of ``lengths`` that documents of at least :data:`BOILERPLATE_SESSIONS` sessions have,
    stored sessions and live ones counted together (a live session's text counts toward the
    verdict as a stored one's: a length held by fewer sessions of both cannot be boilerplate,
    whatever the split).  A superset of the lengths of boilerplate texts: it only spares reads."""
    generation = backend._global_generation(conn)  # the live overlay's epoch included
    cached_generation, verdicts = backend._length_verdicts
    if cached_generation != generation:
        verdicts = {}
        backend._length_verdicts = (generation, verdicts)
    overlaid = bool(backend._live_state.fingerprints)
    for length in lengths - verdicts.keys():
        count = conn.execute(_LENGTH_HOLDERS, (length, BOILERPLATE_SESSIONS)).fetchone()[0]
        if overlaid and count < BOILERPLATE_SESSIONS:
            count += conn.execute(_LIVE_LENGTH_HOLDERS, (length,)).fetchone()[0]
        verdicts[length] = count >= BOILERPLATE_SESSIONS
    return {length for length in lengths if verdicts[length]}


def _add_holders(backend: Any, conn: sqlite3.Connection, ranking: Ranking) -> None:
    """A scoped search: add the sessions outside its scope that hold the texts it saw in fewer
    than :data:`BOILERPLATE_SESSIONS` sessions.

    A stored text whose length fewer sessions hold (:func:`_suspect_lengths`) needs no
    lookup; the others are looked up in one statement.  With a live overlay, every such
    text is also looked up among the live documents, and a live match's text among the
    stored ones; stored sessions the overlay shadows are not counted (the search corpus
    is the live sessions and the stored ones they do not overlay, as unscoped).
    """
    rare = ranking.rare()
    suspect = _suspect_lengths(backend, conn, {match.length for match in rare.values()})
    stored = {match.docid: digest for digest, match in rare.items() if match.docid >= 0 and match.length in suspect}
    if stored:
        for docid, ids in conn.execute(_HOLDERS, (BOILERPLATE_SESSIONS, json.dumps(list(stored)))):
            ranking.add_holders(stored[docid], ids.split("\x1f") if ids else [])
    if not backend._live_state.fingerprints:
        return
    for digest, match in rare.items():
        if match.docid >= 0:
            text = conn.execute('SELECT "text" FROM "documents" WHERE "docid" = ?', (match.docid,)).fetchone()[0]
        else:
            text = conn.execute('SELECT "text" FROM temp."live_docs" WHERE "rowid" = ?', (-match.docid,)).fetchone()[0]
            if match.length in suspect:
                found = conn.execute(_STORED_HOLDERS, (text_hash(text), BOILERPLATE_SESSIONS)).fetchall()
                ranking.add_holders(digest, [row[0] for row in found])
        found = conn.execute(_LIVE_HOLDERS, (len(text), text, BOILERPLATE_SESSIONS)).fetchall()
        ranking.add_holders(digest, [row[0] for row in found])


def _page(backend: Any, conn: sqlite3.Connection, mode: _Mode, rows: list[Row]) -> list[Row]:
    """Headers and marked texts of one page's rows."""
    if mode.mode == "substring":
        marker: Callable[[Row], str] = lambda row: mode.mark(conn, row.docid)
        return backend._highlight(conn, rows, "", marker)
    if not (backend._accelerated and mode.expression.endswith("*")):
        return backend._highlight(conn, rows, mode.expression)
    stored = [row.docid for row in rows if row.docid >= 0]
    marked = {docid: text for docid in stored if (text := _marked_alone(backend, conn, docid, mode.expression)) is not None}
    marked.update(_marked_prefix_matches(backend, conn, [docid for docid in stored if docid not in marked], mode.expression))
    return backend._highlight(conn, rows, mode.expression, lambda row: marked.get(row.docid, "") if row.docid >= 0 else _live_marked(conn, row, mode))


def _marked_alone(backend: Any, conn: sqlite3.Connection, docid: int, expression: str) -> str | None:
    """The snippet source of one stored match of a words expression with a prefix term, from
    the first window of its text alone, or ``None`` when that window does not decide it.

    The window is highlighted in the scratch table
    (:meth:`readmodel.search.sqlite.SqliteSearchBackend.scratch_highlight`), at a cost bounded
    by the window, where a MATCH on ``texts_fts`` builds the prefix's whole doclist (tens of
    milliseconds for a one- or two-letter prefix).  A window holding the whole text gives its
    whole highlight.  The rows it leaves (a first match deep in a long text) are rare for a
    common prefix, and a rare prefix's doclist is cheap to walk (:func:`_marked_prefix_matches`).
    """
    width = backend.config.snippet_chars
    size = _SNIPPET_PREFIX_CHARS + 4 * width
    found = conn.execute('SELECT substr("text", 1, ?), "length" FROM "documents" WHERE "docid" = ?', (size, docid)).fetchone()
    if found is None:
        return ""
    marked = backend.scratch_highlight(conn, found[0], expression)
    if found[1] <= size:
        return marked or ""
    return marked if marked is not None and prefix_decides_snippet(marked, width) else None


def _marked_prefix_matches(backend: Any, conn: sqlite3.Connection, docids: list[int], expression: str) -> dict[int, str]:
    """The snippet sources of stored matches of a words expression with a prefix term, in one pass
    (the rows :func:`_marked_alone` leaves: a first match deep in a long text).

    FTS5 builds a prefix term's doclist (every token it expands to) at each
    MATCH, so one MATCH per row, as the phrase mode runs, costs that build per
    row; here one MATCH walks the matches and the page's rows are picked out
    (``+rowid``: not an index constraint, so no per-row restart).  As in
    :meth:`readmodel.search.sqlite.SqliteSearchBackend._marked_document`, a
    window around the first match, grown once, then the whole highlight.
    """
    if not docids:
        return {}
    # A document's marks are its text's (texts_fts is per text): each text is marked once.
    holders: dict[int, list[int]] = {}
    sql = 'SELECT "docid", "text_id" FROM "document_rows" WHERE "docid" IN (SELECT value FROM json_each(?))'
    for docid, text_id in conn.execute(sql, (json.dumps(docids),)):
        holders.setdefault(text_id, []).append(docid)
    width = backend.config.snippet_chars
    first = _SNIPPET_PREFIX_CHARS + 4 * width
    wanted = json.dumps(sorted(holders))
    found: dict[int, str] = {}
    pick = ' AND +"rowid" IN (SELECT value FROM json_each(?))'
    for scale in (1, 16):
        before = 16 * (width + 3) * scale
        sql = 'SELECT "rowid", sessionq_snippet_source("texts_fts", ?, ?, ?, ?) FROM "texts_fts" WHERE "texts_fts" MATCH ?' + pick
        for text_id, source in conn.execute(sql, (START_MARK, END_MARK, before, first * scale, expression, wanted)):
            marked = None if source is None else snippet_source_decides(source, width)
            if marked is not None:
                found[text_id] = marked
        wanted = json.dumps([text_id for text_id in sorted(holders) if text_id not in found])
        if wanted == "[]":
            break
    else:
        sql = 'SELECT "rowid", highlight("texts_fts", 0, ?, ?) FROM "texts_fts" WHERE "texts_fts" MATCH ?' + pick
        found.update(conn.execute(sql, (START_MARK, END_MARK, expression, wanted)).fetchall())
    return {docid: found[text_id] for text_id, docs in holders.items() if text_id in found for docid in docs}


def _live_marked(conn: sqlite3.Connection, row: Row, mode: _Mode) -> str:
    sql = 'SELECT highlight("live_docs", 0, ?, ?) FROM temp."live_docs" WHERE "live_docs" MATCH ? AND "rowid" = ?'
    found = conn.execute(sql, (START_MARK, END_MARK, mode.expression, -row.docid)).fetchone()
    return found[0] if found else ""
