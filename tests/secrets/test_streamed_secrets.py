"""A secret streamed in pieces (``assistant/chunk`` events, packed chunk rows) leaves no piece of
itself in a redacted read, a model tool's output or a ``--redact all`` export.

The rules first (every cut of every planted secret, pure functions), then a real index of
streamed sessions read through the engine, the tools, JSON-RPC, HTTP and the export.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.packedrows import expand_row
from indexer.writer import batch_bytes
from readmodel.export.archive import Exporter
from readmodel.export.artifacts import AttachmentStore
from readmodel.projection.redaction import list_reader, redact_events, redact_pieces, redacted_log_lines, redacted_window
from readmodel.projection.secrets import marker, redact
from readmodel.query import SessionQuery
from readmodel.rpc import Dispatcher
from readmodel.store.sqlite import IndexStore
from readmodel.tools import SessionTools, ToolCaller
from tests.logfactory import chunk, step_end, step_start, turn_start
from tests.secrets.planted import CWD, SECRETS, build, in_mode, leaks, search_modes, search_terms, streamed_batches, streamed_id, write_streamed_root

CONTEXTS = [("", ""), ("before ", " after"), ('{"k": "', '"}')]


def _check_pieces(text: str, secret: str, cuts: list[int]) -> None:
    bounds = [0, *cuts, len(text)]
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    out = redact_pieces([0] * len(pieces), pieces)
    assert "".join(out) == redact(text), cuts
    for piece in out:
        assert not leaks(piece, secret, 6), (cuts, piece)


@pytest.mark.parametrize("planted", SECRETS, ids=lambda planted: planted.kind)
def test_every_two_piece_cut_of_a_secret_leaves_no_piece_of_it(planted) -> None:
    for before, after in CONTEXTS:
        text = before + planted.text + after
        for cut in range(1, len(text)):
            _check_pieces(text, planted.secret, [cut])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_three_piece_cut_of_a_secret_leaves_no_piece_of_it(data: st.DataObject) -> None:
    planted = data.draw(st.sampled_from(SECRETS))
    before, after = data.draw(st.sampled_from(CONTEXTS))
    text = before + planted.text + after
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), min_size=2, max_size=2)))
    _check_pieces(text, planted.secret, cuts)


def test_pieces_of_different_blocks_are_redacted_apart() -> None:
    key = SECRETS[1].secret  # an AWS access key id
    # Two halves in two different blocks (text index 0 and 1) are no secret; together in one they are.
    assert redact_pieces([0, 1], [key[:10], key[10:]]) == [key[:10], key[10:]]
    assert redact_pieces([0, 0], [key[:10], key[10:]]) == [marker("aws-access-key"), ""]


def test_events_with_lone_surrogates_or_huge_integers_are_redacted_too() -> None:
    key = SECRETS[1].secret
    event = {"type": "user/message", "seq": 1, "time": 2**70, "data": {"text": f"x\ud800 é {key}"}}
    assert redact_events([event]) == [{**event, "data": {"text": f"x\ud800 é {marker('aws-access-key')}"}}]
    assert redact_events([{"type": "step/start", "seq": 2}])[0] == {"type": "step/start", "seq": 2}


def _events(index: int) -> list[dict]:
    return [event for batch in streamed_batches(SECRETS[index], index) for event in batch]


@pytest.mark.parametrize("index", range(len(SECRETS)), ids=[planted.kind for planted in SECRETS])
def test_a_window_read_redacts_each_piece_as_the_whole_log_does(index: int) -> None:
    events = _events(index)
    whole = redact_events(events)
    for first in range(len(events)):
        for last in (first, min(len(events) - 1, first + 2)):
            assert redacted_window(list_reader(events), first, last, len(events), page=2) == whole[first : last + 1]


@pytest.mark.parametrize("index", range(len(SECRETS)), ids=[planted.kind for planted in SECRETS])
def test_export_lines_and_events_agree_piece_for_piece(index: int) -> None:
    batches = streamed_batches(SECRETS[index], index)
    text = b"".join(batch_bytes(batch) for batch in batches).decode()
    lines = list(redacted_log_lines(iter(text.splitlines(keepends=True))))
    expanded = []
    for line in lines:
        value = json.loads(line)  # every redacted line is still JSON
        expanded.extend(expand_row(value) if value["type"].endswith("-chunks") else [value])
    assert expanded == redact_events([event for batch in batches for event in batch])
    assert not leaks("".join(lines), SECRETS[index].secret)
    assert '"type":"text-chunks"' in text  # the pieces really were packed rows


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_cut_into_a_packed_row_reads_and_exports_alike_without_the_secret(data: st.DataObject) -> None:
    planted = data.draw(st.sampled_from(SECRETS))
    text = f"words before {planted.text} words after"
    cuts = sorted(data.draw(st.lists(st.integers(1, len(text) - 1), min_size=2, max_size=4, unique=True)))
    bounds = [0, *cuts, len(text)]
    events = [turn_start(0), step_start(1)]
    events += [chunk(2 + number, text[a:b]) for number, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    events.append(step_end(len(events)))
    raw = batch_bytes(events).decode()
    assert '"type":"text-chunks"' in raw  # three or more pieces: one packed row
    lines = list(redacted_log_lines(iter(raw.splitlines(keepends=True))))
    expanded = [member for line in lines for value in [json.loads(line)] for member in (expand_row(value) if value["type"].endswith("-chunks") else [value])]
    assert expanded == redact_events(events)
    assert not leaks("".join(lines), planted.secret, 6)
    assert "".join(event["data"]["chunk"]["text"] for event in expanded[2:-1]) == redact(text)


# --------------------------------------------------------------------------- a real index


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("streamed")
    root = tmp / "root"
    write_streamed_root(root)
    return build(tmp, root=root)


@pytest.fixture(scope="module")
def query(streamed: tuple[Path, str]) -> SessionQuery:
    return SessionQuery(IndexStore.open(streamed[1]), None, None)


def test_the_log_as_written_holds_the_pieces(query: SessionQuery) -> None:
    # Without redaction each piece is as written, and no single chunk holds the whole secret.
    for index, planted in enumerate(SECRETS):
        events = query.read_session(streamed_id(index)).events
        chunks = [json.dumps(event) for event in events if event["type"] == "assistant/chunk"]
        assert len(chunks) == 8
        assert all(json.dumps(planted.secret)[1:-1] not in chunk for chunk in chunks)
        assert "".join(event["data"]["chunk"].get("text", "") for event in events[3:9]).count(planted.secret) == 1


@pytest.mark.parametrize("mode", search_modes())
def test_no_search_finds_a_streamed_secret_while_the_words_around_it_are_found(query: SessionQuery, mode: str) -> None:
    for index, planted in enumerate(SECRETS):
        me = streamed_id(index)
        for term in search_terms(planted):
            assert query.search_sessions(in_mode({"query": term}, mode)).items == [], (planted.kind, term, mode)
            assert query.search_events(in_mode({"sessionId": me, "query": term}, mode)).items == [], (planted.kind, term, mode)
        hits = query.search_events(in_mode({"sessionId": me, "query": f"tailword{index}"}, mode)).items
        snippets = " ".join(hit.snippet for hit in hits)
        assert hits and marker(planted.kind) in snippets and not leaks(snippets, planted.secret), (planted.kind, mode)


def test_model_tools_never_show_a_piece_of_a_streamed_secret(query: SessionQuery) -> None:
    tools = SessionTools(query)
    for index, planted in enumerate(SECRETS):
        me = streamed_id(index)
        caller = ToolCaller("caller-session", CWD, tuple(query.read_session(me).events))
        count = len(query.read_session(me).events)
        outputs = [tools.call("session_event_read", {"session_id": me, "seq": seq}, caller).text for seq in range(count)]
        outputs.append(tools.call("session_event_read", {"session_id": me, "seq": 5, "before": 2, "after": 2}, caller).text)
        joined = "\n".join(outputs)
        assert "Error" not in joined and f"streamword{index}" in joined and f"tailword{index}" in joined
        assert not leaks(joined, planted.secret), planted.kind
        assert marker(planted.kind) in joined


def test_redacted_reads_agree_and_hold_no_piece(query: SessionQuery) -> None:
    for index, planted in enumerate(SECRETS):
        me = streamed_id(index)
        whole = query.read_session(me, redact=True).events
        assert not leaks(json.dumps(whole), planted.secret), planted.kind
        for seq in range(len(whole)):
            assert query.read_event({"sessionId": me, "seq": seq}, redact=True).target == whole[seq]
        assert query.read_event_range(me, 4, 3, redact=True).events == whole[4:7]
        pieces = [event["data"]["chunk"]["text"] for event in whole[3:9]]
        assert marker(planted.kind) in "".join(pieces) and "".join(pieces).startswith(f"streamword{index} ")


def test_rpc_reads_redact_on_request(query: SessionQuery) -> None:
    dispatcher = Dispatcher(query)
    planted, me = SECRETS[3], streamed_id(3)

    def call(method: str, **params: object) -> str:
        return dispatcher.handle({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"sessionId": me, **params}}).decode()

    assert leaks(call("readSession"), planted.secret)  # as written by default
    for method, params in (("readSession", {}), ("readEvent", {"seq": 5}), ("readEventRange", {"startSeq": 3, "limit": 8}), ("readSurface", {})):
        answer = call(method, redact="all", **params)
        assert '"result"' in answer and not leaks(answer, planted.secret), method
    assert '"code":-32602' in call("readSession", redact="some")


def _zip_text(data: bytes, path: Path) -> str:
    path.write_bytes(data)
    with zipfile.ZipFile(path) as archive:
        return "\n".join(archive.read(name).decode() for name in archive.namelist())


def test_the_redacted_export_holds_no_piece_of_any_secret(streamed: tuple[Path, str], tmp_path: Path) -> None:
    root, db = streamed
    exporter = Exporter(db, lambda: SessionQuery(IndexStore.open(db), None, None), str(root), AttachmentStore(str(tmp_path)))
    for index, planted in enumerate(SECRETS):
        for redacted in (False, True):
            prepared = exporter.prepare(streamed_id(index), redact=redacted)
            assert prepared is not None
            text = _zip_text(b"".join(exporter.stream(streamed_id(index), prepared[1], False, prepared[0].path, redact=redacted)), tmp_path / "x.zip")
            assert bool(leaks(text, planted.secret)) is not redacted, (planted.kind, redacted)
        assert marker(planted.kind) in text
        for line in filter(None, text.splitlines()):
            json.loads(line)


def test_http_export_and_reads_take_the_redact_option(streamed: tuple[Path, str], tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from readmodel.http.app import create_app

    root, db = streamed
    client = TestClient(create_app(db, root=str(root), attachments=str(tmp_path), port=8765), base_url="http://127.0.0.1:8765")
    planted, me = SECRETS[0], streamed_id(0)
    plain = client.get("/api/session.export", params={"sessionId": me})
    scrubbed = client.get("/api/session.export", params={"sessionId": me, "redact": "all"})
    assert plain.status_code == scrubbed.status_code == 200
    assert leaks(_zip_text(plain.content, tmp_path / "a.zip"), planted.secret)
    assert not leaks(_zip_text(scrubbed.content, tmp_path / "b.zip"), planted.secret)
    assert client.get("/api/session.export", params={"sessionId": me, "redact": "yes"}).status_code == 400
    read = client.get("/api/rpc/readEvent", params={"sessionId": me, "seq": "4", "redact": "all"})
    assert read.status_code == 200 and not leaks(read.text, planted.secret)
    document = client.get("/api/openapi.json").json()
    names = [parameter["name"] for parameter in document["paths"]["/api/session.export"]["get"]["parameters"]]
    assert "redact" in names
    assert document["paths"]["/api/rpc/readSession"]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]["redact"]["enum"] == ["index", "all", "off"]


def test_the_html_transcript_takes_the_redact_option_and_the_server_policy(streamed: tuple[Path, str], tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from readmodel.http.app import create_app

    root, db = streamed
    planted, me = SECRETS[2], streamed_id(2)
    for server_policy in (None, "all"):
        client = TestClient(
            create_app(db, root=str(root), attachments=str(tmp_path), port=8765, redact=server_policy), base_url="http://127.0.0.1:8765"
        )
        for asked in (None, "off", "all"):
            params = {"sessionId": me, "includeLogOnly": "true", **({"redact": asked} if asked else {})}
            page = client.get("/api/session.html", params=params)
            assert page.status_code == 200, page.text
            redacted = server_policy == "all" or asked == "all"
            assert bool(leaks(page.text, planted.secret)) is not redacted, (server_policy, asked)
            assert (marker(planted.kind) in page.text) is redacted
        bad = client.get("/api/session.html", params={"sessionId": me, "redact": "yes"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_PARAMS"
    document = client.get("/api/openapi.json").json()
    assert "redact" in [parameter["name"] for parameter in document["paths"]["/api/session.html"]["get"]["parameters"]]


def test_the_server_policy_all_redacts_reads_whatever_a_request_asks(streamed: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONQ_REDACT", "all")
    engine = SessionQuery(IndexStore.open(streamed[1]), None, None)
    planted, me = SECRETS[5], streamed_id(5)
    assert not leaks(json.dumps(engine.read_session(me).events), planted.secret)
    answer = Dispatcher(engine).handle({"jsonrpc": "2.0", "id": 1, "method": "readSession", "params": {"sessionId": me, "redact": "off"}})
    assert answer is not None and not leaks(answer.decode(), planted.secret)
    assert leaks(json.dumps(engine.read_session(me, redact=False).events), planted.secret)  # the library call decides


def test_a_server_started_with_all_scrubs_every_read_and_export(streamed: tuple[Path, str], tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from readmodel.http.app import create_app

    root, db = streamed
    client = TestClient(create_app(db, root=str(root), attachments=str(tmp_path), port=8765, redact="all"), base_url="http://127.0.0.1:8765")
    planted, me = SECRETS[7], streamed_id(7)
    export = client.get("/api/session.export", params={"sessionId": me, "redact": "off"})
    assert export.status_code == 200 and not leaks(_zip_text(export.content, tmp_path / "c.zip"), planted.secret)
    read = client.post("/api/rpc/readSession", json={"sessionId": me})
    assert read.status_code == 200 and not leaks(read.text, planted.secret) and marker(planted.kind) in read.text


def test_a_chunk_run_past_the_export_buffer_is_redacted_in_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    import readmodel.projection.redaction as redaction

    monkeypatch.setattr(redaction, "RUN_BUFFER_LIMIT", 200)  # a few chunk lines per part
    events = [turn_start(0), step_start(1)] + [chunk(2 + n, f"piece{n} ") for n in range(40)]
    events += [chunk(42, f"then {SECRETS[1].secret} whole"), step_end(43)]
    raw = batch_bytes(events, pack=False).decode()
    lines = list(redacted_log_lines(iter(raw.splitlines(keepends=True))))
    assert len(lines) == len(events) and all(json.loads(line) for line in lines)
    assert SECRETS[1].secret not in "".join(lines) and marker("aws-access-key") in lines[-2]
    assert "".join(lines[:-2]) == "".join(raw.splitlines(keepends=True)[:-2])  # nothing else changed


def test_a_secret_spelled_with_json_escapes_is_redacted_in_an_export_line() -> None:
    key = SECRETS[1].secret
    escaped = "".join(f"\\u{ord(char):04x}" for char in key)
    line = '{"type":"user/message","seq":1,"data":{"text":"key ' + escaped + ' \\ud800 end"}}\n'
    (out,) = redacted_log_lines(iter([line]))
    assert json.loads(out)["data"]["text"] == f"key {marker('aws-access-key')} \ud800 end" and out.endswith("}\n")
    plain = '{"type":"user/message","seq":1,"data":{"text":"caf\\u00e9 \\ud800"}}\n'
    assert list(redacted_log_lines(iter([plain]))) == [plain]  # escapes without a secret: byte for byte
