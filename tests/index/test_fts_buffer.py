"""The deferred FTS5 buffer stays bounded and loses or keeps nothing it should not.

Written early — between sessions, or inside a session's savepoint when one
session alone outgrows the bound — the index holds exactly what a build that
buffers everything holds, even when a session fails after its early rows were
written (its savepoint rollback must take them back).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from readmodel.projection.grams import document_tokens
from readmodel.store import gramindex

from indexer import projection
from indexer.layout import Compression
from indexer.zstdframes import frame_end
from indexer.reconcile import Reconciler
from readmodel.store.database import open_writer
from tests.logfactory import header, simple_turn, write_log
from tests import indexdb


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for number in range(6):
        turns = [simple_turn(9 * turn, f"word{number} turn{turn} shared text") for turn in range(4)]
        path = write_log(root, header(f"s{number}", created_at=number + 1), turns)
        if number == 3:
            # A bad checksum in the third of four turn frames: the first turns were
            # already projected (and their FTS rows possibly written) when it fails.
            data = bytearray(path.read_bytes())
            frames = _frame_starts(bytes(data))
            data[frames[3] + 12] ^= 0x55
            path.write_bytes(bytes(data))
    return root


def _frame_starts(data: bytes) -> list[int]:
    starts, offset = [], 0
    while offset < len(data):
        starts.append(offset)
        offset = frame_end(data, offset, len(data))
    return starts


def _index(tmp_path: Path, name: str) -> sqlite3.Connection:
    db = tmp_path / name
    engine = open_writer(str(db))
    Reconciler(engine, _root(tmp_path / f"{name}-logs"), Compression.ZSTD, settle_seconds=0).reconcile()
    engine.dispose()
    conn = indexdb.connect(db)
    conn.execute('CREATE VIRTUAL TABLE temp."terms" USING fts5vocab(main, "texts_fts", instance)')
    conn.execute('CREATE VIRTUAL TABLE temp."grams" USING fts5vocab(main, "document_grams", instance)')
    return conn


def _postings(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    """Word postings of texts_fts, then gram postings of document_grams (both per text)."""
    words = conn.execute('SELECT "term", "doc", "col", "offset" FROM temp."terms" ORDER BY 1, 2, 3, 4').fetchall()
    return words + conn.execute('SELECT "term", "doc" FROM temp."grams" ORDER BY 1, 2').fetchall()


@pytest.mark.parametrize("bound", [1, 30, 60, 100, 150, 250, 400])
def test_early_writes_index_exactly_what_one_write_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: int) -> None:
    whole = _index(tmp_path, "whole.db")
    monkeypatch.setattr(projection, "FTS_BUFFER_CHARS", bound)
    early = _index(tmp_path, "early.db")
    statuses = dict(early.execute('SELECT "id", "status" FROM "sessions"').fetchall())
    assert statuses == {f"s{n}": ("corrupt" if n == 3 else "ok") for n in range(6)}
    assert _postings(early) == _postings(whole) and len(_postings(whole)) >= 100
    # Every indexed text is a stored one and the other way round; the failed session has none.
    indexed = {row[0] for row in early.execute('SELECT DISTINCT "doc" FROM temp."terms"')}
    stored = {row[0] for row in early.execute('SELECT "id" FROM "texts"')}
    assert indexed == stored
    assert early.execute('SELECT count(*) FROM "texts_fts" WHERE "texts_fts" MATCH \'word3\'').fetchone()[0] == 0


def _fts_connection() -> sqlite3.Connection:
    conn = indexdb.connect(":memory:", isolation_level=None)
    # A scratch index: each document is its own text (text id = docid), texts_fts's layout over it.
    conn.execute('CREATE TABLE "documents" ("docid" INTEGER PRIMARY KEY, "text" TEXT NOT NULL)')
    conn.execute("CREATE VIRTUAL TABLE \"texts_fts\" USING fts5(\"text\", content='documents', content_rowid='docid')")
    conn.execute('CREATE VIRTUAL TABLE temp."terms" USING fts5vocab(main, "texts_fts", instance)')
    conn.execute(gramindex.DDL)
    conn.execute('CREATE VIRTUAL TABLE temp."grams" USING fts5vocab(main, "document_grams", instance)')
    return conn


def _session(conn: sqlite3.Connection, fts: projection.DeferredFts, sid: int, words: list[str], fail: bool, spill: int | None = None) -> None:
    """One session as the reconciler runs it: relieve, savepoint, rows in several flushes, release or roll back;
    with ``spill``, as a streamed session is replayed (its rows spilled past that bound after each flush)."""
    cur = conn.cursor()
    fts.relieve(cur)
    cur.execute(f'SAVEPOINT "s{sid}"')
    mark = fts.mark()
    for seq, word in enumerate(words):
        rows = [((sid << 32) | seq, f"{word} s{sid}")]
        cur.executemany('INSERT INTO "documents" ("docid", "text") VALUES (?, ?)', rows)
        fts.add(cur, [], rows)  # a scratch index: each document is its own text (text id = docid)
        if spill is not None:
            fts.spill(cur, spill)
    if fail:
        cur.execute(f'ROLLBACK TO "s{sid}"')
        fts.rollback(mark)
    cur.execute(f'RELEASE "s{sid}"')


@pytest.mark.parametrize("bound", [1, 10, 25, 40, 1000])
def test_a_failed_session_takes_back_only_its_own_early_rows(monkeypatch: pytest.MonkeyPatch, bound: int) -> None:
    monkeypatch.setattr(projection, "FTS_BUFFER_CHARS", bound)
    conn = _fts_connection()
    fts = projection.DeferredFts()
    conn.execute("BEGIN IMMEDIATE")
    _session(conn, fts, 1, ["alpha", "beta"], fail=False)
    _session(conn, fts, 2, ["gamma", "delta", "epsilon", "zeta", "eta"], fail=True)
    _session(conn, fts, 3, ["theta"], fail=False)
    fts.write(conn.cursor())
    conn.execute("COMMIT")
    indexed = sorted({row[0] for row in conn.execute('SELECT "doc" FROM temp."terms"')})
    stored = sorted(row[0] for row in conn.execute('SELECT "docid" FROM "documents"'))
    assert indexed == stored == [(1 << 32) | 0, (1 << 32) | 1, (3 << 32) | 0]
    # The gram index holds the same documents, each with exactly its text's grams.
    grams: dict[int, set[str]] = {}
    for term, doc in conn.execute('SELECT "term", "doc" FROM temp."grams"'):
        grams.setdefault(doc, set()).add(term)
    texts = dict(conn.execute('SELECT "docid", "text" FROM "documents"').fetchall())
    assert grams == {doc: set(document_tokens(text).split()) for doc, text in texts.items()}
    assert fts.rows == [] and fts.chars == 0


@pytest.mark.parametrize("limit", [0, 12, 30, 1000])
def test_a_streamed_session_spills_only_its_own_rows_and_a_failure_takes_them_back(limit: int) -> None:
    conn = _fts_connection()
    fts = projection.DeferredFts()
    conn.execute("BEGIN IMMEDIATE")
    _session(conn, fts, 1, ["alpha", "beta"], fail=False)
    _session(conn, fts, 2, ["gamma", "delta", "epsilon", "zeta", "eta"], fail=True, spill=limit)
    _session(conn, fts, 3, ["theta", "iota", "kappa"], fail=False, spill=limit)
    # The earlier session's rows wait for the commit whatever the streamed ones did.
    held = {sid: sum(len(text) for text_id, text in fts.texts if text_id >> 32 == sid) for sid in (1, 2, 3)}
    assert held[1] == len("alpha s1") + len("beta s1") and held[2] == 0
    # The streamed session keeps at most its bound (all of it under a large one).
    assert held[3] <= limit and (held[3] == 23) == (limit >= 23)  # "theta s3", "iota s3", "kappa s3"
    assert fts.chars == sum(len(text) for _, text in fts.texts)
    fts.write(conn.cursor())
    conn.execute("COMMIT")
    indexed = sorted({row[0] for row in conn.execute('SELECT "doc" FROM temp."terms"')})
    stored = sorted(row[0] for row in conn.execute('SELECT "docid" FROM "documents"'))
    assert indexed == stored == [(1 << 32) | 0, (1 << 32) | 1, (3 << 32) | 0, (3 << 32) | 1, (3 << 32) | 2]
    grams = {doc for _, doc in conn.execute('SELECT "term", "doc" FROM temp."grams"')}
    assert sorted(grams) == stored
