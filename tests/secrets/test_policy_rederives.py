"""``off`` keeps reference-exact documents; changing the policy re-derives them, and the
re-derived index equals a cold build under the new policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from readmodel.projection.secrets import index_fingerprint
from readmodel.query import SessionQuery
from readmodel.store.status import read_status
from readmodel.store.sqlite import IndexStore
from indexer.layout import Compression
from indexer.reconcile import Reconciler, ReconcileReport
from readmodel.store.database import open_writer
from tests.indexstate import diff_states, fts_consistent, index_state
from tests.secrets.planted import SECRETS, build, in_mode, search_modes, write_root, write_streamed_root
from tests import indexdb


def _documents(db: str) -> list[tuple]:
    return indexdb.connect(db).execute('SELECT "docid", "sid", "seq", "type", "surface", "length", "text" FROM "documents" ORDER BY "docid"').fetchall()


def _found(db: str, term: str) -> bool:
    return SessionQuery(IndexStore.open(db), None, None).search_sessions({"query": term}).items != []


def test_off_indexes_the_text_as_written(tmp_path: Path) -> None:
    _, db = build(tmp_path, "off")
    assert _found(db, SECRETS[1].secret)  # an AWS access key id
    assert "REDACTED" not in "".join(row[6] for row in _documents(db))
    assert indexdb.connect(db).execute('SELECT "redaction" FROM "index_meta"').fetchone() == ("off",)


def _reconcile(tmp: Path, root: Path, policy: str, workers: int) -> ReconcileReport:
    engine = open_writer(str(tmp / "index.db"))
    try:
        reconciler = Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, workers=workers, parallel_min_bytes=0, redact=policy)  # type: ignore[arg-type]
        return reconciler.reconcile()
    finally:
        engine.dispose()


def _answers(db: str) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Session ids and snippets each search mode answers for a few terms (secrets' middles included)."""
    engine = SessionQuery(IndexStore.open(db), None, None, "off")  # type: ignore[arg-type]
    terms = ["REDACTED", "alphaword3", "tailword4", SECRETS[1].middle, SECRETS[5].middle, "aws access"]
    return {
        (mode, term): [(hit.header["id"], hit.best_match.snippet) for hit in engine.search_sessions(in_mode({"query": term, "limit": 50}, mode)).items]
        for mode in search_modes()
        for term in terms
    }


PROBES = ("REDACTED", "alphaword3", "betaword7", "endplace9", "streamword2", "tailword4", "aws", "private")


@pytest.mark.parametrize("workers", [0, 2], ids=["writer", "workers"])
def test_switching_the_policy_rederives_every_document_like_a_cold_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    root = tmp_path / "root"
    write_root(root)
    write_streamed_root(root)
    db = str(tmp_path / "switched" / "index.db")
    (tmp_path / "switched").mkdir()
    _reconcile(tmp_path / "switched", root, "off", workers)
    monkeypatch.setenv("SESSIONQ_REDACT", "index")
    status = read_status(db)
    assert status["redaction"] == {"policy": "index", "fingerprint": index_fingerprint("index"), "stored": "off", "pending": True}
    report = _reconcile(tmp_path / "switched", root, "index", workers)
    # With workers every session's re-derivation is prepared by them, none by the writer alone.
    assert report.prepared == (2 * len(SECRETS) if workers else 0) and report.reloaded == 2 * len(SECRETS)
    assert read_status(db)["redaction"]["pending"] is False
    assert not _found(db, SECRETS[1].secret)
    _, cold = build(tmp_path / "cold", "index", root=root)
    assert diff_states(index_state(db, PROBES), index_state(cold, PROBES)) == []
    assert _documents(db) == _documents(cold)  # sids kept: the same docids as the cold build's
    assert fts_consistent(db)
    assert _answers(db) == _answers(cold)  # every search mode (its own index, if any) agrees
    # and back: off restores the reference-exact documents
    _reconcile(tmp_path / "switched", root, "off", workers)
    _, cold_off = build(tmp_path / "cold-off", "off", root=root)
    assert diff_states(index_state(db, PROBES), index_state(cold_off, PROBES)) == []
    assert _answers(db) == _answers(cold_off)
    assert _found(db, SECRETS[1].secret)
