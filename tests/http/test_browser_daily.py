"""The web page as a daily driver, in a real browser (Playwright, Debian's Chromium).

Driven as a person would (click, type, keys) against the real server over a
real index of the demo sample root plus generated sessions:

browse (workspaces and their sessions, newest first, children nested, paged
by cursor) → keyboard (``/``, ``j``/``k``, Enter, Esc, ``?``) → a readable
transcript (markdown, inert ``<script>`` and ``javascript:`` links, code
blocks, a tool call paired with its collapsed long result, reasoning
collapsed, log-only rows hidden by a toggle that persists, CJK, unknown times)
→ live: a frame appended to the open session's log and reconciled shows up in
the page within a second; a new matching session is offered as "1 new match"
→ filters in the page and the URL → ``n``/``p`` through matches → bad deep
links → the dark theme at 390 px, and the toggle.  No horizontal overflow at
390 and 1,280 px.  JavaScript errors and failed requests fail the test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from indexer.samples import build_sample_root
from tests.http.conftest import Site
from tests.http.test_browser import CHROMIUM_ARGS, TIMEOUT_MS, api, bulk_session, executable, shots, watch  # noqa: F401
from tests.http.test_uvicorn import serving
from tests.logfactory import (
    assistant,
    events_bytes,
    frame,
    header,
    step_end,
    step_start,
    tool_call,
    tool_result,
    turn_end,
    turn_start,
    user,
    write_log,
)

PARENT = "demo-config-parser"
CHILD = "demo-config-parser-review"
READABLE = "readable-transcript"
LONG_CWD = "/home/demo/" + "a-rather-long-directory-name-without-breaks-" * 6 + "end"
LONG_ID = "0123456789abcdef" * 16
OUTPUT = "line of build output\n" * 500 + "END-OF-OUTPUT"
WHEN = 1_790_000_900_000
MARKDOWN = (
    "**Bold claim** and `inline code`.\n\n"
    "```python\nprint('hi')\n```\n\n"
    "- first point\n- second point\n\n"
    "<script>window.__pwned = 1</script> <img src=x onerror=\"window.__pwned = 2\">\n\n"
    "[bad link](javascript:window.__pwned=3) and [good link](https://example.com/docs)"
)


def readable_events() -> list[dict[str, Any]]:
    answer = assistant(3, MARKDOWN, calls=[("call-1", "bash", '{"command":"make build"}')])
    answer["data"]["message"]["content"].insert(0, {"type": "reasoning", "text": "The user wants a build; run make."})
    events = [
        turn_start(0),
        user(1, "ビルドして下さい 😀 — please run the build for " + LONG_ID),
        step_start(2),
        answer,
        tool_call(4, "call-1", "bash", '{"command":"make build"}'),
        tool_result(5, "call-1", OUTPUT),
        step_end(6),
        turn_end(7),
    ]
    for n, event in enumerate(events):
        event["time"] = WHEN + 100 * n
    return events


@pytest.fixture
def daily(site: Site) -> Iterator[tuple[Site, str, Path]]:
    build_sample_root(site.root)
    for i in range(24):
        bulk_session(site.root, i, f"bulk-{i:02d}")
    path = write_log(site.root, header(READABLE, 0, cwd=LONG_CWD), [readable_events()])
    site.index()
    with serving(site) as base:
        yield site, base, path


def no_overflow(page: Any) -> None:
    width, inner = page.evaluate("[document.scrollingElement.scrollWidth, innerWidth]")
    assert width <= inner, f"horizontal overflow: {width} > {inner}"


def test_browse_read_follow_and_navigate_by_keyboard(
    executable: str, daily: tuple[Site, str, Path], shots: Path  # noqa: F811
) -> None:
    from playwright.sync_api import sync_playwright

    site, base, readable_path = daily
    workspaces = api(base, "listWorkspaces", {})
    problems: list[str] = []
    step = iter(range(1, 100))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            watch(page, problems)

            def shot(name: str, on: Any = None) -> None:
                (on or page).screenshot(path=str(shots / f"daily-{next(step):02d}-{name}.png"), full_page=False)

            # 1. browse: every workspace, newest activity first; its sessions newest first
            page.goto(base + "/")
            page.wait_for_selector(".workspace .session-row")
            assert page.locator(".workspace").evaluate_all("s => s.map(n => n.dataset.cwd)") == [w["cwd"] or "" for w in workspaces]
            assert page.locator("#live").is_visible()
            first = page.locator(".workspace").first
            bench = api(base, "listSessionSummaries", {"cwd": "/home/demo/bench", "limit": 100})["items"]
            bench_section = page.locator(".workspace[data-cwd='/home/demo/bench']")
            assert bench_section.locator(".session-row").count() == 10
            bench_section.locator("button.more").click()
            page.wait_for_function("document.querySelectorAll(\".workspace[data-cwd='/home/demo/bench'] .session-row\").length === 20")
            bench_section.locator("button.more").click()
            page.wait_for_function("document.querySelectorAll(\".workspace[data-cwd='/home/demo/bench'] .session-row\").length === 24")
            assert bench_section.locator("button.more").count() == 0
            shown = bench_section.locator(".session-row").evaluate_all("rows => rows.map(r => r.dataset.sessionId)")
            assert shown == [item["id"] for item in bench]
            row = bench_section.locator(f".session-row[data-session-id='{bench[0]['id']}']")
            assert row.locator(".event-count").inner_text() == f"{bench[0]['eventCount']} events"
            assert row.locator(".created time").get_attribute("title", timeout=1000).endswith(" UTC")
            # the readable session was created at time 0: unknown
            readable_row = page.locator(f".session-row[data-session-id='{READABLE}']")
            assert readable_row.locator(".created").inner_text() == "created unknown"
            # the subagent child sits under its parent
            config = page.locator(".workspace[data-cwd='/home/demo/config-tool']")
            config.locator("button.open-ws").click() if config.locator("button.open-ws").count() else None
            page.wait_for_selector(f".session-row[data-session-id='{PARENT}'] ul.children .session-row[data-session-id='{CHILD}']")
            no_overflow(page)
            shot("browse")

            # 2. keyboard: / focuses search, j/k select, Enter opens, Esc back, ? the keys
            page.keyboard.press("?")
            assert page.locator("#keys").is_visible()
            shot("keys")
            page.keyboard.press("Escape")
            assert not page.locator("#keys").is_visible()
            page.keyboard.press("j")
            page.keyboard.press("j")
            page.keyboard.press("k")
            selected = page.locator(".session-row.selected")
            assert selected.count() == 1
            chosen = selected.get_attribute("data-session-id")
            assert chosen == first.locator(".session-row").first.get_attribute("data-session-id")
            page.keyboard.press("Enter")
            page.wait_for_selector(f"h2.session-title")
            assert f"session={chosen}" in page.url
            page.keyboard.press("Escape")
            page.wait_for_selector(".workspace .session-row")
            page.keyboard.press("/")
            assert page.evaluate("document.activeElement.id") == "q"
            page.keyboard.press("Escape")

            # 3. a readable transcript
            readable_row.locator("a.session-title").click()
            page.wait_for_selector(f"#seq-3 .message > .md")
            assert page.evaluate("window.__pwned") is None
            events = page.locator(".events")
            assert events.locator("script, img").count() == 0
            assert "<script>window.__pwned = 1</script>" in events.locator("#seq-3 .message > .md").inner_text()
            assert events.locator("a[href^='javascript']").count() == 0
            assert "[bad link](javascript:window.__pwned=3)" in events.locator("#seq-3").inner_text()
            good = events.locator("#seq-3 a", has_text="good link")
            assert good.get_attribute("href") == "https://example.com/docs"
            assert events.locator("#seq-3 pre code").first.inner_text() == "print('hi')"
            assert events.locator("#seq-3 strong").first.inner_text() == "Bold claim"
            assert events.locator("#seq-3 .message > .md ul li").count() == 2
            assert "ビルドして下さい 😀" in events.locator("#seq-1").inner_text()
            assert page.locator(".meta .created").inner_text() == "unknown"
            # reasoning collapsed; the tool call collapsed, paired with its result, cut long
            reasoning = events.locator("#seq-3 details.reasoning")
            assert reasoning.get_attribute("open") is None
            call = events.locator("#seq-3 details.tool-call")
            assert call.get_attribute("open") is None
            assert call.locator(".tool-status a").inner_text() == "#5"
            call.locator("summary").click()
            output = call.locator(".tool-output")
            assert "line of build output" in output.inner_text()
            assert "END-OF-OUTPUT" not in output.inner_text()
            show_all = output.locator("button.show-all")
            assert show_all.inner_text() == f"show all {len(OUTPUT):,} characters"
            show_all.click()
            assert "END-OF-OUTPUT" in output.inner_text()
            assert events.locator("#seq-5 details.tool-result").get_attribute("open") is None
            # log-only events hidden; the toggle persists across a reload
            assert not page.locator("#seq-0").is_visible() and not page.locator("#seq-4").is_visible()
            page.check("#show-log-only")
            assert page.locator("#seq-0").is_visible()
            page.reload()
            page.wait_for_selector("#seq-3 .message > .md")
            assert page.locator("#show-log-only").is_checked() and page.locator("#seq-0").is_visible()
            page.uncheck("#show-log-only")
            no_overflow(page)
            shot("transcript")

            # 4. live: an appended frame, reconciled, appears within a second
            extra = [turn_start(8, 2), user(9, "live follow-up from the daemon")]
            with readable_path.open("ab") as log:
                log.write(frame(events_bytes(extra)))
            site.index()
            started = time.monotonic()
            page.wait_for_selector("#seq-9", timeout=1000)
            live_latency = time.monotonic() - started
            assert "live follow-up from the daemon" in page.locator("#seq-9").inner_text()
            total = api(base, "readEventRange", {"sessionId": READABLE, "startSeq": 0, "limit": 1})["eventCount"]
            page.wait_for_function(f"document.querySelector('.surface-summary .event-count').textContent === '{total} events'", timeout=1000)
            page.wait_for_function("document.getElementById('index-status').textContent.includes('events indexed')")
            shot("live-append")

            # a results page offers new matches instead of reshuffling
            page.fill("#q", "tokenizer")
            page.press("#q", "Enter")
            page.wait_for_selector("article.hit")
            before = page.locator("article.hit").count()
            write_log(site.root, header("late-tokenizer", WHEN + 5000, cwd="/home/demo/late"), [[user(0, "the tokenizer again")]])
            site.index()
            fresh = page.locator("button.show-new")
            fresh.wait_for(timeout=2000)
            assert fresh.inner_text() == "1 new match — show"
            shot("new-matches")
            fresh.click()
            page.wait_for_selector("article.hit[data-session-id='late-tokenizer']")
            assert page.locator("article.hit").count() == min(before + 1, 20)

            # 5. filters: the workspace filter narrows the search and lands in the URL
            page.select_option("#filter-ws", "/home/demo/config-tool")
            page.wait_for_function("location.hash.includes('ws=')")
            page.wait_for_selector(f"article.hit[data-session-id='{PARENT}']")
            ids = page.locator("article.hit").evaluate_all("cards => cards.map(c => c.dataset.sessionId)")
            assert sorted(ids) == sorted([PARENT, CHILD])
            page.select_option("#filter-surface", "current")
            page.wait_for_function("location.hash.includes('surface=current')")
            page.wait_for_selector("article.hit")
            assert set(page.locator("article.hit .match.best .badge").all_inner_texts()) == {"current"}
            shot("filters")

            # 6. n / p walk the matches inside a session
            page.goto(f"{base}/#session={PARENT}&q=tokenizer")
            page.wait_for_selector(".events .event:not(.log-only) mark")
            matches = page.locator(".events .event").evaluate_all(
                "rows => rows.filter(r => r.offsetParent !== null && r.querySelector('mark')).map(r => r.dataset.seq)")
            assert len(matches) >= 2
            page.keyboard.press("n")
            assert page.locator(".event.selected").get_attribute("data-seq") == matches[0]
            page.keyboard.press("n")
            assert page.locator(".event.selected").get_attribute("data-seq") == matches[1]
            page.keyboard.press("p")
            assert page.locator(".event.selected").get_attribute("data-seq") == matches[0]

            # 7. bad deep links say so, with a way back
            page.goto(f"{base}/#session={READABLE}&seq=99999")
            note = page.locator(".deep-link")
            note.wait_for()
            assert f"Event #99999 is not in this session (it has {total} events)" in note.inner_text()
            assert problems == []
            page.goto(f"{base}/#session=no-such-session")
            page.wait_for_selector(".not-found")
            assert "No session “no-such-session” in the index" in page.locator(".not-found").inner_text()
            shot("not-found")
            page.click(".not-found a")
            page.wait_for_selector(".workspace")
            assert problems and all(p.startswith("HTTP 404 POST") for p in problems), problems
            problems.clear()

            # 8. the dark theme from prefers-color-scheme, at 390 px; the toggle
            dark = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark")
            dark.set_default_timeout(TIMEOUT_MS)
            phone = dark.new_page()
            watch(phone, problems)
            phone.goto(base + "/")
            phone.wait_for_selector(".workspace .session-row")
            background = "getComputedStyle(document.body).backgroundColor"
            assert phone.evaluate(background) == "rgb(23, 24, 28)"
            no_overflow(phone)
            shot("dark-phone-browse", phone)
            phone.goto(f"{base}/#session={READABLE}")
            phone.wait_for_selector("#seq-3 .message > .md")
            no_overflow(phone)
            shot("dark-phone-transcript", phone)
            phone.click("#theme-toggle")
            assert phone.locator("#theme-toggle").inner_text() == "Theme: dark"
            phone.click("#theme-toggle")
            assert phone.locator("#theme-toggle").inner_text() == "Theme: light"
            assert phone.evaluate(background) == "rgb(246, 246, 248)"
            phone.reload()
            phone.wait_for_selector("#seq-3 .message > .md")
            assert phone.evaluate(background) == "rgb(246, 246, 248)"
            no_overflow(phone)
            shot("light-phone-transcript", phone)
            assert problems == []
            print(f"\nappended event visible in the open page after {live_latency * 1000:.0f} ms (after the reconcile)")
        finally:
            browser.close()
