"""Alembic migrations: an index at an older revision is refused, then upgraded in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest
from alembic import command

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.store.database import IndexDatabaseError, create_index_engine, open_writer
from readmodel.store.revisions import alembic_config, current_revision
from readmodel.store.schema import APPLICATION_ID, SCHEMA_REVISION
from tests.logfactory import header, simple_turn, write_log
from tests import indexdb


def index_at_first_revision(path: Path, root: Path) -> None:
    engine = create_index_engine(str(path))
    with engine.begin() as conn:
        conn.exec_driver_sql(f"PRAGMA application_id = {APPLICATION_ID}")
        command.upgrade(alembic_config(conn), "0001")
        conn.exec_driver_sql(
            "INSERT INTO index_meta (singleton, identity, global_generation, created_at) VALUES (1, 'old', 0, 0)"
        )
    engine.dispose()


def test_an_older_index_is_refused_until_upgraded_and_keeps_its_rows(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_log(root, header("kept"), [simple_turn()])
    db = tmp_path / "index.db"
    index_at_first_revision(db, root)
    with pytest.raises(IndexDatabaseError, match="sessionq db upgrade"):
        open_writer(str(db))
    engine = open_writer(str(db), allow_upgrade=True)
    with engine.connect() as conn:
        assert current_revision(conn) == SCHEMA_REVISION == "0021"
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
    engine.dispose()
    conn = indexdb.connect(db)
    plan = conn.execute('EXPLAIN QUERY PLAN SELECT "header_json" FROM "sessions" ORDER BY "created_at" DESC, "id_key"').fetchall()
    assert "COVERING INDEX sessions_listing" in plan[0][3]
    assert conn.execute('SELECT "id" FROM "sessions"').fetchall() == [("kept",)]
    assert conn.execute('SELECT "identity" FROM "index_meta"').fetchone() == ("old",)
    (secret,) = conn.execute('SELECT "cursor_secret" FROM "index_meta"').fetchone()
    assert isinstance(secret, bytes) and len(secret) == 32


def test_upgrading_gives_each_index_its_own_cursor_secret_and_no_schema_drift(tmp_path: Path) -> None:
    """Migration 0006: an index from before it gets a fresh random secret (NOT NULL),
    two upgraded indexes never share one, and ``db check`` finds nothing to report."""
    from readmodel.store.schemacheck import schema_drift

    secrets = []
    for name in ("a", "b"):
        db = tmp_path / f"{name}.db"
        index_at_first_revision(db, tmp_path / "root")
        engine = open_writer(str(db), allow_upgrade=True)
        with engine.connect() as conn:
            assert schema_drift(conn) == []
            secrets.append(conn.exec_driver_sql('SELECT "cursor_secret" FROM "index_meta"').scalar())
        engine.dispose()
        with pytest.raises(sqlite3.IntegrityError):
            indexdb.connect(db).execute('UPDATE "index_meta" SET "cursor_secret" = NULL')
    assert all(isinstance(secret, bytes) and len(secret) == 32 for secret in secrets)
    assert secrets[0] != secrets[1]


def test_a_new_index_is_created_with_a_random_cursor_secret(tmp_path: Path) -> None:
    found = []
    for name in ("a", "b"):
        engine = open_writer(str(tmp_path / f"{name}.db"))
        with engine.connect() as conn:
            found.append(conn.exec_driver_sql('SELECT "identity", "cursor_secret" FROM "index_meta"').one())
        engine.dispose()
    assert all(len(secret) == 32 for _, secret in found)
    assert found[0][1] != found[1][1] and found[0][0] != found[1][0]


def _last_activity(db: Path) -> dict[str, object]:
    conn = indexdb.connect(db)
    try:
        return dict(conn.execute('SELECT "id", "last_activity" FROM "sessions"').fetchall())
    finally:
        conn.close()


def test_migration_0010_fills_last_activity_as_the_indexer_writes_it(tmp_path: Path) -> None:
    """An index from before ``sessions.last_activity`` (revision 0007) gets, on upgrade, the
    value the indexer writes with the events: the last event's time whether that event is the
    last member of a run (a turn end) or an ``events`` row (a user message); none for a session
    whose log fails."""
    from tests.logfactory import transcript_path, turn_end, user

    root = tmp_path / "root"
    write_log(root, header("ends-in-run"), [[*simple_turn()[:-1], {**turn_end(8), "time": 7_000}]])
    write_log(root, header("ends-in-row", created_at=2), [[*simple_turn(), {**user(9, "later"), "time": 9_000}]])
    broken = write_log(root, header("broken", created_at=4), [simple_turn()])
    broken.write_bytes(broken.read_bytes()[:-7])
    db = tmp_path / "index.db"
    engine = open_writer(str(db))
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
    engine.dispose()
    written = _last_activity(db)
    assert written["ends-in-run"] == 7_000 and written["ends-in-row"] == 9_000
    assert written["broken"] is None

    with create_index_engine(str(db)).begin() as conn:
        command.downgrade(alembic_config(conn), "0007")
    assert "last_activity" not in {row[1] for row in indexdb.connect(db).execute('PRAGMA table_info("sessions")')}
    engine = open_writer(str(db), allow_upgrade=True)
    engine.dispose()
    assert _last_activity(db) == written
    assert transcript_path(root, header("broken")).exists()


def _document_hashes(db: Path) -> dict[int, int]:
    """Each document's text hash (schema 0018 on: its distinct text's, in ``texts``)."""
    conn = indexdb.connect(db)
    try:
        return dict(conn.execute('SELECT d."docid", t."hash" FROM "document_rows" d JOIN "texts" t ON t."id" = d."text_id"').fetchall())
    finally:
        conn.close()


def test_migration_0013_hashes_the_stored_documents_as_the_indexer_does(tmp_path: Path) -> None:
    """An index from before ``document_hashes`` (revision 0010) gets, on upgrade, the rows the
    indexer writes with the documents: one per document, the hash of its stored text."""
    from readmodel.projection.texthash import text_hash
    from tests.logfactory import user

    root = tmp_path / "root"
    for index in range(3):
        write_log(root, header(f"s{index}", created_at=index), [[*simple_turn(), user(9, "shared boilerplate"), user(10, f"own {index}")]])
    db = tmp_path / "index.db"
    engine = open_writer(str(db))
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
    engine.dispose()
    written = _document_hashes(db)
    texts = dict(indexdb.connect(db).execute('SELECT "docid", "text" FROM "documents"').fetchall())
    assert written == {docid: text_hash(text) for docid, text in texts.items()} and len(written) >= 6

    with create_index_engine(str(db)).begin() as conn:
        command.downgrade(alembic_config(conn), "0012")
    assert indexdb.connect(db).execute("SELECT name FROM sqlite_master WHERE name = 'document_hashes'").fetchall() == []
    engine = open_writer(str(db), allow_upgrade=True)
    engine.dispose()
    assert _document_hashes(db) == written


def _marked_documents(db: Path, expressions: list[str]) -> list[list[tuple[int, str]]]:
    """Each expression's matching documents (docid order) with highlight()'s marks: from the
    per-document ``documents_fts`` (before schema 0021), else from ``texts_fts`` (a document's
    matches are its text's)."""
    conn = indexdb.connect(str(db))
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'documents_fts'").fetchone():
            sql = 'SELECT "rowid", highlight("documents_fts", 0, \'[\', \']\') FROM "documents_fts" WHERE "documents_fts" MATCH ? ORDER BY "rowid"'
        else:
            sql = (
                'SELECT d."docid", highlight("texts_fts", 0, \'[\', \']\') FROM "texts_fts" JOIN "document_rows" d ON d."text_id" = "texts_fts"."rowid" '
                'WHERE "texts_fts" MATCH ? ORDER BY d."docid"'
            )
        return [conn.execute(sql, (expression,)).fetchall() for expression in expressions]
    finally:
        conn.close()


def test_migration_0017_rebuilds_documents_fts_with_prefix_indexes_and_the_same_matches(tmp_path: Path) -> None:
    """An index from before the prefix indexes (0016) is rebuilt from its stored texts on upgrade:
    documents_fts gains ``prefix='1 2'`` and answers every term, prefix or not, as before."""
    from tests.logfactory import user

    root = tmp_path / "root"
    for index in range(3):
        write_log(root, header(f"s{index}", created_at=index), [[*simple_turn(), user(9, f"cordis reconcile {index} C++ café")]])
    db = tmp_path / "index.db"
    engine = open_writer(str(db))
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
    engine.dispose()
    expressions = ['"c"*', '"re"*', '"cordis" "r"*', '"cafe"', '"reconcile"']

    def answers() -> list[list[tuple[int, str]]]:
        return _marked_documents(db, expressions)

    def ddl() -> str:
        return sqlite3.connect(db).execute("SELECT sql FROM sqlite_master WHERE name IN ('documents_fts', 'texts_fts')").fetchone()[0]

    assert "prefix='1 2'" in ddl()
    expected = answers()
    assert all(expected)
    with create_index_engine(str(db)).begin() as conn:
        command.downgrade(alembic_config(conn), "0016")
    assert "prefix" not in ddl() and answers() == expected
    engine = open_writer(str(db), allow_upgrade=True)
    engine.dispose()
    assert "prefix='1 2'" in ddl() and answers() == expected


def _two_builds(tmp_path: Path, suffix: str) -> tuple[Path, Path]:
    """Two cold builds (``index.db``, ``cold.db``) of four sessions sharing one long text, each
    with a text of its own (ending in ``suffix``)."""
    from tests.logfactory import user

    root = tmp_path / "root"
    for index in range(4):
        turns = [[*simple_turn(), user(9, "shared boilerplate repeated in every session " * 4), user(10, f"own text {index} 数据库{suffix}")]]
        write_log(root, header(f"s{index}", created_at=index), turns)
    db, cold = tmp_path / "index.db", tmp_path / "cold.db"
    for target in (db, cold):
        engine = open_writer(str(target))
        Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
        engine.dispose()
    return db, cold


def test_migration_0018_stores_each_distinct_text_once_and_upgrades_to_what_a_cold_build_gives(tmp_path: Path) -> None:
    """An index at 0017 (a text per document, ``document_hashes``, grams per document) upgrades
    to one ``texts`` row per distinct text, grams per text, the same documents and search
    content as a cold build — and downgrades back to the 0017 layout with the same documents."""
    from tests.indexstate import diff_states, index_state

    db, cold = _two_builds(tmp_path, "")
    documents = indexdb.connect(db).execute('SELECT * FROM "documents" ORDER BY "docid"').fetchall()
    with create_index_engine(str(db)).begin() as conn:
        command.downgrade(alembic_config(conn), "0017")
    old = indexdb.connect(db)
    assert {row[0] for row in old.execute("SELECT name FROM sqlite_master WHERE name IN ('texts', 'document_hashes')")} == {"document_hashes"}
    assert old.execute('SELECT * FROM "documents" ORDER BY "docid"').fetchall() == documents
    old.execute("CREATE VIRTUAL TABLE temp.g USING fts5vocab(main, document_grams, 'instance')")
    assert {row[0] for row in old.execute("SELECT DISTINCT doc FROM temp.g")} == {row[0] for row in documents}  # grams per document
    old.close()

    engine = open_writer(str(db), allow_upgrade=True)
    engine.dispose()
    upgraded = indexdb.connect(db)
    assert upgraded.execute('SELECT * FROM "documents" ORDER BY "docid"').fetchall() == documents
    distinct = {row[-1] for row in documents}
    assert upgraded.execute('SELECT count(*) FROM "texts"').fetchone()[0] == len(distinct) < len(documents)
    upgraded.close()
    state = index_state(str(db))
    assert state["consistency"] == [] and state["grams"]
    assert diff_states(state, index_state(str(cold))) == []


def test_migration_0021_indexes_each_distinct_text_once_with_the_same_matches_and_search_pages(tmp_path: Path) -> None:
    """An index at 0020 (``documents_fts``, a row per document) upgrades to ``texts_fts`` (a row
    per distinct text): the same documents match with the same marks, every search page is the
    same, and the index equals a cold build's; the downgrade gives the per-document table back."""
    from tests.indexstate import diff_states, fts_consistent, index_state

    db, cold = _two_builds(tmp_path, " session")
    expressions = ['"session"', '"shared" "boilerplate"', '"s"*', '"own text"', '"数据库"']
    requests = [{"query": "session"}, {"query": "shared boilerplate"}, {"query": "own text", "limit": 1}, {"query": "repeated"}]

    with create_index_engine(str(db)).begin() as conn:
        command.downgrade(alembic_config(conn), "0020")
    old = indexdb.connect(db)
    names = {row[0] for row in old.execute("SELECT name FROM sqlite_master WHERE name IN ('documents_fts', 'texts_fts', 'text_contents')")}
    assert names == {"documents_fts"}
    old.execute("INSERT INTO documents_fts (documents_fts, rank) VALUES ('integrity-check', 1)")
    assert old.execute('SELECT count(*) FROM "documents_fts_docsize"').fetchone()[0] == old.execute('SELECT count(*) FROM "documents"').fetchone()[0]
    old.close()
    before = _marked_documents(db, expressions)
    assert all(before) and len(before[1]) == 4  # the shared text matches in every session

    engine = open_writer(str(db), allow_upgrade=True)
    engine.dispose()
    upgraded = indexdb.connect(db)
    names = {row[0] for row in upgraded.execute("SELECT name FROM sqlite_master WHERE name IN ('documents_fts', 'texts_fts', 'text_contents')")}
    assert names == {"texts_fts", "text_contents"}
    assert upgraded.execute('SELECT count(*) FROM "texts_fts_docsize"').fetchone()[0] == upgraded.execute('SELECT count(*) FROM "texts"').fetchone()[0]
    upgraded.close()
    assert _marked_documents(db, expressions) == before
    assert fts_consistent(str(db))
    state = index_state(str(db))
    assert state["consistency"] == [] and diff_states(state, index_state(str(cold))) == []
    assert _pages_of(db, requests) == _pages_of(cold, requests)


def _pages_of(db: Path, requests: list[dict[str, object]]) -> list[object]:
    """Each request's first page across sessions and within ``s2``, without cursors (they name the index)."""
    from readmodel.search.sqlite import sqlite_search

    search = sqlite_search(str(db))
    try:
        found = [msgspec.to_builtins(search.search_sessions(request)) for request in requests]
        found += [msgspec.to_builtins(search.search_events({"sessionId": "s2", **request})) for request in requests]
        return [{key: value for key, value in page.items() if key != "nextCursor"} for page in found]
    finally:
        search.close()
