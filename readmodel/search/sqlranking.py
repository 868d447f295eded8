"""The ranking of the ``words`` and ``substring`` modes, texts first (the fast path over SQLite).

Same order as :class:`readmodel.search.modes.Ranking` (the slow path, also the
tests' oracle): specific before boilerplate, then strength (more first), then
shorter, then newer time, then higher seq; cross-session, each session's first
document in that order, sessions ordered by it, ties by session id (SQLite's
``BINARY`` collation compares UTF-8 bytes, as the slow path compares ids).

**Texts first.**  The first three keys — the boilerplate verdict, strength and
length — depend on a document's text alone, and every distinct text is one
row of ``texts`` (schema 0018, :mod:`readmodel.store.texts`: equal texts share
an id, different texts never do).  So the ranking is computed over the
*distinct* matching texts and reads documents only for the leading ones:

1. **Texts** (one statement): the distinct text ids of the matches in scope,
   each with its strength and length.  A ``words`` match's strength comes
   from FTS5's position lists (``sessionq_spans``), its text id from
   ``document_rows``; a ``substring`` query enumerates the candidate *texts*
   of the gram index (keyed by text id) that some document in scope holds,
   and counts each one's occurrences once, in Python, on the text prepared
   once per process (:data:`readmodel.search.substring.prepared_texts`: its
   UTF-8, lowered) — a candidate text with no occurrence is no match.
2. **Classes**: texts ordered by (strength, length) and cut into classes of
   equal keys.  Verdicts are taken lazily, in that order, a batch of texts per
   statement: whether ``document_rows_text`` holds the text in at least
   :data:`~readmodel.search.modes.BOILERPLATE_SESSIONS` sessions with status ok
   (an index range read stopped there).  Specific classes come first, in
   order; the boilerplate ones after them.
3. **Documents of the leading classes**: each class's documents in scope
   (through ``document_rows_text``, filters applied again), ordered by the
   remaining keys (newer time, higher seq, then session id); a session's first
   row is its best document.  Reading stops as soon as the page's sessions (or
   rows, within one session) are known: every later class ranks after them.

So past step 1, work grows with the page, not with the number of matches: a
two-letter prefix matching 55,000 documents of 1,063 distinct texts reads the
documents of the few leading texts.  ``words`` step 1 still enumerates every
matching document (FTS5's doclist is per document); ``substring`` step 1
enumerates distinct texts only.

It applies when the index has ``texts`` and no live session is
overlaid (live documents are not in it: the slow path ranks those), and for
``words`` only with the C accelerator (spans from the position lists).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from readmodel.search.modes import BOILERPLATE_SESSIONS, text_classes
from readmodel.search.substring import compiled_substring, prepared_texts

_NO_TIME: Final = -(2**63)

# Step 1: one row per distinct matching text.  The selection's rows (text id, strength) are
# materialised first (an FTS5 auxiliary function may not run inside an aggregate); DISTINCT, whose
# ephemeral index holds one entry per text, costs far less than a GROUP BY.  A text's strength is
# the same in every document holding it, so a substring's, left NULL by the selection, is counted
# once on the text itself (read as UTF-8: a packed text decoded to bytes, a plain one cast).
_TEXTS: Final = """
WITH "q" AS MATERIALIZED ({selection}),
"t" AS MATERIALIZED (SELECT DISTINCT "text_id", "strength" FROM "q")
SELECT t."text_id", t."strength", x."length" FROM "t" JOIN "texts" x ON x."id" = t."text_id\""""
# A substring query's candidate texts (distinct already) with their stored form: counted in Python,
# on texts prepared once per process (readmodel.search.substring.prepared_texts).
_CANDIDATE_TEXTS: Final = """
WITH "t" AS MATERIALIZED ({selection})
SELECT t."text_id", x."text_z", x."length" FROM "t" JOIN "texts" x ON x."id" = t."text_id\""""

# Whether stored sessions with status ok hold a text at least BOILERPLATE_SESSIONS times over,
# for each text id of a JSON array: an index range read per text, stopped at that many sessions.
_VERDICTS: Final = f"""
SELECT w."value", (
  SELECT count(*) FROM (
    SELECT DISTINCT o."docid" >> 32 FROM "document_rows" o JOIN "sessions" s ON s."sid" = o."docid" >> 32
    WHERE o."text_id" = w."value" AND s."status" = 'ok' LIMIT {BOILERPLATE_SESSIONS})) >= {BOILERPLATE_SESSIONS}
FROM json_each(?) w"""

# Step 3: the documents in scope holding one of a class's texts, in the order of the keys left.
_ROWS: Final = f"""
SELECT "session_id", "header_json", "live", "persisted", "docid", "seq", "type", "time", "surface" FROM ({{holding}})
ORDER BY CASE WHEN typeof("time") IN ('integer', 'real') THEN "time" ELSE {_NO_TIME} END DESC, "seq" DESC, "session_id\""""

_JUDGED_AHEAD: Final = 256
"""Texts judged per statement in a scoped search (the next ones in ranking order)."""


@dataclass(frozen=True)
class Matches:
    """One search's matches as SQL, built by :mod:`readmodel.search.sqlitemodes`.

    ``selection`` (with ``args``) selects ``(text_id, strength)`` of the matches in scope, a
    text any number of times (a substring candidate text's strength NULL: counted here, and
    a text with no occurrence is no match); ``holding`` (with ``holding_args`` after one JSON
    array of text ids) selects the rows in scope holding one of those texts, with the columns
    of ``sqlitemodes._PERSISTED``, without matching them again.
    """

    selection: str
    args: list[Any]
    holding: str
    holding_args: list[Any]
    substring: str | None = None


@dataclass(slots=True)
class _Text:
    id: int
    strength: int
    length: int
    shared: bool | None = None


def applies(backend: Any, mode: str) -> bool:
    """Whether the fast path ranks this search (see the module docstring)."""
    return bool(backend._sql_ranking and backend._texts and not backend._live_state.fingerprints and (mode == "substring" or backend._accelerated))


def install(conn: sqlite3.Connection) -> bool:
    """Whether the index stores distinct texts (schema 0018: the fast path's keys)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'texts'").fetchone() is not None


def _texts(conn: sqlite3.Connection, matches: Matches) -> list[_Text]:
    """Step 1: the distinct matching texts, strongest then shortest first."""
    found: dict[int, _Text] = {}
    if matches.substring is not None:
        substring = compiled_substring(matches.substring)
        for value, stored, length in conn.execute(_CANDIDATE_TEXTS.format(selection=matches.selection), matches.args):
            strength = substring.count_prepared(prepared_texts.get(conn, value, stored))
            if strength:
                found[value] = _Text(value, strength, length)
        return sorted(found.values(), key=lambda text: (-text.strength, text.length))
    for value, strength, length in conn.execute(_TEXTS.format(selection=matches.selection), matches.args):
        if strength:
            found[value] = _Text(value, strength, length)
    return sorted(found.values(), key=lambda text: (-text.strength, text.length))


def _judge(conn: sqlite3.Connection, texts: list[_Text]) -> None:
    """Settle the verdict of every text in ``texts`` that has none (one statement)."""
    lookup = [text.id for text in texts if text.shared is None]
    if lookup:
        verdicts = dict(conn.execute(_VERDICTS, (json.dumps(lookup),)).fetchall())
        for text in texts:
            if text.shared is None:
                text.shared = bool(verdicts[text.id])


def _rows(conn: sqlite3.Connection, matches: Matches) -> Generator[tuple[Any, ...], None, None]:
    """Step 3: every matching row in ranking order, reading one class of texts at a time."""
    holding = _ROWS.format(holding=matches.holding)
    # Step 2, judged lazily (_JUDGED_AHEAD at a time, read when called: tests vary it).
    for texts in text_classes(_texts(conn, matches), partial(_judge, conn), _JUDGED_AHEAD):
        yield from conn.execute(holding, [json.dumps([text.id for text in texts]), *matches.holding_args])


def ranked_sessions(conn: sqlite3.Connection, matches: Matches, limit: int, skip: int) -> list[tuple[Any, ...]]:
    """Rows ``skip .. skip + limit`` of the cross-session ranking: each session's best row,
    sessions in ranking order; rows are read only until that many sessions are seen."""
    want = skip + limit
    leaders: dict[str, tuple[Any, ...]] = {}
    if want <= 0:
        return []
    with closing(_rows(conn, matches)) as rows:  # closed at once: no statement left running
        for row in rows:
            if row[0] not in leaders:
                leaders[row[0]] = row
                if len(leaders) >= want:
                    break
    return list(leaders.values())[skip:want]


def ranked_events(conn: sqlite3.Connection, matches: Matches, limit: int, skip: int) -> list[tuple[Any, ...]]:
    """Rows ``skip .. skip + limit`` of the one-session ranking (every matching row is a hit)."""
    found: list[tuple[Any, ...]] = []
    with closing(_rows(conn, matches)) as rows:
        for row in rows:
            found.append(row)
            if len(found) >= skip + limit:
                break
    return found[skip : skip + limit]
