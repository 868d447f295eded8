"""The reference's ``phrase`` ranking over SQLite, texts first (schema 0021).

The order (the reference's, unchanged): a match's strength (its number of
``highlight()`` spans) descending, then its document's length ascending, then
time descending, then seq descending.  Cross-session, each session's first
document in that order stands for it, and sessions are ordered by
``match_count DESC, document_length ASC, time DESC, session_id ASC, seq DESC``
of it; within one session, every match by ``... time DESC, seq DESC``.

**Texts first.**  Strength and length depend on a document's text alone, and
the word index has one row per distinct text (``texts_fts``, rowid
``texts.id``: :mod:`readmodel.store.textsearch`).  So:

1. **Items**: the distinct matching texts that some document in scope holds,
   each with its strength (counted once per text, from ``texts_fts``) and
   length; and the matching live documents (the live overlay is per
   document), each with its own.
2. **Classes**: items ordered by (strength, length) and cut into classes of
   equal keys (:func:`readmodel.search.modes.text_classes`).  Every document of
   an earlier class ranks before every document of a later one.
3. **Documents of the leading classes**, a batch of whole classes per
   statement: the documents in scope holding the batch's texts (through
   ``document_rows_text``) and its live documents, filters applied, ranked by
   the same SQL as the per-document ranking always was (each session's best
   by one fixed-width key, then the order above).  A session's best document
   is in the first class holding one of its documents, so a session seen in
   an earlier batch is already placed; reading stops as soon as the page's
   sessions (or rows, within one session) are known.

tests/search/test_phrase_texts.py checks this against the per-document ranking it
replaced (a brute force over a per-document FTS5 table).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Final

from readmodel.search.modes import text_classes

RANK: Final = "match_count DESC, document_length ASC, time DESC"
# The same order (plus seq DESC, unique within a session) as one fixed-width text
# key, so each session's strongest event is a plain max() per group: SQLite takes
# the bare columns from that row, which is cheaper than a window function.
RANK_KEY: Final = "printf('%010d%012d%017d%012d', match_count, 999999999999 - document_length, time + 9007199254740991, seq)"

_STORED: Final = """
    SELECT s."id" AS session_id, s."sid" AS header_json, s."created_at" AS created_at, s."cwd" AS cwd,
           s."parent_session" AS parent_session, 0 AS live, 1 AS persisted, d."docid" AS docid, d."seq" AS seq,
           d."type" AS type, d."time" AS time,
           CASE d."surface" WHEN 1 THEN 'current' WHEN 2 THEN 'shadowed' ELSE 'log-only' END AS surface,
           b."length" AS document_length, b."n" AS match_count
    FROM (SELECT json_extract(j."value", '$[0]') AS "text_id", json_extract(j."value", '$[1]') AS "n",
                 json_extract(j."value", '$[2]') AS "length" FROM json_each(?) j) b
    JOIN "document_rows" d ON d."text_id" = b."text_id" JOIN "sessions" s ON s."sid" = d."sid"
    WHERE s."status" = 'ok' AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id"){range}"""
# Across sessions, each session's best document of the batch is picked before its session row
# is read (sessions rows are wide): the documents are grouped by session with the key RANK_KEY
# computes over the candidate columns.  Event filters must hold before grouping ({filters}: they
# name the candidate columns, given here by "e"); session filters hold for a session's every
# row, so applying them after grouping (to ``candidates``) is the same, and an eligibility test
# on the docid in {filters} only spares reading other sessions' documents.
_STORED_BEST: Final = """
    SELECT s."id" AS session_id, s."sid" AS header_json, s."created_at" AS created_at, s."cwd" AS cwd,
           s."parent_session" AS parent_session, 0 AS live, 1 AS persisted, g."docid" AS docid, g."seq" AS seq,
           g."type" AS type, g."time" AS time, g."surface" AS surface, g."document_length" AS document_length,
           g."match_count" AS match_count
    FROM (
      SELECT e."sid" AS "sid", e."docid" AS "docid", e."seq" AS "seq", e."type" AS "type", e."time" AS "time", e."surface" AS "surface",
             b."length" AS "document_length", b."n" AS "match_count",
             max(printf('%010d%012d%017d%012d', b."n", 999999999999 - b."length", e."time" + 9007199254740991, e."seq"))
      FROM (SELECT json_extract(j."value", '$[0]') AS "text_id", json_extract(j."value", '$[1]') AS "n",
                   json_extract(j."value", '$[2]') AS "length" FROM json_each(?) j) b
      JOIN (SELECT d."docid" AS docid, d."sid" AS sid, d."text_id" AS text_id, d."seq" AS seq, d."type" AS type, d."time" AS time,
                   CASE d."surface" WHEN 1 THEN 'current' WHEN 2 THEN 'shadowed' ELSE 'log-only' END AS surface
            FROM "document_rows" d) e ON e."text_id" = b."text_id"
      WHERE 1{filters}
      GROUP BY e."sid") g
    JOIN "sessions" s ON s."sid" = g."sid"
    WHERE s."status" = 'ok' AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id")"""
_LIVE: Final = """
    SELECT l."id" AS session_id, NULL AS header_json, l."created_at" AS created_at, l."cwd" AS cwd,
           l."parent_session" AS parent_session, 1 AS live, l."persisted" AS persisted, -ld."rowid" AS docid, ld."seq" AS seq,
           ld."type" AS type, ld."time" AS time, ld."surface" AS surface, ld."length" AS document_length,
           json_extract(j."value", '$[1]') AS match_count
    FROM json_each(?) j JOIN temp."live_docs" ld ON ld."rowid" = json_extract(j."value", '$[0]')
    JOIN temp."live_sessions" l ON l."id" = ld."session_id\""""
_BEST: Final = f"""
  , filtered AS (SELECT * FROM candidates{{where}}),
  best AS (SELECT session_id, header_json, live, persisted, docid, seq, type, time, surface, match_count, document_length,
                  max({RANK_KEY}) FROM filtered GROUP BY session_id)
  SELECT session_id, header_json, live, persisted, docid, seq, type, time, surface FROM best
  ORDER BY {RANK}, session_id ASC, seq DESC"""
_EVENTS: Final = f"""
  SELECT session_id, header_json, live, persisted, docid, seq, type, time, surface FROM candidates WHERE session_id = ?{{where}}
  ORDER BY {RANK}, seq DESC LIMIT ?"""

FIRST_BATCH: Final = 1
"""Items (texts and live documents) the first statement of step 3 reads (then whole classes), each
next one twice as many: the strongest classes often hold texts repeated in thousands of sessions."""


@dataclass(slots=True)
class Item:
    """A step-1 item: a stored text (``text_id``) or a live document (``live_rowid``)."""

    strength: int
    length: int
    text_id: int | None = None
    live_rowid: int | None = None
    shared: bool | None = None  # unused (no boilerplate key in this mode): text_classes' protocol


@dataclass
class PhraseMatches:
    """One phrase search's matches as SQL, built by :mod:`readmodel.search.sqlite`.

    ``texts`` (with ``texts_args``) selects ``(text_id, n, length)`` of the stored texts in
    scope that match, ``n`` their strength (``None``: no stored side); ``live`` (with
    ``live_args``) selects ``(rowid, n, length)`` of the matching live documents in scope
    (``None``: none).  ``doc_range`` bounds the stored documents (one session's docids);
    ``where`` (with ``where_args``) is the filters over the candidate columns.  ``grouped``
    (with ``grouped_args``), when set, lets a cross-session ranking group stored documents by
    session before reading sessions (:data:`_STORED_BEST`): conditions on the documents ``e``
    holding at least every event filter; ``None``: not grouped first (the filters are too many
    to bind again).
    """

    texts: str | None
    texts_args: list[Any]
    live: str | None
    live_args: list[Any]
    doc_range: tuple[int, int] | None = None
    where: str = ""
    where_args: list[Any] = field(default_factory=list)
    grouped: str | None = None
    grouped_args: list[Any] = field(default_factory=list)


def _items(conn: sqlite3.Connection, matches: PhraseMatches) -> list[Item]:
    """Step 1: every item, strongest then shortest first."""
    items: list[Item] = []
    if matches.texts is not None:
        items += [Item(n, length, text_id=text_id) for text_id, n, length in conn.execute(matches.texts, matches.texts_args)]
    if matches.live is not None:
        items += [Item(n, length, live_rowid=rowid) for rowid, n, length in conn.execute(matches.live, matches.live_args)]
    items.sort(key=lambda item: (-item.strength, item.length))
    return items


def _candidates(matches: PhraseMatches, items: list[Item], *, grouped: bool = False) -> tuple[str, list[Any]]:
    """The ``candidates`` CTE of ``items``' documents in scope, and its parameters; ``grouped``:
    a stored session's best document only (:data:`_STORED_BEST`, cross-session rankings)."""
    stored = [[item.text_id, item.strength, item.length] for item in items if item.text_id is not None]
    live = [[item.live_rowid, item.strength] for item in items if item.live_rowid is not None]
    parts: list[str] = []
    args: list[Any] = []
    if stored and grouped and matches.grouped is not None and matches.doc_range is None:
        parts.append(_STORED_BEST.format(filters=matches.grouped))
        args += [json.dumps(stored), *matches.grouped_args]
    elif stored:
        parts.append(_STORED.format(range=' AND d."docid" BETWEEN ? AND ?' if matches.doc_range is not None else ""))
        args += [json.dumps(stored), *(matches.doc_range or ())]
    if live:
        parts.append(_LIVE)
        args.append(json.dumps(live))
    return "WITH candidates AS (" + " UNION ALL ".join(parts) + ")", args


def _batches(conn: sqlite3.Connection, matches: PhraseMatches) -> Iterator[list[Item]]:
    """Step 2: whole classes of items in ranking order, at least :data:`FIRST_BATCH` items
    at first and twice as many each time."""
    batch: list[Item] = []
    size = FIRST_BATCH
    for items in text_classes(_items(conn, matches), None, 0):
        batch += items
        if len(batch) >= size:
            yield batch
            batch, size = [], 2 * size
    if batch:
        yield batch


def ranked_sessions(conn: sqlite3.Connection, matches: PhraseMatches, limit: int, skip: int) -> list[tuple[Any, ...]]:
    """Rows ``skip .. skip + limit`` of the cross-session ranking: each session's best row,
    sessions in ranking order; batches are read only until that many sessions are seen."""
    want = skip + limit
    leaders: dict[str, tuple[Any, ...]] = {}
    if want <= 0:
        return []
    where = f" WHERE {matches.where}" if matches.where else ""
    with closing(_batches(conn, matches)) as batches:
        for batch in batches:
            cte, args = _candidates(matches, batch, grouped=True)
            for row in conn.execute(cte + _BEST.format(where=where), [*args, *matches.where_args]):
                if row[0] not in leaders:  # a session seen earlier has its best row there
                    leaders[row[0]] = row
            if len(leaders) >= want:
                break
    return list(leaders.values())[skip:want]


def ranked_events(conn: sqlite3.Connection, matches: PhraseMatches, session_id: str, limit: int, skip: int) -> list[tuple[Any, ...]]:
    """Rows ``skip .. skip + limit`` of one session's ranking (every matching row is a hit)."""
    want = skip + limit
    found: list[tuple[Any, ...]] = []
    if want <= 0:
        return []
    where = f" AND {matches.where}" if matches.where else ""
    with closing(_batches(conn, matches)) as batches:
        for batch in batches:
            cte, args = _candidates(matches, batch)
            found += conn.execute(cte + _EVENTS.format(where=where), [*args, session_id, *matches.where_args, want - len(found)]).fetchall()
            if len(found) >= want:
                break
    return found[skip:want]

