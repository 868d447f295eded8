"""No tool output ever names a session of another workspace (reference corpus).

For every workspace of the corpus (and the workspace-less sessions), a caller
in it calls every tool: searches with common words and with every foreign id
guessed as a parent, traces of every session of the workspace, event traces
and reads of a few seqs, and direct attempts at every foreign session.  No
output may contain the id of a session outside the caller's workspace.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from readmodel.query import SessionQuery
from readmodel.tools import SessionTools, ToolCaller
from tests.tools.support import ListLogger, open_query

COMMON_WORDS = ("the", "a", "file", "error", "session")
SEQS = (0, 1, 5, 20)


@pytest.fixture(scope="module")
def corpus(corpus_db: str) -> Iterator[SessionQuery]:
    query = open_query(corpus_db)
    try:
        yield query
    finally:
        query.close()


def workspaces(query: SessionQuery) -> dict[Any, list[str]]:
    grouped: dict[Any, list[str]] = {}
    for record in query.list_sessions():
        grouped.setdefault(record.header.get("cwd"), []).append(record.header["id"])
    return grouped


def test_no_output_names_a_session_of_another_workspace(corpus: SessionQuery) -> None:
    groups = workspaces(corpus)
    assert len(groups) >= 3 and None in groups
    tools = SessionTools(corpus, {"maxSearchResults": 1000}, ListLogger())
    started = time.monotonic()
    calls = 0
    for cwd, members in groups.items():
        foreign = [session_id for other, ids in groups.items() if other != cwd for session_id in ids]
        me = members[0]
        caller = ToolCaller(me, cwd, corpus.read_session(me).events)
        outputs: list[str] = []

        def call(name: str, arguments: dict[str, Any]) -> None:
            nonlocal calls
            calls += 1
            outputs.append(tools.call(name, arguments, caller).text)

        for word in COMMON_WORDS:
            call("session_search", {"query": word})
        call("session_search", {"query": "the", "parent_session_ids": foreign + members, "include_root_sessions": True})
        call("session_search", {"query": "the", "session_ids": foreign + members})
        for session_id in [None, *members]:
            target = {} if session_id is None else {"session_id": session_id}
            call("session_trace", target)
            call("session_event_search", {**target, "query": "the"})
        for session_id in members[:4]:
            for seq in SEQS:
                call("session_event_trace", {"session_id": session_id, "seq": seq})
                call("session_event_read", {"session_id": session_id, "seq": seq, "before": 3, "after": 3})
        for session_id in foreign:
            call("session_trace", {"session_id": session_id})
        for session_id in foreign[:10]:
            call("session_event_search", {"session_id": session_id, "query": "the"})
            call("session_event_read", {"session_id": session_id, "seq": 1})
            call("session_event_trace", {"session_id": session_id, "seq": 1})
        blob = "\n".join(outputs)
        leaked = [session_id for session_id in foreign if session_id in blob]
        assert leaked == [], f"workspace {cwd!r} sees {leaked}"
        if cwd is not None:
            assert "Matching sessions" in blob or len(members) == 1
    assert calls > 500 and time.monotonic() - started < 40


def test_the_cross_workspace_lineage_of_the_corpus_is_redacted(corpus: SessionQuery) -> None:
    by_id = {record.header["id"]: record.header for record in corpus.list_sessions()}
    crossing = [
        header for header in by_id.values()
        if header.get("parentSession") is not None
        and by_id.get(header["parentSession"], {}).get("cwd") != header.get("cwd")
    ]
    assert crossing, "the corpus has a child whose parent is not in its workspace"
    tools = SessionTools(corpus)
    for header in crossing:
        text = tools.call("session_trace", {"session_id": header["id"]}, ToolCaller(None, header.get("cwd"))).text
        if header.get("cwd") is None:
            assert text.startswith("Error: ")
            continue
        assert header["parentSession"] not in text
        assert "further ancestors are not visible" in text
