"""Each distinct document text stored once (schema 0018): exact sharing, and texts, their grams and
their word-index rows (schema 0021) living exactly as long as a document holds them, through savepoint rollbacks and deferred writes."""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer import projection
from readmodel.projection.grams import document_tokens
from readmodel.projection.texthash import text_hash
from readmodel.store.database import open_writer
from readmodel.store.schema import TEXT_EXPRESSION
from readmodel.store.texts import KnownTexts


@pytest.fixture()
def cursor(tmp_path: Path) -> Iterator[sqlite3.Cursor]:
    engine = open_writer(str(tmp_path / "index.db"))
    with engine.connect() as conn:
        cur = conn.connection.driver_connection.cursor()
        yield cur
        if cur.connection.in_transaction:
            cur.execute("ROLLBACK")
    engine.dispose()


def _doc(sid: int, seq: int, text: str, hash_value: int | None = None) -> list[object]:
    """A projector's document row with its text hash appended (as ``SessionProjector.flush`` hands it over)."""
    return [sid << 32 | seq, sid, seq, "user/message", 1, 1, len(text), text, text_hash(text) if hash_value is None else hash_value]


def _state(cur: sqlite3.Cursor) -> tuple[dict[int, str], dict[int, int], dict[int, set[str]]]:
    """(texts by id, text id by docid, gram words by text id)."""
    texts = dict(cur.execute(f'SELECT t."id", {TEXT_EXPRESSION} FROM "texts" t').fetchall())
    named = dict(cur.execute('SELECT "docid", "text_id" FROM "document_rows"').fetchall())
    cur.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.g USING fts5vocab(main, document_grams, 'instance')")
    grams: dict[int, set[str]] = {}
    for term, doc in cur.execute("SELECT term, doc FROM temp.g").fetchall():
        grams.setdefault(doc, set()).add(term)
    return texts, named, grams


def _words(cur: sqlite3.Cursor) -> dict[int, list[str]]:
    """texts_fts's terms by text id (schema 0021), in position order."""
    cur.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.w USING fts5vocab(main, texts_fts, 'instance')")
    words: dict[int, list[str]] = {}
    for term, doc in cur.execute('SELECT term, doc FROM temp.w ORDER BY doc, "offset"').fetchall():
        words.setdefault(doc, []).append(term)
    return words


def _consistent(cur: sqlite3.Cursor) -> dict[int, str]:
    texts, named, grams = _state(cur)
    assert set(named.values()) == set(texts), "every text is held, every document names a stored text"
    assert grams == {text_id: set(document_tokens(text).split()) for text_id, text in texts.items()}
    # The word index holds each stored text once, exactly as FTS5 tokenises it, and nothing else.
    cur.execute("INSERT INTO texts_fts (texts_fts, rank) VALUES ('integrity-check', 1)")
    assert {row[0] for row in cur.execute('SELECT "id" FROM "texts_fts_docsize"')} == set(texts)
    assert set(_words(cur)) == {text_id for text_id, text in texts.items() if any(c.isalnum() for c in text)}
    return texts


def test_equal_texts_share_one_row_and_a_hash_collision_gets_a_row_of_its_own(cursor: sqlite3.Cursor) -> None:
    cursor.execute("BEGIN IMMEDIATE")
    fts = projection.DeferredFts()
    docs = [_doc(1, 0, "the same text", 7), _doc(1, 1, "another text", 7), _doc(2, 0, "the same text", 7), _doc(2, 1, "another text", 7)]
    projection.insert_documents(cursor, docs, fts)
    fts.write(cursor)
    cursor.execute("COMMIT")
    texts = _consistent(cursor)
    assert sorted(texts.values()) == ["another text", "the same text"]  # one hash, two texts: two rows
    named = dict(cursor.execute('SELECT "docid", "text_id" FROM "document_rows"').fetchall())
    assert named[1 << 32] == named[2 << 32] != named[1 << 32 | 1] == named[2 << 32 | 1]
    assert cursor.execute('SELECT "text" FROM "documents" ORDER BY "docid"').fetchall() == [(doc[7],) for doc in docs]


def test_a_text_and_its_grams_go_with_its_last_document(cursor: sqlite3.Cursor) -> None:
    cursor.execute("BEGIN IMMEDIATE")
    fts = projection.DeferredFts()
    projection.insert_documents(cursor, [_doc(1, 0, "kept by two"), _doc(1, 1, "only here 数据库")], fts)
    projection.insert_documents(cursor, [_doc(2, 0, "kept by two")], fts)
    fts.write(cursor)
    cursor.execute("COMMIT")

    cursor.execute("BEGIN IMMEDIATE")
    fts = projection.DeferredFts()
    projection.delete_session_rows(cursor, 1, fts=fts)
    assert len(_state(cursor)[0]) == 2  # dropped when the transaction's buffer is written, not before
    projection.insert_documents(cursor, [_doc(3, 0, "new in this transaction")], fts)
    fts.write(cursor)
    cursor.execute("COMMIT")
    assert sorted(_consistent(cursor).values()) == ["kept by two", "new in this transaction"]

    cursor.execute("BEGIN IMMEDIATE")
    projection.delete_session_rows(cursor, 2)  # without a buffer (prune): dropped at once
    projection.delete_session_rows(cursor, 3)
    cursor.execute("COMMIT")
    assert _consistent(cursor) == {}


def test_a_pending_text_orphaned_before_the_buffer_is_written_never_reaches_the_gram_index(cursor: sqlite3.Cursor) -> None:
    cursor.execute("BEGIN IMMEDIATE")
    fts = projection.DeferredFts()
    projection.insert_documents(cursor, [_doc(1, 0, "short-lived")], fts)
    (text_id,) = cursor.execute('SELECT "id" FROM "texts"').fetchone()
    cursor.execute('DELETE FROM "document_rows"')  # as if its document had gone (its search rows left to the buffer)
    fts.rows = []
    fts.orphans.add(text_id)
    fts.write(cursor)
    cursor.execute("COMMIT")
    assert _consistent(cursor) == {}


def test_a_rolled_back_savepoint_keeps_the_texts_its_deletions_orphaned(cursor: sqlite3.Cursor) -> None:
    cursor.execute("BEGIN IMMEDIATE")
    fts = projection.DeferredFts()
    projection.insert_documents(cursor, [_doc(1, 0, "committed before")], fts)
    fts.write(cursor)
    cursor.execute("COMMIT")

    cursor.execute("BEGIN IMMEDIATE")
    fts = projection.DeferredFts()
    projection.insert_documents(cursor, [_doc(2, 0, "pending in the buffer")], fts)
    cursor.execute('SAVEPOINT "session"')
    mark = fts.mark()
    projection.delete_session_rows(cursor, 1, fts=fts)
    projection.insert_documents(cursor, [_doc(3, 0, "inside the failed session"), _doc(3, 1, "pending in the buffer")], fts)
    cursor.execute('ROLLBACK TO "session"')  # the session failed: its deletions and its text are undone
    fts.rollback(mark)
    cursor.execute('RELEASE "session"')
    fts.write(cursor)
    cursor.execute("COMMIT")
    assert sorted(_consistent(cursor).values()) == ["committed before", "pending in the buffer"]


def test_a_repeated_text_is_found_again_after_its_row_was_dropped_and_its_id_reused(cursor: sqlite3.Cursor) -> None:
    cursor.execute("BEGIN IMMEDIATE")
    fts = projection.DeferredFts()
    projection.insert_documents(cursor, [_doc(1, 0, "first text " * 20)], fts)
    fts.write(cursor)
    projection.delete_session_rows(cursor, 1, fts=fts)
    fts.write(cursor)
    projection.insert_documents(cursor, [_doc(2, 0, "second text " * 20)], fts)  # may take the freed id
    projection.insert_documents(cursor, [_doc(3, 0, "first text " * 20)], fts)
    fts.write(cursor)
    cursor.execute("COMMIT")
    assert sorted(_consistent(cursor).values()) == ["first text " * 20, "second text " * 20]


class _Unknowing(KnownTexts):
    """Known texts that never answer: every text is looked up in the index (the slow path)."""

    def find(self, text: str, value: int) -> int | None:
        return None


_POOL = ["alpha", "beta", "alpha beta", "数据库 text", "x" * 300, "long " * 400, "a", "too long to learn " * 4000]
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("docs"), st.lists(st.integers(0, len(_POOL) - 1), min_size=1, max_size=5)),
        st.tuples(st.just("delete"), st.integers(0, 20)),
        st.tuples(st.just("failed-session"), st.lists(st.integers(0, len(_POOL) - 1), min_size=1, max_size=3), st.integers(0, 20)),
        st.tuples(st.just("write"), st.booleans()),  # between sessions: True commits, False only writes the buffer
    ),
    max_size=25,
)


def _play(cur: sqlite3.Cursor, steps: list[tuple[Any, ...]], fts: projection.DeferredFts) -> None:
    """Run ``steps`` as the reconciler would (texts hashed by length mod 3: collisions are common)."""
    sids = itertools.count(1)
    live: list[int] = []
    cur.execute("BEGIN IMMEDIATE")

    def docs(picks: list[int]) -> int:
        sid = next(sids)
        projection.insert_documents(cur, [_doc(sid, seq, _POOL[pick], len(_POOL[pick]) % 3) for seq, pick in enumerate(picks)], fts)
        return sid

    for step in steps:
        if step[0] == "docs":
            live.append(docs(step[1]))
        elif step[0] == "delete" and live:
            projection.delete_session_rows(cur, live.pop(step[1] % len(live)), fts=fts)
        elif step[0] == "failed-session":
            cur.execute('SAVEPOINT "session"')
            mark = fts.mark()
            if live:
                projection.delete_session_rows(cur, live[step[2] % len(live)], fts=fts)
            docs(step[1])
            cur.execute('ROLLBACK TO "session"')
            fts.rollback(mark)
            cur.execute('RELEASE "session"')
        elif step[0] == "write":
            fts.write(cur)  # an oversized buffer written between sessions, or the end of a transaction
            if step[1]:
                cur.execute("COMMIT")
                cur.execute("BEGIN IMMEDIATE")
    fts.write(cur)
    cur.execute("COMMIT")


def _rows(cur: sqlite3.Cursor) -> dict[str, list[Any]]:
    tables = ["texts", "document_rows", "texts_fts_data", "texts_fts_idx", "texts_fts_docsize", "document_grams_data", "document_grams_idx"]
    return {table: sorted(cur.execute(f'SELECT * FROM "{table}"').fetchall()) for table in tables}


@settings(max_examples=60, deadline=None)
@given(steps=_STEPS)
def test_texts_found_through_the_transactions_known_texts_are_the_ones_the_index_lookup_finds(steps: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        states = []
        for known in (KnownTexts(), _Unknowing()):
            engine = open_writer(str(Path(tmp) / f"{type(known).__name__}.db"))
            with engine.connect() as conn:
                cur = conn.connection.driver_connection.cursor()
                fts = projection.DeferredFts()
                fts.known = known
                _play(cur, steps, fts)
                _consistent(cur)
                states.append(_rows(cur))
            engine.dispose()
        assert states[0] == states[1]
