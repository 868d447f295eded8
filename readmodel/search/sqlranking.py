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
  storage, which spills to disk), each session's best is chosen by a window
  function, and only the page asked for reaches Python.
* **Substring strength without a Python row per candidate.**  The SQL
  function ``sessionq_occurrences(query, text)`` counts a candidate's
  occurrences (:meth:`readmodel.search.substring.Substring.count`) inside the
  statement.  (Counting ASCII texts with ``lower()``/``replace()`` in SQL was
  tried: no faster, since reading the candidates dominates.)

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
    FROM (SELECT DISTINCT "hash" FROM "m" WHERE "strength" > 0) u)"""
_KEY: Final = '"shared", "strength" DESC, "length", "t" DESC, "seq" DESC'
_ROW: Final = '"session_id", "header_json", "live", "persisted", "docid", "seq", "type", "time", "surface"'
# Each match with its verdict.  A scalar subquery, not a join: SQLite then builds an automatic
# index on v (a join of the two materialised tables was planned as a nested scan of both).
_JUDGED: Final = '(SELECT m.*, (SELECT v."shared" FROM "v" WHERE v."hash" = m."hash") AS "shared" FROM "m" WHERE m."strength" > 0)'

_SESSIONS: Final = f"""
WITH {_MATCHES},
  "r" AS (SELECT j.*, row_number() OVER (PARTITION BY j."session_id" ORDER BY {_KEY}) AS "place" FROM {_JUDGED} j)
SELECT {_ROW} FROM "r" WHERE "place" = 1
ORDER BY {_KEY}, "session_id" LIMIT ? OFFSET ?"""

_EVENTS: Final = f"""
WITH {_MATCHES}
SELECT {_ROW} FROM {_JUDGED} j
ORDER BY {_KEY} LIMIT ? OFFSET ?"""


def applies(backend: Any, mode: str) -> bool:
    """Whether the fast path ranks this search (see the module docstring)."""
    return bool(backend._sql_ranking and backend._hashes and not backend._live_state.fingerprints and (mode == "substring" or backend._accelerated))


def substring_strength(query: str) -> tuple[str, list[Any]]:
    """The SQL expression (over ``d."text"``) of a substring match's occurrences, and its parameters."""
    return 'sessionq_occurrences(?, d."text")', [query]


def occurrences(query: str, text: str) -> int:
    """``sessionq_occurrences(query, text)``: the non-overlapping occurrences of a normalised substring query."""
    return compiled_substring(query).count(text)


def install(conn: sqlite3.Connection) -> bool:
    """Register ``sessionq_occurrences``; whether the index has ``document_hashes``."""
    conn.create_function("sessionq_occurrences", 2, occurrences, deterministic=True)
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'document_hashes'").fetchone() is not None


def ranked_sessions(conn: sqlite3.Connection, selection: str, args: list[Any], limit: int, skip: int) -> list[tuple[Any, ...]]:
    """Rows ``skip .. skip + limit`` of the cross-session ranking of the matches ``selection`` selects."""
    sql = _SESSIONS.format(selection=selection, no_time=_NO_TIME, holders=BOILERPLATE_SESSIONS)
    return conn.execute(sql, [*args, limit, skip]).fetchall()


def ranked_events(conn: sqlite3.Connection, selection: str, args: list[Any], limit: int, skip: int) -> list[tuple[Any, ...]]:
    """Rows ``skip .. skip + limit`` of the one-session ranking of the matches ``selection`` selects."""
    sql = _EVENTS.format(selection=selection, no_time=_NO_TIME, holders=BOILERPLATE_SESSIONS)
    return conn.execute(sql, [*args, limit, skip]).fetchall()
