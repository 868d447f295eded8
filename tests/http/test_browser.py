"""The web page in a real browser: Playwright drives the machine's Chromium.

One walk through the page over the real server (uvicorn on a free loopback
port) and a real index of the demo sample root (``indexer.samples``: a
compaction, a subagent child, an interrupted tool call, CJK text) plus enough
generated sessions to need a second page of results:

search → results grouped by session (title, cwd, highlighted snippet) → "more"
by cursor → other matches in one session → session view (every event in order
with its surface, the compaction's replacement, the lineage tree) → the child
through the lineage link → Export (the downloaded ZIP equals the raw logs) →
back to the results → an unknown session's error → the same walk against a
server that requires a bearer token (the page takes it from ``#token=``) → a
long session read in ranges around a target, with earlier and later ranges on
demand.
JavaScript errors and failed requests fail the test.

A PNG of every step goes to a directory of its own per test under
``$SESSIONQ_SCREENSHOTS`` (default: the test's tmp dir), so tests running at
once never clear each other's pictures; the directory is printed.  Playwright never downloads a browser: it
launches ``/usr/bin/chromium`` (Debian's ``chromium`` package).  Without it the
test skips, except under CI (``$CI`` set), where it fails: ``.ci/run``
installs the package.
"""

from __future__ import annotations

import json
import os
import unicodedata
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexer.samples import build_sample_root
from tests.http.conftest import Site
from tests.http.test_export import log_text
from tests.http.test_uvicorn import serving
from tests.logfactory import (
    assistant,
    header,
    step_end,
    step_start,
    turn_end,
    turn_start,
    user,
    write_log,
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"]
QUERY = "tokenizer"
PARENT = "demo-config-parser"
CHILD = "demo-config-parser-review"
BULK = [f"bulk-{i:02d}" for i in range(24)]  # with the two demo hits: 26 sessions, two pages of 20
TIMEOUT_MS = 10_000


@pytest.fixture
def executable() -> str:
    """The browser to drive; checked before the index is built and the server started."""
    return chromium()


def chromium() -> str:
    if CHROMIUM.is_file():
        return str(CHROMIUM)
    reason = f"{CHROMIUM} is missing (apt-get install chromium chromium-driver); the browser test needs it"
    if os.environ.get("CI"):
        pytest.fail(reason + " — CI must run it (.ci/run installs the package)")
    pytest.skip(reason)


def bulk_session(root: Path, index: int, session_id: str) -> None:
    created = 1_790_000_300_000 + index * 60_000
    events = [
        turn_start(0),
        user(1, f"Benchmark run {index}: check how the tokenizer copes with generated fixture file number {index}."),
        step_start(2),
        assistant(3, f"Run {index} finished: no tokenizer errors on the fixture, timings within budget."),
        step_end(4),
        turn_end(5),
    ]
    for n, event in enumerate(events):
        event["time"] = created + 100 * (n + 1)
    write_log(root, header(session_id, created, cwd="/home/demo/bench"), [events])


@pytest.fixture
def sample(site: Site) -> Iterator[tuple[Site, dict[str, Path], str]]:
    paths = {Path(p).parent.name: Path(p) for p in build_sample_root(site.root)}
    for i, session_id in enumerate(BULK):
        bulk_session(site.root, i, session_id)
    site.index()
    with serving(site) as base:
        yield site, paths, base


@pytest.fixture
def shots(request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Path]:
    chosen = os.environ.get("SESSIONQ_SCREENSHOTS")
    directory = Path(chosen).resolve() / request.node.name if chosen else tmp_path / "screenshots"
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.png"):
        old.unlink()
    yield directory
    with capsys.disabled():
        print(f"\nbrowser screenshots: {directory}")


def api(base: str, method: str, params: dict[str, Any]) -> Any:
    response = httpx.post(f"{base}/api/rpc/{method}", json=params)
    assert response.status_code == 200, response.text
    return response.json()


def watch(page: Any, problems: list[str]) -> None:
    """Collect JavaScript errors and failed requests of ``page`` into ``problems``.

    The page's event stream (``/api/events``) is cut whenever the page goes
    away or the server stops; that abort is expected, every other one is not."""

    def failed(request: Any) -> None:
        if request.url.endswith("/api/events") and "ERR_ABORTED" in (request.failure or ""):
            return
        problems.append(f"request failed: {request.method} {request.url} {request.failure}")

    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" and not msg.text.startswith("Failed to load resource") else None)
    page.on("response", lambda r: problems.append(f"HTTP {r.status} {r.request.method} {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", failed)


def fold(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c)).lower()


def test_search_session_lineage_and_export_in_a_browser(
    executable: str, sample: tuple[Site, dict[str, Path], str], shots: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    site, paths, base = sample
    # What the page must show, straight from the API.
    expected_hits: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        page_data = api(base, "searchSessions", {"query": QUERY, "limit": 50, **({"cursor": cursor} if cursor else {})})
        expected_hits.update({hit["header"]["id"]: hit for hit in page_data["items"]})
        cursor = page_data.get("nextCursor")
        if cursor is None:
            break
    assert set(expected_hits) == {PARENT, CHILD, *BULK}
    log = api(base, "readSession", {"sessionId": PARENT})
    surfaces = {r["seq"]: r["surface"] for r in api(base, "listEvents", {"sessionId": PARENT})}
    shadowed = sorted(seq for seq, surface in surfaces.items() if surface == "shadowed")
    replacement = next(e["seq"] for e in log["events"] if isinstance(e.get("surfaceOp"), dict))
    assert shadowed and replacement in surfaces

    problems: list[str] = []
    step = iter(range(1, 100))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            watch(page, problems)

            def shot(name: str, full: bool = True) -> None:
                page.screenshot(path=str(shots / f"{next(step):02d}-{name}.png"), full_page=full)

            # 1. the page loads; the header shows the index size
            page.goto(base + "/")
            page.wait_for_selector("#index-status:has-text('indexed')")
            assert page.title() == "sessionq"
            shot("home", full=False)

            # 2. type a query: results grouped by session, one card per session
            page.fill("#q", QUERY)
            page.press("#q", "Enter")
            page.wait_for_selector("article.hit")
            cards = page.locator("article.hit")
            assert cards.count() == 20
            assert page.locator("button.more").is_visible()
            assert "#q=tokenizer" in page.url
            shot("results")

            # 3. the next page by cursor
            page.click("button.more")
            page.wait_for_function("document.querySelectorAll('article.hit').length > 20")
            ids = cards.evaluate_all("cards => cards.map(c => c.dataset.sessionId)")
            assert len(ids) == len(set(ids)) == len(expected_hits)
            assert set(ids) == set(expected_hits)
            assert page.locator("button.more").count() == 0
            assert page.locator(".result-count").inner_text() == f"{len(expected_hits)} sessions"
            shot("results-all-pages")

            # every card: title, cwd, the API's snippet with the phrase marked
            titles = {s["sessionId"]: s["value"].get("title") for s in api(base, "readTitleSnapshots", {"sessionIds": ids})}
            for card_id in ids:
                card = page.locator(f"article.hit[data-session-id='{card_id}']")
                hit = expected_hits[card_id]
                title = titles[card_id]["title"] if titles[card_id] else card_id
                assert card.locator("h3 a.session-title").inner_text() == title
                assert card.locator(".meta .cwd").inner_text() == hit["header"].get("cwd", "(no cwd)")
                best = card.locator(".match.best")
                assert best.locator(".snippet").inner_text() == hit["bestMatch"]["snippet"]
                assert best.get_attribute("data-seq") == str(hit["bestMatch"]["seq"])
                marks = best.locator(".snippet mark").all_inner_texts()
                assert marks and all(fold(m) == QUERY for m in marks), (card_id, marks)
            parent_card = page.locator(f"article.hit[data-session-id='{PARENT}']")
            assert parent_card.locator("h3 a").inner_text() == "TOML parser rejects trailing commas"
            child_card = page.locator(f"article.hit[data-session-id='{CHILD}']")
            assert child_card.locator(".badge.subagent").is_visible()
            assert child_card.locator(f".meta a[data-session-link='{PARENT}']").is_visible()

            # other matches inside one session (searchEvents)
            parent_card.locator("button.other-matches").click()
            others = parent_card.locator(".matches .match")
            others.first.wait_for()
            in_session = api(base, "searchEvents", {"sessionId": PARENT, "query": QUERY, "limit": 5})
            best_seq = expected_hits[PARENT]["bestMatch"]["seq"]
            expected_other = [str(item["seq"]) for item in in_session["items"] if item["seq"] != best_seq]
            assert others.evaluate_all("rows => rows.map(r => r.dataset.seq)") == expected_other
            parent_card.scroll_into_view_if_needed()
            parent_card.screenshot(path=str(shots / f"{next(step):02d}-other-matches.png"))

            # 4. open the session: every event in order with its surface
            parent_card.locator("h3 a.session-title").click()
            page.wait_for_selector(".events .event:not(.log-only)")
            assert page.locator("h2.session-title").inner_text() == "TOML parser rejects trailing commas"
            rows = page.locator(".events .event")
            assert rows.count() == len(log["events"])
            shown = rows.evaluate_all("rows => rows.map(r => [Number(r.dataset.seq), r.dataset.type, r.dataset.surface])")
            assert shown == [[e["seq"], e["type"], surfaces[e["seq"]]] for e in log["events"]]
            badges = rows.evaluate_all("rows => rows.map(r => r.querySelector('.badge.surface').textContent)")
            assert badges == [surfaces[e["seq"]] for e in log["events"]]
            # the search phrase is marked in the events too
            assert page.locator(".events mark").count() > 0
            shot("session")

            # the compaction: the replacement names what it replaced, each shadowed event its replacement
            row = page.locator(f"#seq-{replacement}")
            assert "replacement" in (row.get_attribute("class") or "")
            replaced = row.locator(".badge.replacement a").all_inner_texts()
            assert replaced == [f"#{seq}" for seq in shadowed]
            for seq in shadowed:
                by = page.locator(f"#seq-{seq} .replaced-by a")
                assert by.inner_text() == f"#{replacement}"
                assert page.locator(f"#seq-{seq}").get_attribute("data-surface") == "shadowed"
            summary = page.locator(f".surface-summary [data-replacement='{replacement}']")
            assert summary.locator("a").all_inner_texts() == [f"#{replacement}", *(f"#{s}" for s in shadowed)]
            summary.locator("a").first.click()
            page.wait_for_selector(f"#seq-{replacement}.target")
            assert f"seq={replacement}" in page.url
            shot("compaction", full=False)

            # the surface only (log-only rows hidden), then everything again
            page.uncheck("#show-log-only")
            assert not page.locator(".event.log-only").first.is_visible()
            visible = [r for r in page.locator(".events .event").all() if r.is_visible()]
            assert len(visible) == sum(1 for s in surfaces.values() if s != "log-only")
            shot("surface-only")
            page.check("#show-log-only")

            # lineage: this session, its child as a link
            lineage = page.locator(".lineage")
            assert lineage.locator(f"[data-lineage-id='{PARENT}']").get_attribute("class") == "node current-node"
            child_link = lineage.locator(f"[data-lineage-id='{CHILD}'] a")
            assert f"session={CHILD}" in (child_link.get_attribute("href") or "")
            child_link.click()
            page.wait_for_selector(f".lineage [data-lineage-id='{CHILD}'].current-node")
            child_log = api(base, "readSession", {"sessionId": CHILD})
            assert page.locator(".events .event").count() == len(child_log["events"])
            parent_link = page.locator(f".lineage [data-lineage-id='{PARENT}'] a")
            assert parent_link.inner_text() == "TOML parser rejects trailing commas"
            assert page.locator("#include-descendants").is_disabled()
            assert page.locator(".actions label[for='include-descendants']").inner_text().strip() == "no subagent logs"
            shot("child-session")
            page.go_back()
            page.wait_for_selector(f".lineage [data-lineage-id='{PARENT}'].current-node")

            # 5. Export: the downloaded ZIP holds the raw logs verbatim
            assert page.locator("#include-descendants").is_checked()
            with page.expect_download() as info:
                page.click("button.export")
            download = info.value
            assert download.failure() is None
            assert download.suggested_filename == f"dsh-session-{PARENT}.zip"
            archive_path = tmp_path / download.suggested_filename
            download.save_as(archive_path)
            page.wait_for_selector(f".export-status:has-text('Download started: dsh-session-{PARENT}.zip')")
            shot("export", full=False)
            with zipfile.ZipFile(archive_path) as archive:
                assert archive.testzip() is None
                assert archive.namelist() == ["session.jsonl", f"subagents/{CHILD}/session.jsonl"]
                assert archive.read("session.jsonl").decode() == log_text(paths[PARENT])
                assert archive.read(f"subagents/{CHILD}/session.jsonl").decode() == log_text(paths[CHILD])
            # the "redact secrets" box asks for the scrubbed archive (this log has no secret: same bytes)
            assert not page.locator("#export-redact").is_checked()
            page.check("#export-redact")
            with page.expect_download() as info:
                page.click("button.export")
            assert "redact=all" in info.value.url
            info.value.save_as(tmp_path / "redacted.zip")
            with zipfile.ZipFile(tmp_path / "redacted.zip") as archive:
                assert archive.read("session.jsonl").decode() == log_text(paths[PARENT])
            first_line = log_text(paths[PARENT]).split("\n", 1)[0]
            assert json.loads(first_line)["id"] == PARENT

            # back to the results: the pages already loaded are still there
            page.click("p.back a")
            page.wait_for_selector("article.hit")
            assert page.locator("article.hit").count() == len(expected_hits)

            assert problems == []
            # an unknown session answers the API's error, readably (the 404 itself is logged by Chromium)
            page.goto(base + "/#session=no-such-session")
            page.wait_for_selector("p.error")
            assert "SESSION_QUERY_SESSION_NOT_FOUND" in page.locator("p.error").inner_text()
            shot("not-found", full=False)
            assert problems and all(p.startswith("HTTP 404 POST") for p in problems), problems
            problems.clear()

            # 6. with a bearer token (as when serving off loopback): the page takes it from #token=
            with serving(site, token="s3cret") as guarded:
                page.goto(guarded + "/#token=s3cret")
                page.wait_for_selector("#index-status:has-text('indexed')")
                page.fill("#q", QUERY)
                page.press("#q", "Enter")
                page.wait_for_selector(f"article.hit[data-session-id='{CHILD}']")
                assert "token=s3cret" in page.url
                page.click(f"article.hit[data-session-id='{CHILD}'] a.session-title")
                page.wait_for_selector(".events .event:not(.log-only)")
                assert "token=s3cret" in (page.locator(f".lineage [data-lineage-id='{PARENT}'] a").get_attribute("href") or "")
                with page.expect_download() as info:
                    page.click("button.export")
                child_zip = tmp_path / "child.zip"
                info.value.save_as(child_zip)
                with zipfile.ZipFile(child_zip) as archive:
                    assert archive.namelist() == ["session.jsonl"]
                    assert archive.read("session.jsonl").decode() == log_text(paths[CHILD])
                with page.expect_download() as info:
                    page.click("button.export-html")  # the HTML export takes the token the same way
                child_html = tmp_path / "child.html"
                info.value.save_as(child_html)
                assert info.value.suggested_filename == f"dsh-session-{CHILD}.html"
                assert child_html.read_text(encoding="utf-8").startswith("<!doctype html>")
                shot("token", full=False)
                assert httpx.post(guarded + "/api/rpc/status").status_code == 401
                page.goto("about:blank")  # leave before this server stops: the page would reconnect to it and be refused
            assert problems == []

            # 7. a long session is read in ranges (readEventRange); the limits are
            # lowered here so the 43-event demo session counts as long
            long_view = context.new_page()
            watch(long_view, problems)
            long_view.add_init_script("window.SESSIONQ_FULL_LIMIT = 10; window.SESSIONQ_RANGE = 8;")
            long_view.goto(f"{base}/#session={PARENT}")
            long_view.wait_for_selector(".long-log")
            long_rows = long_view.locator(".events .event")
            in_range = lambda: long_rows.evaluate_all("rows => rows.map(r => [Number(r.dataset.seq), r.dataset.surface])")  # noqa: E731
            assert in_range() == [[seq, surfaces[seq]] for seq in range(8)]
            for seq in (s for s in shadowed if s < 8):
                assert long_view.locator(f"#seq-{seq} .replaced-by a").inner_text() == f"#{replacement}"
            assert long_view.locator("button.load-earlier").count() == 0
            long_view.click("button.load-later")
            long_view.wait_for_function("document.querySelectorAll('.events .event').length === 16")
            assert in_range() == [[seq, surfaces[seq]] for seq in range(16)]
            long_view.screenshot(path=str(shots / f"{next(step):02d}-long-session.png"), full_page=False)
            # opening at the replacement: the range around it, then earlier events on demand
            long_view.goto(f"{base}/#session={PARENT}&seq={replacement}")
            long_view.wait_for_selector(f"#seq-{replacement}.target")
            start = max(0, replacement - 4)
            assert in_range() == [[seq, surfaces[seq]] for seq in range(start, min(len(log["events"]), start + 8))]
            assert long_view.locator(f"#seq-{replacement} .badge.replacement a").all_inner_texts() == [f"#{seq}" for seq in shadowed]
            long_view.click("button.load-earlier")
            long_view.wait_for_function(f"document.querySelector('.events .event').dataset.seq === '{max(0, start - 8)}'")
            assert in_range() == [[seq, surfaces[seq]] for seq in range(max(0, start - 8), min(len(log["events"]), start + 8))]
            long_view.screenshot(path=str(shots / f"{next(step):02d}-long-session-earlier.png"), full_page=False)
            assert problems == []
        finally:
            browser.close()
