"""The phrase ranking texts first (:mod:`readmodel.search.phrasetexts`, schema 0021) equals the
per-document ranking it replaced, computed by brute force over a per-document FTS5 table.

The oracle is independent of ``texts_fts``: every stored document (and every live one) is
tokenised on its own in a TEMP FTS5 table, its strength is the marks of ``highlight()``, and
one statement ranks every match by the reference's order (each session's best document by one
fixed-width key, then match count, length, time, session id, seq).  The index repeats texts
across sessions and within them (the case texts first changes), with ties on every key, under
session and event filters, with and without a live overlay shadowing a stored session, with
and without the C accelerator, one class of texts per statement or many, and with the filters
too many to narrow step 1 and the grouping.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.live import InMemoryLiveSource
from readmodel.search import phrasetexts
from readmodel.search import sqlite as search_module
from readmodel.search.predicates import event_where, session_where
from readmodel.search.requests import match_expression
from readmodel.search.snippets import END_MARK, START_MARK
from readmodel.search.sqlite import SqliteSearchBackend
from readmodel.store.database import open_writer
from tests.logfactory import header, turn_end, turn_start, user
from tests.search.test_accelerator import _EVENT_FILTERS, _SESSION_FILTERS
from tests.search.test_search_engine import write

_WORDS = ["needle", "hay", "needle needle", "hay needle", "stack", "needle hay needle", "hay hay stack"]
_SHARED = ["needle in the shared boilerplate", "hay stack shared by many sessions needle"]

_COLUMNS = """s."id" AS session_id, s."sid" AS header_json, s."created_at" AS created_at, s."cwd" AS cwd,
  s."parent_session" AS parent_session, 0 AS live, 1 AS persisted, d."docid" AS docid, d."seq" AS seq, d."type" AS type,
  d."time" AS time, CASE d."surface" WHEN 1 THEN 'current' WHEN 2 THEN 'shadowed' ELSE 'log-only' END AS surface,
  d."length" AS document_length"""
_MARKS = "((length(CAST({h} AS BLOB)) - length(CAST(replace({h}, ?, '') AS BLOB))) / 3)"
_MARK_ARGS = [START_MARK, END_MARK, START_MARK, END_MARK, START_MARK]
_STORED = f"""
  SELECT {_COLUMNS}, {_MARKS.format(h='highlight("each_document", 0, ?, ?)')} AS match_count
  FROM temp."each_document" JOIN "documents" d ON d."docid" = "each_document"."rowid" JOIN "sessions" s ON s."sid" = d."sid"
  WHERE "each_document" MATCH ? AND s."status" = 'ok' AND NOT EXISTS (SELECT 1 FROM temp."live_sessions" l WHERE l."id" = s."id"){{range}}"""
_LIVE = f"""
  SELECT l."id" AS session_id, NULL AS header_json, l."created_at" AS created_at, l."cwd" AS cwd, l."parent_session" AS parent_session,
         1 AS live, l."persisted" AS persisted, -ld."rowid" AS docid, ld."seq" AS seq, ld."type" AS type, ld."time" AS time,
         ld."surface" AS surface, ld."length" AS document_length, {_MARKS.format(h='highlight("live_docs", 0, ?, ?)')} AS match_count
  FROM temp."live_docs" ld JOIN temp."live_sessions" l ON l."id" = ld."session_id" WHERE "live_docs" MATCH ?"""


@pytest.fixture(scope="module")
def repeated_texts_index(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Sessions built from few texts (each repeated across sessions and within them), two shared
    by most sessions, in three workspaces (one session without a cwd), created at few times."""
    rng = random.Random(20261202)
    base = tmp_path_factory.mktemp("phrase-texts")
    root = base / "root"
    root.mkdir()
    for number in range(36):
        texts = [rng.choice(_WORDS) for _ in range(1 + number % 7)]
        if number % 4:
            texts.insert(rng.randint(0, len(texts)), _SHARED[number % 2])
        cwd = None if number == 5 else f"/work/w{number % 3}"
        write(root, f"s{number % 5}-{number:02}", texts, created=1 + number % 4, cwd=cwd)
    db = str(base / "index.db")
    Reconciler(open_writer(db), root, Compression.ZSTD, settle_seconds=0).reconcile()
    return db


def _backend(db: str, overlay: bool, accelerated: bool) -> SqliteSearchBackend:
    live = None
    if overlay:  # a live session shadowing a stored one (same texts as stored ones), and a live-only one
        live = InMemoryLiveSource()
        live.create(header("s3-03", created_at=2, cwd="/work/w0"), [turn_start(0), user(1, _SHARED[0]), user(2, "needle needle"), turn_end(3)])
        live.create(header("live-only", created_at=3, cwd="/work/w1"), [turn_start(0), user(1, "hay needle"), user(2, _SHARED[1]), turn_end(3)])
    backend = SqliteSearchBackend(db, live=live)
    conn = backend._connection()
    backend._accelerated = backend._accelerated and accelerated
    conn.execute('CREATE VIRTUAL TABLE IF NOT EXISTS temp."each_document" USING fts5("text", tokenize=\'unicode61\')')
    conn.execute('DELETE FROM temp."each_document"')
    conn.execute('INSERT INTO temp."each_document" ("rowid", "text") SELECT "docid", "text" FROM "documents"')
    return backend


def _oracle(conn: Any, phrase: str, where: str, args: list[Any], *, doc_range: tuple[int, int] | None, session_id: str | None) -> list[tuple[Any, ...]]:
    """The whole per-document ranking: cross-session (``session_id`` None) or of one stored session."""
    stored = _STORED.format(range=' AND d."docid" BETWEEN ? AND ?' if doc_range else "")
    params: list[Any] = [*_MARK_ARGS, phrase, *(doc_range or ())]
    if session_id is None:
        sql = (
            f"WITH candidates AS ({stored} UNION ALL {_LIVE}), filtered AS (SELECT * FROM candidates{' WHERE ' + where if where else ''}), "
            f"best AS (SELECT *, max({phrasetexts.RANK_KEY}) FROM filtered GROUP BY session_id) "
            "SELECT session_id, header_json, live, persisted, docid, seq, type, time, surface FROM best "
            f"ORDER BY {phrasetexts.RANK}, session_id ASC, seq DESC"
        )
        return conn.execute(sql, [*params, *_MARK_ARGS, phrase, *args]).fetchall()
    sql = (
        f"WITH candidates AS ({stored}) SELECT session_id, header_json, live, persisted, docid, seq, type, time, surface "
        f"FROM candidates WHERE session_id = ?{' AND ' + where if where else ''} ORDER BY {phrasetexts.RANK}, seq DESC"
    )
    return conn.execute(sql, [*params, session_id, *args]).fetchall()


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.sampled_from(["needle", "hay needle", "stack", "shared", "needle needle", "hay", "absent"]),
    skip=st.integers(0, 6),
    limit=st.integers(1, 9),
    session_filters=_SESSION_FILTERS,
    event_filters=_EVENT_FILTERS,
    overlay=st.booleans(),
    accelerated=st.booleans(),
    batch=st.sampled_from([1, 2, 64]),
    many_filters=st.booleans(),
)
def test_texts_first_phrase_rankings_equal_the_per_document_brute_force(
    repeated_texts_index: str,
    query: str,
    skip: int,
    limit: int,
    session_filters: list[Any],
    event_filters: list[Any],
    overlay: bool,
    accelerated: bool,
    batch: int,
    many_filters: bool,
) -> None:
    backend = _backend(repeated_texts_index, overlay, accelerated)
    phrase = match_expression(query)
    sessions, events = session_where(session_filters), event_where(event_filters)
    where = " AND ".join(fragment for fragment in (sessions.sql(), events.sql()) if fragment)
    with pytest.MonkeyPatch.context() as patch, backend.snapshot(None) as snapshot:
        patch.setattr(phrasetexts, "FIRST_BATCH", batch)
        if many_filters:  # as past SCOPE_FILTER_BINDINGS values: neither step 1 nor the grouping is narrowed
            patch.setattr(search_module, "SCOPE_FILTER_BINDINGS", -1)
        conn = snapshot.conn
        terms = backend._terms(conn, query)
        # Across sessions: stored texts, live documents, filters.
        expected = _oracle(conn, phrase, where, [*sessions.params, *events.params], doc_range=None, session_id=None)
        matches = backend._phrase_matches(conn, terms, phrase, sessions=sessions, events=events)
        assert phrasetexts.ranked_sessions(conn, matches, limit, skip) == expected[skip : skip + limit]
        assert len({row[0] for row in expected}) == len(expected)
        # Within stored sessions (a session shadowed by the live one has no stored matches).
        for session_id in ("s0-00", "s1-21", "s4-34", "s3-03"):
            sid = conn.execute('SELECT "sid" FROM "sessions" WHERE "id" = ?', (session_id,)).fetchone()[0]
            doc_range = (sid << 32, (sid << 32) | 0xFFFFFFFF)
            expected = _oracle(conn, phrase, events.sql(), events.params, doc_range=doc_range, session_id=session_id)
            matches = backend._phrase_matches(conn, terms, phrase, doc_range=doc_range, live=False, events=events)
            assert phrasetexts.ranked_events(conn, matches, session_id, limit, skip) == expected[skip : skip + limit]
    backend.close()


def test_the_oracle_sees_texts_repeated_across_sessions(repeated_texts_index: str) -> None:
    """The fixture exercises what texts first changes: one text, many sessions' documents."""
    backend = _backend(repeated_texts_index, False, True)
    conn = backend._connection()
    holders = conn.execute('SELECT count(DISTINCT "sid") FROM "document_rows" GROUP BY "text_id" ORDER BY 1 DESC').fetchall()
    assert holders[0][0] >= 10 and sum(1 for (count,) in holders if count > 1) >= 5
    expected = _oracle(conn, match_expression("shared"), "", [], doc_range=None, session_id=None)
    assert len(expected) >= 20
    backend.close()
