"""Sessions held only in a host's live overlay are redacted as indexed ones are: no search,
snippet, ``filterEvents`` document or model tool shows a planted secret under ``index``/``all``;
``off`` keeps them as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from readmodel.live import InMemoryLiveSource
from readmodel.projection.secrets import marker
from readmodel.query import SessionQuery
from readmodel.store.sqlite import IndexStore
from readmodel.tools import SessionTools, ToolCaller
from tests.secrets.planted import CWD, SECRETS, build, leaks, planted_events, search_terms, streamed_batches, write_root


def _live() -> InMemoryLiveSource:
    live = InMemoryLiveSource()
    for index, planted in enumerate(SECRETS):
        live.create({"version": 0, "id": f"live-{index:02d}", "createdAt": 500 + index, "cwd": CWD, "delegationDepth": 0}, planted_events(planted, index))
        streamed = [event for batch in streamed_batches(planted, index) for event in batch]
        live.create({"version": 0, "id": f"live-streamed-{index:02d}", "createdAt": 600 + index, "cwd": CWD, "delegationDepth": 0}, streamed)
    return live


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real index (of other sessions) under the live overlay."""
    tmp = tmp_path_factory.mktemp("live")
    root = tmp / "root"
    write_root(root)
    return build(tmp, root=root)[1]


@pytest.mark.parametrize("policy", ["index", "all"])
def test_live_sessions_are_redacted_in_search_snippets_filters_and_tools(indexed: str, policy: str) -> None:
    query = SessionQuery(IndexStore.open(indexed), _live(), None, policy)  # type: ignore[arg-type]
    tools = SessionTools(query, redact=policy)  # type: ignore[arg-type]
    for index, planted in enumerate(SECRETS):
        me = f"live-{index:02d}"
        for term in search_terms(planted):
            assert query.search_sessions({"query": term}).items == [], (planted.kind, term)
            assert query.search_events({"sessionId": me, "query": term}).items == [], (planted.kind, term)
            assert query.filter_events(me, [{"kind": "text", "text": term}]) == [], (planted.kind, term)
        hits = query.search_sessions({"query": f"betaword{index}"}).items
        assert sorted(hit.header["id"] for hit in hits) == [f"live-{index:02d}", f"planted-{index:02d}"]  # the words around stay found
        snippets = " ".join(hit.snippet for hit in query.search_events({"sessionId": me, "query": f"betaword{index}"}).items)
        assert marker(planted.kind) in snippets and not leaks(snippets, planted.secret)
        documents = json.dumps([document.text for document in query.filter_events(me, [{"kind": "text", "text": f"alphaword{index}"}])])
        assert marker(planted.kind) in documents and not leaks(documents, planted.secret)
        caller = ToolCaller("caller", CWD, ())
        for session in (me, f"live-streamed-{index:02d}"):
            count = len(query.read_session(session, redact=False).events)
            outputs = [tools.call("session_event_read", {"session_id": session, "seq": seq}, caller).text for seq in range(count)]
            outputs.append(tools.call("session_search", {"query": f"alphaword{index}"}, caller).text)
            assert not leaks("\n".join(outputs), planted.secret), (planted.kind, session)
        raw = json.dumps(query.read_session(f"live-streamed-{index:02d}").events)
        assert bool(leaks(raw, planted.secret)) is (policy == "index"), planted.kind  # raw reads: only `all` redacts


def test_off_keeps_live_sessions_as_written(indexed: str) -> None:
    query = SessionQuery(IndexStore.open(indexed), _live(), None, "off")  # type: ignore[arg-type]
    planted = SECRETS[1]
    ids = {hit.header["id"] for hit in query.search_sessions({"query": planted.secret}).items}
    assert "live-01" in ids


def test_live_only_engine_redacts_too() -> None:
    query = SessionQuery(None, _live(), None, "index")  # type: ignore[arg-type]
    planted = SECRETS[3]
    assert query.search_sessions({"query": planted.secret}).items == []
    assert query.search_sessions({"query": "alphaword3"}).items != []
