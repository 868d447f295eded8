"""The HTML transcript export in a real browser (Playwright, Debian's Chromium).

From the page: open a session, press "Export HTML", and the download is the
file ``GET /api/session.html`` serves.  Then that file, opened from disk in
Chromium with JavaScript enabled and its Content-Security-Policy bypassed (so
the escaping alone is tested), light and dark, at 390 and 1,280 px: it
requests nothing but itself, no script runs (the hostile message's
``<script>``, ``onerror`` and ``javascript:`` link stay text), the CJK and
emoji text is there, reasoning and the tool call are collapsed and open on a
click, "show all N characters" shows the whole output in place of its start,
and nothing overflows horizontally.  JavaScript errors and failed requests
fail the test; a PNG of each step goes to the screenshots directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.http.conftest import Site
from tests.http.test_browser import CHROMIUM_ARGS, TIMEOUT_MS, executable, shots, watch  # noqa: F401
from tests.http.test_browser_daily import OUTPUT, READABLE, daily, no_overflow  # noqa: F401
from tests.http.test_export_html import without_stamp


def test_export_html_from_the_page_reads_offline_and_runs_nothing(
    executable: str, daily: tuple[Site, str, Path], shots: Path, tmp_path: Path  # noqa: F811
) -> None:
    from playwright.sync_api import sync_playwright

    _, base, _ = daily
    served = httpx.get(f"{base}/api/session.html", params={"sessionId": READABLE}).text
    problems: list[str] = []
    step = iter(range(1, 100))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            watch(page, problems)

            def shot(name: str, on: Any) -> None:
                on.screenshot(path=str(shots / f"export-html-{next(step):02d}-{name}.png"), full_page=False)

            # 1. the button sits beside the ZIP export; it downloads the route's file
            page.goto(f"{base}/#session={READABLE}")
            page.wait_for_selector("#seq-3 .message > .md")
            button = page.locator(".actions button.export-html")
            assert button.inner_text() == "Export HTML"
            shot("page-button", page)
            with page.expect_download() as info:
                button.click()
            download = info.value
            assert download.suggested_filename == f"dsh-session-{READABLE}.html"
            saved = tmp_path / download.suggested_filename
            download.save_as(saved)
            assert without_stamp(saved.read_text(encoding="utf-8")) == without_stamp(served)
            page.wait_for_function("document.querySelector('.export-status').textContent.startsWith('Download started')")
            assert problems == []

            # 2. the file from disk, scripts enabled: nothing loads, nothing runs
            for scheme, width in (("light", 1280), ("dark", 390), ("light", 390), ("dark", 1280)):
                # the file's Content-Security-Policy is bypassed: the escaping alone must keep the message inert
                reader = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme, java_script_enabled=True, bypass_csp=True)
                reader.set_default_timeout(TIMEOUT_MS)
                offline = reader.new_page()
                watch(offline, problems)
                requested: list[str] = []
                offline.on("request", lambda request: requested.append(request.url))
                offline.goto(saved.as_uri())
                offline.wait_for_selector("#seq-3")
                assert requested == [saved.as_uri()], requested
                assert offline.evaluate("window.__pwned") is None
                assert offline.locator("script, img, iframe, object, embed").count() == 0
                assert offline.locator("a[href^='javascript']").count() == 0
                assert "<script>window.__pwned = 1</script>" in offline.locator("#seq-3 .message > .md").inner_text()
                assert "ビルドして下さい 😀" in offline.locator("#seq-1").inner_text()
                assert offline.title().startswith("ビルドして下さい") or READABLE in offline.title()
                assert offline.locator("#seq-0").count() == 0  # log-only left out
                expected_bg = "rgb(23, 24, 28)" if scheme == "dark" else "rgb(246, 246, 248)"
                assert offline.evaluate("getComputedStyle(document.body).backgroundColor") == expected_bg
                no_overflow(offline)
                shot(f"file-{scheme}-{width}", offline)
                if (scheme, width) == ("light", 1280):
                    # collapsed parts open on a click
                    reasoning = offline.locator("#seq-3 details.reasoning")
                    assert reasoning.get_attribute("open") is None and not reasoning.locator(".md").is_visible()
                    reasoning.locator("summary").click()
                    assert reasoning.locator(".md").is_visible()
                    call = offline.locator("#seq-3 details.tool-call")
                    assert call.get_attribute("open") is None
                    call.locator("summary").first.click()
                    output = call.locator(".tool-output")
                    assert "line of build output" in output.inner_text()
                    assert "END-OF-OUTPUT" not in output.inner_text()  # only the start shows
                    show_all = output.locator("details.show-all > summary")
                    assert show_all.inner_text() == f"show all {len(OUTPUT):,} characters"
                    show_all.click()
                    assert "END-OF-OUTPUT" in output.inner_text()
                    assert not output.locator(".preview").is_visible()  # the start is not shown twice
                    # the result's own event links back to the call
                    offline.locator("#seq-5 a[href='#seq-3']").click()
                    assert offline.evaluate("location.hash") == "#seq-3"
                    no_overflow(offline)
                    shot("file-opened", offline)
                reader.close()
            assert problems == []
        finally:
            browser.close()
