"""``off`` keeps reference-exact documents; changing the policy re-derives them, and the
re-derived index equals a cold build under the new policy."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from readmodel.projection.secrets import index_fingerprint
from readmodel.query import SessionQuery
from readmodel.store.status import read_status
from readmodel.store.sqlite import IndexStore
from tests.secrets.planted import SECRETS, build


def _documents(db: str) -> list[tuple]:
    return sqlite3.connect(db).execute('SELECT "docid", "sid", "seq", "type", "surface", "length", "text" FROM "documents" ORDER BY "docid"').fetchall()


def _found(db: str, term: str) -> bool:
    return SessionQuery(IndexStore.open(db), None, None).search_sessions({"query": term}).items != []


def test_off_indexes_the_text_as_written(tmp_path: Path) -> None:
    _, db = build(tmp_path, "off")
    assert _found(db, SECRETS[1].secret)  # an AWS access key id
    assert "REDACTED" not in "".join(row[6] for row in _documents(db))
    assert sqlite3.connect(db).execute('SELECT "redaction" FROM "index_meta"').fetchone() == ("off",)


def test_switching_the_policy_rederives_every_document_like_a_cold_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, db = build(tmp_path / "switched", "off")
    monkeypatch.setenv("SESSIONQ_REDACT", "index")
    status = read_status(db)
    assert status["redaction"] == {"policy": "index", "fingerprint": index_fingerprint("index"), "stored": "off", "pending": True}
    build(tmp_path / "switched", "index", root=root)
    assert read_status(db)["redaction"]["pending"] is False
    assert not _found(db, SECRETS[1].secret)
    _, cold = build(tmp_path / "cold", "index", root=root)
    assert _documents(db) == _documents(cold)
    fts = "SELECT rowid FROM documents_fts WHERE documents_fts MATCH ? ORDER BY rowid"
    for term in ("REDACTED", "alphaword3", '"' + SECRETS[3].secret + '"'):
        assert sqlite3.connect(db).execute(fts, (term,)).fetchall() == sqlite3.connect(cold).execute(fts, (term,)).fetchall()
    # and back: off restores the reference-exact documents
    build(tmp_path / "switched", "off", root=root)
    _, cold_off = build(tmp_path / "cold-off", "off", root=root)
    assert _documents(db) == _documents(cold_off)
    assert _found(db, SECRETS[1].secret)
