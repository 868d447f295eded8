"""The HTML transcript export: one self-contained file, the same from the library,
``sessionq export --html`` and ``GET /api/session.html``.

What a reader of the file gets: no external resource (nothing to load: no
``src=``, no stylesheet link, no ``@import``, no ``url()``; the only links are
anchors inside the file and the messages' own http(s) links), no script, a
hostile message inert, markdown as the page renders it, tool calls paired with
their results, reasoning and long outputs collapsed, log-only events left out
by default, CJK and emoji as written.  The browser side (Chromium opening the
file) is in ``test_export_html_browser.py``.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.cli import main as cli
from readmodel.export.transcript import TranscriptOptions, prepare_transcript, session_title
from readmodel.query import SessionQuery
from tests.http.conftest import Site
from tests.http.test_browser_daily import LONG_ID, OUTPUT, READABLE, readable_events
from tests.logfactory import assistant, header, tool_result, user, write_log

WHEN = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2  # a GitHub token shape the secret rules detect
SECRET = SECRET[:40]


@pytest.fixture
def readable(site: Site) -> Site:
    write_log(site.root, header(READABLE, 0, cwd="/home/demo/読む"), [readable_events()])
    failing = [
        user(0, f"run the failing check; token {SECRET}"),
        assistant(1, "", calls=[("call-x", "bash", '{"command":"false"}')]),
        tool_result(2, "call-x", "exit status 1", error={"message": "failed"}),
        tool_result(3, "orphan-call", "a result without its call"),
    ]
    failing[2]["data"]["message"]["content"][0]["isError"] = True
    write_log(site.root, header("failing-check", 1_790_000_000_000), [failing])
    site.index()
    return site


def export(site: Site, session_id: str, **options: Any) -> str:
    with SessionQuery.open(str(site.db)) as engine:
        transcript = prepare_transcript(
            engine, session_id, title=session_title(engine, session_id), options=TranscriptOptions(**options), exported_at=WHEN
        )
        return b"".join(transcript.chunks()).decode("utf-8")


def without_stamp(document: str) -> str:
    return re.sub(r"Exported by sessionq on [^<]* UTC", "Exported by sessionq on …", document)


class _References(HTMLParser):
    """Every tag, attribute and stylesheet rule that would make a browser load or run something."""

    LOADING_TAGS = {"script", "iframe", "frame", "object", "embed", "img", "picture", "source", "audio", "video", "track", "base", "form", "svg", "math"}
    LOADING_ATTRIBUTES = {"src", "srcset", "poster", "data", "action", "formaction", "background", "ping", "style"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag in self.LOADING_TAGS or (tag == "link" and named.get("rel") != "icon"):
            self.found.append(f"<{tag}>")
        if tag == "meta" and (named.get("http-equiv") or "").lower() == "refresh":
            self.found.append("meta refresh")
        for name, value in attrs:
            if name in self.LOADING_ATTRIBUTES or name.startswith("on"):
                self.found.append(f"{tag} {name}=")
            if name == "href" and not (
                (value or "").startswith("#seq-")
                or (tag == "link" and (value or "").startswith("data:image/svg+xml,"))
                or value == "https://example.com/docs"  # the message's own link, sanitised (rel checked apart)
            ):
                self.found.append(f"{tag} href={value}")
        self.in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self.in_style = False

    def handle_data(self, data: str) -> None:
        if self.in_style and re.search(r"@import|url\(|https?:", data, re.I):
            self.found.append("stylesheet loads")


def external_references(document: str) -> list[str]:
    """Everything in ``document`` that would make a browser load (or run) something."""
    parser = _References()
    parser.feed(document)
    parser.close()
    return parser.found


def test_the_file_loads_nothing_and_runs_nothing(readable: Site) -> None:
    document = export(readable, READABLE)
    assert document.startswith("<!doctype html>")
    assert external_references(document) == []
    assert "Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"" in document
    # the message's one safe link is a link, kept from the referrer and opened apart
    assert '<a href="https://example.com/docs" rel="noopener noreferrer nofollow" target="_blank">good link</a>' in document
    # the hostile markup is text
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in document
    assert "&lt;img src=x onerror=" in document
    assert "[bad link](javascript:window.__pwned=3)" in document
    assert 'href="javascript' not in document


def test_the_transcript_reads_as_the_page_shows_it(readable: Site) -> None:
    document = export(readable, READABLE)
    assert "ビルドして下さい 😀" in document and LONG_ID in document and "/home/demo/読む" in document
    assert '<pre><code data-lang="python">print(&#x27;hi&#x27;)</code></pre>' in document or "<pre><code data-lang=\"python\">print('hi')</code></pre>" in document
    assert "<strong>Bold claim</strong>" in document and "<li>first point</li>" in document
    # reasoning collapsed
    assert re.search(r'<details class="reasoning"><summary>Reasoning<span class="meta"> · 33 characters</span></summary>', document)
    # the call holds its result (cut, with the whole of it one click away); the result's event points back
    call = re.search(r'<details class="tool-call" data-call-id="call-1">.*?</details></div></div>', document, re.S)
    assert call is not None
    assert 'result <a href="#seq-5">#5</a>' in call.group(0)
    assert f'<summary>show all {len(OUTPUT):,} characters</summary>' in call.group(0)
    assert call.group(0).count("END-OF-OUTPUT") == 1  # in the full text, not in the preview
    assert 'result of <span class="tool-name">bash</span> <a href="#seq-3">#3</a>' in document
    # the output is written once, plus its first 4,000 characters as the preview
    assert document.count("line of build output") == OUTPUT.count("line of build output") + OUTPUT[:4000].count("line of build output")
    # log-only events left out (and said so), the session's unknown creation time said so
    assert 'id="seq-0"' not in document and 'id="seq-4"' not in document and 'id="seq-2"' not in document
    assert "5 log-only events (turn and step markers" in document
    assert 'created <span class="time-unknown"' in document
    every = export(readable, READABLE, include_log_only=True)
    assert all(f'id="seq-{seq}"' in every for seq in range(8))
    assert '<div class="turn-divider">Turn 1</div>' in every and "left out" not in every


def test_errors_and_unpaired_results(readable: Site) -> None:
    document = export(readable, "failing-check")
    call = re.search(r'<details class="tool-call" data-call-id="call-x">.*?</details>', document, re.S)
    assert call is not None and 'badge error-badge">error</span>' in call.group(0) and "exit status 1" in call.group(0)
    orphan = re.search(r'id="seq-3".*?</div></div>', document, re.S)
    assert orphan is not None
    assert '<details class="tool-result"><summary> result of <span class="tool-name">tool call</span>' in orphan.group(0)
    assert "a result without its call" in orphan.group(0)


def test_ranges_do_not_change_the_document(readable: Site) -> None:
    """Read in ranges of one event (a result outside the range is read on its
    own) the file is the same as read in one range."""
    for session_id in (READABLE, "failing-check"):
        for log_only in (False, True):
            whole = export(readable, session_id, include_log_only=log_only)
            assert export(readable, session_id, include_log_only=log_only, range_size=1) == whole
            assert export(readable, session_id, include_log_only=log_only, range_size=2) == whole


def test_redaction_replaces_secrets_in_the_file(readable: Site) -> None:
    assert SECRET in export(readable, "failing-check")
    redacted = export(readable, "failing-check", redact=True)
    assert SECRET not in redacted and "run the failing check; token [REDACTED" in redacted


def test_http_route_redacts_on_request(readable: Site) -> None:
    client = readable.client()
    assert SECRET in client.get("/api/session.html", params={"sessionId": "failing-check"}).text
    redacted = client.get("/api/session.html", params={"sessionId": "failing-check", "redact": "all"}).text
    assert SECRET not in redacted and without_stamp(redacted) == without_stamp(export(readable, "failing-check", redact=True))


def test_cli_writes_the_same_file(readable: Site, tmp_path: Path) -> None:
    runner = CliRunner()
    target = tmp_path / "out.html"
    result = runner.invoke(cli, ["export", READABLE[:8], "--html", "-o", str(target), "--db", str(readable.db)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(target)
    assert without_stamp(target.read_text(encoding="utf-8")) == without_stamp(export(readable, READABLE))
    stdout = runner.invoke(cli, ["export", READABLE, "--html", "--all", "-o", "-", "--db", str(readable.db)])
    assert without_stamp(stdout.stdout_bytes.decode()) == without_stamp(export(readable, READABLE, include_log_only=True))
    missing = runner.invoke(cli, ["export", "no-such", "--html", "--db", str(readable.db)])
    assert missing.exit_code == 2 and "SESSION_QUERY_SESSION_NOT_FOUND" in missing.output
    assert not list(tmp_path.glob("*.partial"))
    usage = runner.invoke(cli, ["export", READABLE, "--all", "--db", str(readable.db)])
    assert usage.exit_code == 2 and "--all applies to --html" in usage.output


def test_http_route_serves_the_file(readable: Site) -> None:
    client = readable.client()
    response = client.get("/api/session.html", params={"sessionId": READABLE})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-disposition"] == f'attachment; filename="dsh-session-{READABLE}.html"'
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert without_stamp(response.text) == without_stamp(export(readable, READABLE))
    every = client.get("/api/session.html", params={"sessionId": READABLE, "includeLogOnly": "true"})
    assert without_stamp(every.text) == without_stamp(export(readable, READABLE, include_log_only=True))
    head = client.head("/api/session.html", params={"sessionId": READABLE})
    assert head.status_code == 200 and head.content == b"" and head.headers["content-disposition"].endswith('.html"')
    missing = client.get("/api/session.html", params={"sessionId": "no-such"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "SESSION_QUERY_SESSION_NOT_FOUND"
    assert client.head("/api/session.html", params={"sessionId": "no-such"}).status_code == 404
    for bad in ({}, {"sessionId": ""}, {"sessionId": READABLE, "includeLogOnly": "yes"}, {"sessionId": READABLE, "redact": "some"}):
        answer = client.get("/api/session.html", params=bad)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "INVALID_PARAMS"


def test_http_route_takes_the_token_as_a_download_does(readable: Site) -> None:
    client = readable.client(token="s3cret")
    assert client.get("/api/session.html", params={"sessionId": READABLE}).status_code == 401
    assert client.get("/api/session.html", params={"sessionId": READABLE, "access_token": "s3cret"}).status_code == 200
    assert client.get("/api/session.html", params={"sessionId": READABLE}, headers={"authorization": "Bearer s3cret"}).status_code == 200
    # elsewhere a token in the URL is still refused
    assert client.post("/api/rpc/listSessions?access_token=s3cret").status_code == 401


def test_openapi_documents_the_extensions(readable: Site) -> None:
    doc = readable.client().get("/api/openapi.json").json()
    html = doc["paths"]["/api/session.html"]
    assert set(html) == {"get", "head"}
    assert {p["name"] for p in html["get"]["parameters"]} == {"sessionId", "includeLogOnly", "redact"}
    assert "text/html" in html["get"]["responses"]["200"]["content"]
    assert "text/event-stream" in doc["paths"]["/api/events"]["get"]["responses"]["200"]["content"]
    served = {route.path for route in readable.client().app.routes}  # type: ignore[attr-defined]
    documented = set(doc["paths"])
    assert {p for p in served if p.startswith("/api/") and "{" not in p} <= documented


# --------------------------------------------------------------------------- any event is safe


class _Range:
    def __init__(self, header: dict[str, Any], events: list[dict[str, Any]], records: list[Any], start: int) -> None:
        self.session, self.events, self.records, self.event_count, self.start_seq = header, events, records, 0, start


class _Record:
    def __init__(self, seq: int, surface: str) -> None:
        self.seq, self.surface, self.replaced_by, self.replaces = seq, surface, None, None


class _Events:
    """A RangeReader over events in memory (what ``SessionQuery.read_event_range`` answers)."""

    def __init__(self, header: dict[str, Any], events: list[tuple[dict[str, Any], str]]) -> None:
        self.header, self.events = header, events

    def read_event_range(self, session_id: str, start_seq: int, limit: int) -> _Range:
        chosen = self.events[start_seq : start_seq + limit]
        answer = _Range(self.header, [e for e, _ in chosen], [_Record(start_seq + i, s) for i, (_, s) in enumerate(chosen)], start_seq)
        answer.event_count = len(self.events)
        return answer


ALLOWED_TAGS = {
    "html", "head", "meta", "title", "link", "style", "body", "header", "main", "footer", "section", "span", "div", "h1", "p",
    "a", "code", "pre", "strong", "em", "ul", "ol", "li", "blockquote", "br", "details", "summary", "time",
}

_TEXTS = st.lists(st.sampled_from(list("ab <>\"'&`*_#-[]():/\n") + ["javascript:", "https://x.y/", "<script>", "\x00", "\ud800", "😀", "漢"]), max_size=30).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["type", "text", "id", "name", "toolCallId", "content", "arguments", "isError", "attachment", "message", "turn", "chunk", "summary"]), inner, max_size=4),
    max_leaves=12,
)
_BLOCK = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "reasoning", "tool-call", "tool-result", "image", "other"])},
    optional={"text": _TEXTS, "id": st.sampled_from(["c1", "c2", ""]), "toolCallId": st.sampled_from(["c1", "c2"]), "name": _TEXTS, "arguments": _JSON, "content": st.lists(_JSON, max_size=2), "isError": st.booleans()},
)
_EVENT = st.tuples(
    st.sampled_from(["user/message", "assistant/message", "tool/result", "tool/call", "turn/start", "turn/end", "assistant/chunk", "compaction/summary", "session/title", "odd/type"]),
    st.one_of(_JSON, st.fixed_dictionaries({"message": st.fixed_dictionaries({"content": st.lists(_BLOCK, max_size=3)})}), st.fixed_dictionaries({"content": st.lists(_BLOCK, max_size=3)})),
    st.one_of(st.integers(min_value=-5, max_value=2_000_000_000_000), _JSON),
    st.sampled_from(["current", "shadowed", "log-only"]),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(_EVENT, max_size=8), _JSON, st.booleans(), st.integers(min_value=1, max_value=4))
def test_any_events_make_a_safe_document(events: list[Any], header_cwd: Any, log_only: bool, range_size: int) -> None:
    """Whatever the events hold (wrong types, markup, NUL, lone surrogates), the
    file is written, is valid UTF-8, and holds only the renderer's own tags,
    no event handler and no link but anchors and http(s)."""
    stored = [({"type": kind, "seq": seq, "time": when, "data": data}, surface) for seq, (kind, data, when, surface) in enumerate(events)]
    reader = _Events({"version": 0, "id": "s", "createdAt": 1, "cwd": header_cwd}, stored)
    options = TranscriptOptions(include_log_only=log_only, range_size=range_size, long_text=30)
    document = b"".join(prepare_transcript(reader, "s", options=options, exported_at=WHEN).chunks()).decode("utf-8")
    parser = _Tags()
    parser.feed(document)
    assert parser.tags <= ALLOWED_TAGS, parser.tags - ALLOWED_TAGS
    assert parser.bad == []


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.bad: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            if name.startswith("on") or name in {"src", "style", "srcset", "action"}:
                self.bad.append(f"{tag} {name}")
            if name == "href" and not re.match(r"#seq-\d+$|https?://|data:image/svg\+xml,", value or ""):
                self.bad.append(f"{tag} href={value}")


def test_cli_writes_into_a_pipe_in_place(readable: Site, tmp_path: Path) -> None:
    """A target that is not a regular file (a FIFO here; ``/dev/null`` alike) is
    written in place, never renamed over: the pipe stays a pipe."""
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    options = ["-o", str(fifo), "--db", str(readable.db), "--root", str(readable.root), "--attachments", str(readable.attachments)]
    received: list[bytes] = []
    for kind in (["--html"], []):  # the transcript, then the ZIP
        reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
        reader.start()
        result = CliRunner().invoke(cli, ["export", READABLE, *kind, *options])
        reader.join(30)
        assert result.exit_code == 0, result.output
        assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert without_stamp(received[0].decode()) == without_stamp(export(readable, READABLE))
    assert received[1].startswith(b"PK")
    assert not list(tmp_path.glob("*.partial"))
