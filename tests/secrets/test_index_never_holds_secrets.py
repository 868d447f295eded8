"""Under the default policy no search, snippet, document or model tool output holds a planted secret."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from readmodel.export.archive import Exporter
from readmodel.export.artifacts import AttachmentStore
from readmodel.projection.secrets import marker
from readmodel.query import SessionQuery
from readmodel.store.sqlite import IndexStore
from readmodel.tools import SessionTools, ToolCaller
from tests.secrets.planted import CWD, SECRETS, build, in_mode, search_modes, search_terms, session_id
from tests import indexdb


@pytest.fixture(scope="module", params=[0, 2], ids=["writer", "workers"])
def planted_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The planted corpus indexed by the writer alone, and by preparation workers."""
    return build(tmp_path_factory.mktemp("planted"), workers=request.param)


@pytest.fixture(scope="module")
def query(planted_index: tuple[Path, str]) -> SessionQuery:
    return SessionQuery(IndexStore.open(planted_index[1]), None, None)


def test_the_stored_documents_hold_markers_and_no_secret(planted_index: tuple[Path, str]) -> None:
    texts = [row[0] for row in indexdb.connect(planted_index[1]).execute('SELECT "text" FROM "documents"')]
    everything = "\n".join(texts)
    for planted in SECRETS:
        assert planted.secret not in everything and planted.middle not in everything, planted.kind
        assert marker(planted.kind) in everything, planted.kind


@pytest.mark.parametrize("mode", search_modes())
@pytest.mark.parametrize("planted", SECRETS, ids=lambda planted: planted.kind)
def test_no_search_finds_a_secret_or_its_middle(query: SessionQuery, planted, mode: str) -> None:
    index = SECRETS.index(planted)
    for term in search_terms(planted):
        assert query.search_sessions(in_mode({"query": term}, mode)).items == [], (planted.kind, term)
        assert query.search_events(in_mode({"sessionId": session_id(index), "query": term}, mode)).items == [], (planted.kind, term)
        assert query.filter_events(session_id(index), [{"kind": "text", "text": term}]) == [], (planted.kind, term)
    hits = query.search_sessions(in_mode({"query": f"endplace{index} "}, mode)).items
    assert session_id(index) in [hit.header["id"] for hit in hits]  # the words around it are found


@pytest.mark.parametrize("planted", SECRETS, ids=lambda planted: planted.kind)
def test_the_words_around_a_secret_stay_searchable_and_snippets_show_the_marker(query: SessionQuery, planted) -> None:
    index = SECRETS.index(planted)
    for word in (f"startplace{index}", f"middleplace{index}", f"endplace{index}", f"betaword{index}"):
        page = query.search_sessions({"query": word})
        assert [hit.header["id"] for hit in page.items] == [session_id(index)], word
    events = query.search_events({"sessionId": session_id(index), "query": f"betaword{index}"}).items
    snippets = " ".join(hit.snippet for hit in events)
    assert len(events) == 3  # the user message, the assistant message and the tool result
    assert "REDACTED" in snippets and planted.secret not in snippets and planted.middle not in snippets
    assert query.search_sessions({"query": f"REDACTED {planted.kind.split('-')[0]}"}).items != []


def test_model_tools_never_print_a_secret(query: SessionQuery) -> None:
    tools = SessionTools(query)
    for index, planted in enumerate(SECRETS):
        me = session_id(index)
        caller = ToolCaller("caller-session", CWD, tuple(query.read_session(me).events))
        outputs = [
            tools.call("session_search", {"query": f"betaword{index}"}, caller).text,
            tools.call("session_event_search", {"session_id": me, "query": f"alphaword{index}"}, caller).text,
            tools.call("session_trace", {"session_id": me}, caller).text,
        ]
        # Every event, the chunks (seqs 3 and 4, each holding half the secret) included.
        outputs += [tools.call("session_event_read", {"session_id": me, "seq": seq}, caller).text for seq in range(11)]
        joined = "\n".join(outputs)
        assert f"alphaword{index}" in joined and "Error" not in joined.split("\n")[0]
        assert planted.secret not in joined and planted.middle not in joined, planted.kind
        assert marker(planted.kind) in joined, planted.kind


def test_raw_reads_give_the_log_as_written(query: SessionQuery) -> None:
    for index, planted in enumerate(SECRETS):
        events = query.read_session(session_id(index)).events
        assert events[1]["data"]["content"][0]["text"].startswith(planted.text)


def _export(db: str, root: Path, target: Path, redact: bool) -> str:
    exporter = Exporter(db, lambda: SessionQuery(IndexStore.open(db), None, None), str(root), AttachmentStore(str(root / "media")), redact=redact)
    parts = []
    for index in range(len(SECRETS)):
        prepared = exporter.prepare(session_id(index))
        assert prepared is not None
        path = target / f"{index}.zip"
        path.write_bytes(b"".join(exporter.stream(session_id(index), prepared[1], False, prepared[0].path)))
        with zipfile.ZipFile(path) as archive:
            parts.append(archive.read("session.jsonl").decode())
    return "\n".join(parts)


def test_exports_are_as_written_by_default_and_scrubbed_on_request(planted_index: tuple[Path, str], tmp_path: Path) -> None:
    import json

    root, db = planted_index
    written = _export(db, root, tmp_path, redact=False)
    scrubbed_lines = _export(db, root, tmp_path, redact=True).splitlines()
    scrubbed = "\n".join(scrubbed_lines)  # chunk lines (each holding half a secret) included
    for planted in SECRETS:
        as_json = json.dumps(planted.secret)[1:-1]
        assert as_json in written, planted.kind
        assert as_json not in scrubbed and planted.middle not in scrubbed, planted.kind
        assert marker(planted.kind) in scrubbed
    for line in filter(None, scrubbed_lines):
        json.loads(line)  # every scrubbed line is still JSON
