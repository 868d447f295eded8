"""The substring gram index: built by migration 0009 for an existing index, reported by status,
and never holding a redacted secret."""

from __future__ import annotations

from pathlib import Path

from alembic import command

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.projection.grams import document_tokens, scheme_fingerprint
from readmodel.store.database import create_index_engine, open_writer
from readmodel.store.revisions import alembic_config, current_revision
from readmodel.store.schema import SCHEMA_REVISION, TEXT_EXPRESSION
from readmodel.store.status import format_status, read_status
from tests.indexstate import diff_states, index_state
from tests.logfactory import header, simple_turn, write_log
from tests import indexdb


def _root(root: Path) -> None:
    write_log(root, header("cjk"), [simple_turn(0, "数据库索引需要重建 日本語の検索 🎉")])
    write_log(root, header("code"), [simple_turn(0, "why does tearDown raise OutcomeUnknown? self.x -> C++ :: /home/dev/app.py")])


def _build(root: Path, db: Path) -> None:
    engine = open_writer(str(db))
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, workers=0).reconcile()
    engine.dispose()


def test_the_migration_builds_the_gram_index_of_an_existing_index(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _root(root)
    db, cold = tmp_path / "index.db", tmp_path / "cold.db"
    _build(root, db)
    _build(root, cold)
    engine = create_index_engine(str(db))
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0008")
    engine.dispose()
    conn = indexdb.connect(db)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE 'document_grams%'").fetchone() == (0,)
    conn.close()

    engine = open_writer(str(db), allow_upgrade=True)  # runs 0009: builds from the stored documents
    with engine.connect() as conn:
        assert current_revision(conn) == SCHEMA_REVISION  # 0009 and the revisions after it
    engine.dispose()
    upgraded = index_state(str(db))
    assert upgraded["consistency"] == [] and upgraded["grams"]
    assert not diff_states(upgraded, index_state(str(cold)))
    meta = indexdb.connect(db).execute('SELECT "grams" FROM "index_meta"').fetchone()
    assert meta == (scheme_fingerprint(),)


def test_status_reports_the_gram_index_and_when_it_is_pending(tmp_path: Path) -> None:
    _root(tmp_path / "root")
    db = tmp_path / "index.db"
    _build(tmp_path / "root", db)
    status = read_status(str(db))
    entry = status["substringIndex"]
    assert entry["pending"] is False and entry["stored"] == entry["scheme"] == scheme_fingerprint()
    assert entry["documents"] == status["documents"] > 0 and entry["bytes"] > 0
    assert "substrings  " in format_status(status) and "documents indexed" in format_status(status)
    conn = indexdb.connect(db)
    conn.execute("UPDATE index_meta SET grams = NULL")
    conn.commit()
    conn.close()
    status = read_status(str(db))
    assert status["substringIndex"]["pending"] is True and status["substringIndex"]["documents"] == 0
    assert "index pending" in format_status(status)


def test_grams_come_from_the_redacted_text(tmp_path: Path) -> None:
    from tests.secrets.planted import SECRETS, build

    _, db = build(tmp_path, workers=2)
    conn = indexdb.connect(db)
    conn.execute("CREATE VIRTUAL TABLE temp.g USING fts5vocab(main, document_grams, 'instance')")
    stored: dict[int, set[str]] = {}
    for term, doc in conn.execute("SELECT term, doc FROM temp.g"):
        stored.setdefault(doc, set()).add(term)
    texts = dict(conn.execute(f'SELECT t."id", {TEXT_EXPRESSION} FROM "texts" t').fetchall())  # the grams' rows (schema 0018)
    assert stored == {text_id: set(document_tokens(text).split()) for text_id, text in texts.items()}
    for planted in SECRETS:
        # The secret's own words are in no document's grams: its text was never gram-ed.
        secret_words = set(document_tokens(planted.middle).split()) - set().union(*stored.values())
        assert secret_words, planted.kind
