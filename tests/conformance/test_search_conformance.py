"""Every golden search, every page, equals the reference's items, order and snippets.

Pages are followed through ``nextCursor`` to the end with the golden page size.
The synthetic corpus is indexed with the reference's closer wording swapped in
(read from its own golden output), because closer text takes part in ranking.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from indexer import repair
from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.database import open_writer
from readmodel.errors import SessionQueryError
from readmodel.search import SessionSearch
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT, golden, reference_closer_texts


def build_index(path: Path, root: Path) -> str:
    engine = open_writer(str(path))
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
    engine.dispose()
    return str(path)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, SessionSearch]:
    base = tmp_path_factory.mktemp("search-conformance")
    real = build_index(base / "real.db", ZSTD_ROOT)
    texts = reference_closer_texts()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(repair, "OUTCOME_UNKNOWN_TEXT", texts["TOOL_OUTCOME_UNKNOWN"])
        patch.setattr(repair, "NOT_STARTED_TEXT", texts["TOOL_NOT_STARTED"])
        synthetic = build_index(base / "synthetic.db", SYNTHETIC_ROOT)
    return {False: SessionSearch(real), True: SessionSearch(synthetic)}


def _pages(search: Any, request: dict[str, Any]) -> tuple[list[Any], list[int]]:
    items: list[Any] = []
    sizes: list[int] = []
    cursor = None
    while True:
        page = search(dict(request, cursor=cursor) if cursor else request)
        sizes.append(len(page.items))
        items.extend(page.items)
        if page.next_cursor is msgspec.UNSET:
            return items, sizes
        cursor = page.next_cursor


def _error(exc: SessionQueryError) -> dict[str, str]:
    return {"code": exc.code, "message": exc.message}


@pytest.mark.parametrize("synthetic", [False, True], ids=["corpus", "synthetic"])
def test_every_golden_session_search(indexes: dict[bool, SessionSearch], synthetic: bool) -> None:
    spec = golden("search-sessions", synthetic)
    search = indexes[synthetic]
    assert len(spec["queries"]) == 75
    for query in spec["queries"]:
        request = {"query": query["query"], "limit": spec["limit"]}
        if "error" in query:
            with pytest.raises(SessionQueryError) as caught:
                _pages(search.search_sessions, request)
            assert {k: query["error"][k] for k in ("code", "message")} == _error(caught.value), query["note"]
            continue
        hits, sizes = _pages(search.search_sessions, request)
        got = [
            {"sessionId": h.best_match.session_id, "seq": h.best_match.seq, "type": h.best_match.type, "surface": h.best_match.surface,
             "time": h.best_match.time, "live": h.live, "persisted": h.persisted, "snippet": h.best_match.snippet}
            for h in hits
        ]
        assert (got, sizes, len(got)) == (query["items"], query["pageSizes"], query["hitCount"]), query["note"]
        assert all(h.header["id"] == h.best_match.session_id for h in hits)


@pytest.mark.parametrize("synthetic", [False, True], ids=["corpus", "synthetic"])
def test_every_golden_event_search(indexes: dict[bool, SessionSearch], synthetic: bool) -> None:
    spec = golden("search-events", synthetic)
    search = indexes[synthetic]
    targets = 0
    for query in spec["queries"]:
        for target in query["targets"]:
            targets += 1
            request = {"sessionId": target["sessionId"], "query": query["query"], "limit": spec["limit"]}
            if "error" in target:
                with pytest.raises(SessionQueryError) as caught:
                    _pages(search.search_events, request)
                assert {k: target["error"][k] for k in ("code", "message")} == _error(caught.value)
                continue
            hits, sizes = _pages(search.search_events, request)
            got = [{"sessionId": h.session_id, "seq": h.seq, "type": h.type, "surface": h.surface, "time": h.time, "snippet": h.snippet} for h in hits]
            assert (got, sizes, len(got)) == (target["items"], target["pageSizes"], target["hitCount"]), query["note"]
    assert targets > 75
