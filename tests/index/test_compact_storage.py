"""The compact SQLite storage of schema 0016 (issue 21: the index no larger than the logs).

Documents' texts are stored compressed with the block dictionary in
``document_rows`` behind the ``documents`` view; every sessionq connection
decodes them, a plain ``sqlite3`` connection fails clearly; ``event_blocks``
is a rowid table; ``id_key`` is compact.  An index from before 0016 upgrades
to the same content a cold build gives, and back.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from alembic import command

from readmodel.core.checkedcache import CheckedCache
from readmodel.store import blocks, doctext
from readmodel.store.database import create_index_engine
from readmodel.store.revisions import alembic_config
from readmodel.store.rowkeys import id_sort_key
from readmodel.store.schema import TEXT_EXPRESSION
from readmodel.store.schemacheck import schema_drift
from tests import indexdb
from tests.corpus import ZSTD_ROOT, require_corpus
from tests.index.test_block_dictionary import build, forget_dictionaries, small_roots_train  # noqa: F401 - the fixture
from tests.indexstate import diff_states, index_state


def _packing(db: Path) -> tuple[int, int, int]:
    """(packed texts, plain texts, packed bytes) of ``texts`` (schema 0018: each distinct text once)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute('SELECT typeof("text_z"), count(*), sum(length("text_z")) FROM "texts" GROUP BY 1').fetchall()
    finally:
        conn.close()
    found = {kind: (count, size) for kind, count, size in rows}
    return found.get("blob", (0, 0))[0], found.get("text", (0, 0))[0], found.get("blob", (0, 0))[1]


def test_texts_are_packed_with_the_block_dictionary_and_read_back_exactly(tmp_path: Path, small_roots_train: None) -> None:
    require_corpus()
    build(ZSTD_ROOT, tmp_path / "index.db")
    packed, plain, size = _packing(tmp_path / "index.db")
    conn = indexdb.connect(tmp_path / "index.db")
    (dict_id,) = conn.execute('SELECT "id" FROM "block_dictionaries"').fetchone()
    frames = {blocks.frame_dictionary(bytes(row[0])) for row in conn.execute('SELECT "text_z" FROM "texts" WHERE typeof("text_z") = \'blob\'')}
    texts = conn.execute(f'SELECT sum(length(CAST({TEXT_EXPRESSION} AS BLOB))) FROM "texts" t WHERE typeof(t."text_z") = \'blob\'').fetchone()[0]
    assert packed > 100 and plain > 0 and frames == {dict_id}
    assert size < texts / 2  # the dictionary at least halves the texts it packs
    # Each packed text decodes to exactly what the projection gave it.
    for text, stored in conn.execute('SELECT d."text", t."text_z" FROM "documents" d JOIN "document_rows" r USING ("docid") JOIN "texts" t ON t."id" = r."text_id"'):
        assert doctext.unpack_text(stored) == text
        assert doctext.pack_text(text) == stored or isinstance(stored, bytes)


def test_a_connection_without_the_function_fails_clearly(tmp_path: Path) -> None:
    require_corpus()
    build(ZSTD_ROOT, tmp_path / "index.db")
    conn = sqlite3.connect(tmp_path / "index.db")
    with pytest.raises(sqlite3.OperationalError, match="no such function: sessionq_text"):
        conn.execute('SELECT count(*) FROM "documents"')


def test_a_reader_thread_loads_an_unknown_dictionary_from_its_own_index(tmp_path: Path, small_roots_train: None) -> None:
    require_corpus()
    build(ZSTD_ROOT, tmp_path / "index.db")
    expected = indexdb.connect(tmp_path / "index.db").execute('SELECT "docid", "text" FROM "documents" ORDER BY "docid"').fetchall()
    forget_dictionaries()
    found: list[object] = []

    def read() -> None:  # a thread of its own: no cached decompression context either
        conn = indexdb.connect(f"file:{tmp_path / 'index.db'}?mode=ro", uri=True)
        found.append(conn.execute('SELECT "docid", "text" FROM "documents" ORDER BY "docid"').fetchall())

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    assert found == [expected]


def test_an_index_from_before_0016_upgrades_to_what_a_cold_build_gives_and_back(tmp_path: Path, small_roots_train: None) -> None:
    require_corpus()
    cold, upgraded = tmp_path / "cold.db", tmp_path / "upgraded.db"
    build(ZSTD_ROOT, cold)
    build(ZSTD_ROOT, upgraded)
    with create_index_engine(str(upgraded)).begin() as conn:
        command.downgrade(alembic_config(conn), "0013")
    old = sqlite3.connect(upgraded)
    kinds = dict(old.execute("SELECT name, type FROM sqlite_master WHERE name IN ('documents', 'documents_text_key', 'document_rows')"))
    assert kinds == {"documents": "table", "documents_text_key": "index"}
    assert all(len(key) > 2 * len(id_sort_key(session_id)) for session_id, key in old.execute('SELECT "id", "id_key" FROM "sessions"'))
    old.close()

    with create_index_engine(str(upgraded)).begin() as conn:
        command.upgrade(alembic_config(conn), "head")
        assert schema_drift(conn) == []
    assert diff_states(index_state(str(cold)), index_state(str(upgraded))) == []
    conn = indexdb.connect(upgraded)
    assert all(key == id_sort_key(session_id) for session_id, key in conn.execute('SELECT "id", "id_key" FROM "sessions"'))
    assert conn.execute("SELECT type FROM sqlite_master WHERE name = 'documents'").fetchone() == ("view",)
    assert "WITHOUT ROWID" not in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'event_blocks'").fetchone()[0]
    assert _packing(upgraded)[:2] == _packing(cold)[:2]


def test_decoded_long_texts_are_reused_only_for_the_same_packed_bytes_and_stay_bounded() -> None:
    cache = CheckedCache(capacity=10, weight=len)
    cache.put((1, 3), b"abc", b"text-one")
    assert cache.get((1, 3), b"abc") == b"text-one"
    assert cache.get((1, 3), b"abd") is None  # same key, other packed bytes: never a stale text
    cache.put((2, 3), b"xyz", b"text-two")  # 16 bytes > 10: the least recently used goes
    assert cache.get((1, 3), b"abc") is None and cache.get((2, 3), b"xyz") == b"text-two"
    assert cache.size == len(b"text-two")


def test_a_long_text_reads_back_exactly_through_the_cache(tmp_path: Path) -> None:
    text = "".join(f"line {n}: {'é' if n % 7 else 'x'} output {n * n}\n" for n in range(20_000))
    conn = indexdb.connect(tmp_path / "scratch.db")
    conn.execute('CREATE TABLE "r" ("text_z")')
    packed = doctext.pack_text(text)
    assert isinstance(packed, bytearray) and len(packed) >= doctext.CACHED_MIN_BYTES
    conn.execute('INSERT INTO "r" VALUES (?)', (packed,))
    sql = f'SELECT {TEXT_EXPRESSION} FROM "r" t'
    assert conn.execute(sql).fetchone()[0] == text
    assert conn.execute(sql).fetchone()[0] == text  # the second read is the cached one


def test_free_pages_left_by_a_migration_are_given_back_only_when_they_are_many(tmp_path: Path) -> None:
    from readmodel.store.database import reclaim_free_pages

    require_corpus()
    db = tmp_path / "index.db"
    build(ZSTD_ROOT, db)
    assert reclaim_free_pages(str(db)) == 0  # a fresh build has next to no free pages
    state = index_state(str(db))
    conn = indexdb.connect(db)
    conn.execute('CREATE TABLE "scratch" AS SELECT * FROM "event_blocks"')  # grow the file, then free it
    conn.execute('DROP TABLE "scratch"')
    conn.commit()
    conn.close()
    size = db.stat().st_size
    given = reclaim_free_pages(str(db))
    assert given > 0 and db.stat().st_size <= size - given
    assert diff_states(state, index_state(str(db))) == []
