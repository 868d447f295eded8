"""The ranking of the ``words`` and ``substring`` modes computed by SQLite (the fast path).

Same order as :class:`readmodel.search.modes.Ranking` (the slow path, also the
tests' oracle): specific before boilerplate, then strength (more first), then
shorter, then newer time, then higher seq; cross-session, each session's first
document in that order, sessions ordered by it, ties by session id (SQLite's
``BINARY`` collation compares UTF-8 bytes, as the slow path compares ids).

What makes it fast and memory-bounded:

* **The boilerplate verdict from the index.**  ``document_hashes`` (migration
  0013) holds each stored document's text hash
  (:func:`readmodel.projection.texthash.text_hash`) indexed by hash, so
  whether at least :data:`~readmodel.search.modes.BOILERPLATE_SESSIONS`
  stored sessions with status ok hold a text is one index range read per
  *distinct* matching text, stopped at that many sessions; no text is read
  or compared.  Equal hashes stand for equal texts (a collision, about 2⁻⁶⁴ per
  pair, could only reorder a hit).
* **Ranking in SQL.**  Matches are materialised by SQLite (its temporary
  storage, which spills to disk) and sorted in ranking order with a
  ``LIMIT`` (the sorter keeps only that many rows); a session's first row is
  its best document, and Python reads rows only until the page's sessions
  are seen.
* **Substring strength once per distinct text.**  A candidate's occurrences
  depend on its text alone, so the SQL function
  ``sessionq_occurrences(query, text)``
  (:meth:`readmodel.search.substring.Substring.count`) counts them in one
  document per distinct hash, inside the statement: the boilerplate copies
  that make up most candidates of a common substring are never read.
  (Counting ASCII texts with ``lower()``/``replace()`` in SQL was tried: no
  faster than this count.)

It applies when the index has ``document_hashes`` and no live session is
overlaid (live documents are not in it: the slow path ranks those), and for
``words`` only with the C accelerator (spans from the position lists).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from readmodel.search.modes import BOILERPLATE_SESSIONS
from readmodel.search.substring import compiled_substring

_NO_TIME: Final = -(2**63)

# The rows the caller's selection selects (materialised first, so that SQLite plans it as it
# plans the slow path's statement, not around the joins after it), each with its text hash;
# those with strength > 0 are the matches.  Strength is filtered on in the later steps, not
# here: in a WHERE it would be computed for every candidate before the scope's filters (SQLite
# tests a term at the first loop it can), and a substring's strength reads the text.
_MATCHES: Final = """
  "q" AS MATERIALIZED ({selection}),
  "m" AS MATERIALIZED (
    SELECT q."session_id", q."header_json", q."live", q."persisted", q."docid", q."seq", q."type", q."time", q."surface",
           q."document_length" AS "length", q."strength" AS "strength", h."hash" AS "hash",
           CASE WHEN typeof(q."time") IN ('integer', 'real') THEN q."time" ELSE {no_time} END AS "t"
    FROM "q" JOIN "document_hashes" h ON h."docid" = q."docid"),
  "v" AS MATERIALIZED (
    SELECT u."hash", (
      SELECT count(*) FROM (
        SELECT DISTINCT o."docid" >> 32 FROM "document_hashes" o JOIN "sessions" s ON s."sid" = o."docid" >> 32
        WHERE o."hash" = u."hash" AND s."status" = 'ok' LIMIT {holders})) >= {holders} AS "shared"
    FROM ({matching}) u)"""
# A substring match's strength depends on its text alone: it is counted once per distinct
# text (hash), in one document holding it (``c``), instead of in every candidate — boilerplate
# copies are most of the candidates of a common substring.
_PER_TEXT: Final = """
  "c" AS MATERIALIZED (
    SELECT g."hash", sessionq_occurrences(?, d."text") AS "strength"
    FROM (SELECT "hash", min("docid") AS "docid" FROM "m" GROUP BY "hash") g JOIN "documents" d ON d."docid" = g."docid"),"""
_WITH_TEXT_STRENGTH: Final = """(
    SELECT m."session_id", m."header_json", m."live", m."persisted", m."docid", m."seq", m."type", m."time", m."surface",
           m."length", m."hash", m."t", (SELECT c."strength" FROM "c" WHERE c."hash" = m."hash") AS "strength" FROM "m")"""
_KEY: Final = '"shared", "strength" DESC, "length", "t" DESC, "seq" DESC'
_ROW: Final = '"session_id", "header_json", "live", "persisted", "docid", "seq", "type", "time", "surface"'
# Each match with its verdict.  Scalar subqueries, not joins: SQLite then builds an automatic
# index on v and c (a join of two materialised tables was planned as a nested scan of both).
_JUDGED: Final = '(SELECT m.*, (SELECT v."shared" FROM "v" WHERE v."hash" = m."hash") AS "shared" FROM {source} m WHERE m."strength" > 0)'

# Every match in ranking order, ties by session id: a session's first row is its best document,
# and sessions come in the order of their first rows (ranked_sessions reads until it has enough).
# One sort; a window function choosing each session's best before a second sort measured slower.
_SESSIONS: Final = """
WITH {matches}
SELECT {row} FROM {judged} j
ORDER BY {key}, "session_id" LIMIT ?"""

_ROWS_PER_SESSION: Final = 64
"""Rows sorted per wanted session at first (ranked_sessions).

Over the bench's 31 queries in both modes, 4 needed a second sort for 18 of 62 searches on the
40 MB replicated root (27 copies of each session, whose top rows crowd together), 16 for 8, 64
for none; a larger limit costs little (SQLite's sorter keeps the limit's rows, not every match)."""

_EVENTS: Final = """
WITH {matches}
SELECT {row} FROM {judged} j
ORDER BY {key} LIMIT ? OFFSET ?"""


def _statement(template: str, selection: str, per_text: bool) -> str:
    if per_text:
        matches = _MATCHES.replace('  "v" AS', _PER_TEXT + '\n  "v" AS').format(
            selection=selection, no_time=_NO_TIME, holders=BOILERPLATE_SESSIONS, matching='SELECT "hash" FROM "c" WHERE "strength" > 0'
        )
        judged = _JUDGED.format(source=_WITH_TEXT_STRENGTH)
    else:
        matching = 'SELECT DISTINCT "hash" FROM "m" WHERE "strength" > 0'
        matches = _MATCHES.format(selection=selection, no_time=_NO_TIME, holders=BOILERPLATE_SESSIONS, matching=matching)
        judged = _JUDGED.format(source='"m"')
    return template.format(matches=matches, judged=judged, key=_KEY, row=_ROW)


def applies(backend: Any, mode: str) -> bool:
    """Whether the fast path ranks this search (see the module docstring)."""
    return bool(backend._sql_ranking and backend._hashes and not backend._live_state.fingerprints and (mode == "substring" or backend._accelerated))


def occurrences(query: str, text: str) -> int:
    """``sessionq_occurrences(query, text)``: the non-overlapping occurrences of a normalised substring query."""
    return compiled_substring(query).count(text)


def install(conn: sqlite3.Connection) -> bool:
    """Register ``sessionq_occurrences``; whether the index has ``document_hashes``."""
    conn.create_function("sessionq_occurrences", 2, occurrences, deterministic=True)
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'document_hashes'").fetchone() is not None


def ranked_sessions(conn: sqlite3.Connection, selection: str, args: list[Any], limit: int, skip: int, substring: str | None = None) -> list[tuple[Any, ...]]:
    """Rows ``skip .. skip + limit`` of the cross-session ranking of the matches ``selection`` selects.

    ``selection`` (with ``args``) selects the candidates as :mod:`readmodel.search.sqlitemodes`
    does; with ``substring`` (the normalised query) their strength is NULL and counted here.

    The first rows in ranking order hold the leading sessions' best documents, so SQLite
    sorts with a ``LIMIT`` (it keeps only that many rows, instead of sorting every match):
    :data:`_ROWS_PER_SESSION` per wanted session, and when those rows hold fewer sessions and
    more rows remain, eight times as many, then all.  Python holds at most that many rows.
    """
    sql = _statement(_SESSIONS, selection, substring is not None)
    params = [*args, *([substring] if substring is not None else [])]
    want = skip + limit
    rows_limit = _ROWS_PER_SESSION * want
    while True:
        leaders: dict[str, tuple[Any, ...]] = {}
        rows = 0
        for row in conn.execute(sql, [*params, rows_limit]):
            rows += 1
            if row[0] not in leaders:
                leaders[row[0]] = row
                if len(leaders) >= want:
                    break
        if len(leaders) >= want or rows < rows_limit or rows_limit < 0:
            return list(leaders.values())[skip:want]
        rows_limit = rows_limit * 8 if rows_limit < _ROWS_PER_SESSION * want * 64 else -1  # -1: no limit


def ranked_events(conn: sqlite3.Connection, selection: str, args: list[Any], limit: int, skip: int, substring: str | None = None) -> list[tuple[Any, ...]]:
    """Rows ``skip .. skip + limit`` of the one-session ranking of the matches ``selection`` selects (as :func:`ranked_sessions`)."""
    sql = _statement(_EVENTS, selection, substring is not None)
    return conn.execute(sql, [*args, *([substring] if substring is not None else []), limit, skip]).fetchall()
