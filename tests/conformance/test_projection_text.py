"""Semantic documents and titles of every corpus session equal the reference's answers.

``filter-events.json`` holds ``filterEvents(sessionId, [])`` for each session:
every document with its seq, type, surface and exact extracted text.
``read-title.json`` holds the folded title snapshot (or ``null``).

The one designed difference: synthetic crash-closer tool results carry
sessionq's own wording (synthetic/README.md), so for those documents (message id
``interrupted-tool-result-...``) everything but the text is compared, and the
text is checked to be ours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from indexer.reader import inspect_view, read_log
from indexer.repair import is_closer_text
from readmodel.projection.extraction import build_documents
from readmodel.projection.surface import classify_events
from readmodel.projection.titles import fold_title
from readmodel.core.vocabulary import to_builtins
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT, golden_by_session, require_corpus

require_corpus()

CLOSER_ID_PREFIX = "interrupted-tool-result-"


def _views(root: Path) -> dict[str, dict[str, Any]]:
    """``{session id: inspect view}`` for every transcript under ``root``."""
    views: dict[str, dict[str, Any]] = {}
    for path in sorted(root.glob("*/*/session.jsonl.zstd")):
        view = inspect_view(read_log(path))
        views[view["session"]["id"]] = view
    return views


def _is_closer(event: dict[str, Any]) -> bool:
    if event["type"] != "tool/result":
        return False
    message_id = event["data"]["message"]["id"]
    return type(message_id) is str and message_id.startswith(CLOSER_ID_PREFIX)


@pytest.fixture(scope="module", params=[False, True], ids=["real", "synthetic"])
def corpus(request: pytest.FixtureRequest) -> tuple[bool, dict[str, dict[str, Any]]]:
    synthetic: bool = request.param
    return synthetic, _views(SYNTHETIC_ROOT if synthetic else ZSTD_ROOT)


def test_every_semantic_document_matches(corpus: tuple[bool, dict[str, dict[str, Any]]]) -> None:
    synthetic, views = corpus
    expected = golden_by_session("filter-events", synthetic)
    assert set(views) == set(expected)
    checked = closers = 0
    for session_id, view in views.items():
        events = view["events"]
        documents = build_documents(session_id, events, classify_events(events))
        want = expected[session_id]["documents"]
        got = [{"seq": d.seq, "type": d.type, "surface": d.surface, "text": d.text} for d in documents]
        assert [d["seq"] for d in got] == [d["seq"] for d in want], session_id
        for document, golden_document, struct in zip(got, want, documents, strict=True):
            assert struct.session_id == session_id
            assert struct.time == events[struct.seq]["time"]
            if synthetic and _is_closer(events[document["seq"]]):
                # Our closer wording differs by design; everything else must not.
                closers += 1
                assert {k: v for k, v in document.items() if k != "text"} == {
                    k: v for k, v in golden_document.items() if k != "text"
                }, (session_id, document["seq"])
                closer_text = events[document["seq"]]["data"]["message"]["content"][0]["content"][0]["text"]
                assert is_closer_text(closer_text)
                assert document["text"].startswith(closer_text)
            else:
                assert document == golden_document, (session_id, document["seq"])
            checked += 1
    assert checked == sum(len(entry["documents"]) for entry in expected.values())
    if synthetic:
        assert closers > 0, "the synthetic corpus has crash-closer documents"


def test_every_title_matches(corpus: tuple[bool, dict[str, dict[str, Any]]]) -> None:
    synthetic, views = corpus
    expected = golden_by_session("read-title", synthetic)
    assert set(views) == set(expected)
    for session_id, view in views.items():
        snapshot = fold_title(view["events"])
        assert (None if snapshot is None else to_builtins(snapshot)) == expected[session_id]["title"], session_id
