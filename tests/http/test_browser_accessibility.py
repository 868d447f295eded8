"""Accessibility basics of the page and of the HTML export (Playwright, Debian's Chromium).

In the light and the dark theme, on every view (sessions by workspace, results
with other matches open, a session with log-only events and a tool call
open, the keys dialog) and on the exported transcript file:

* contrast: every visible text/background pair, measured from the computed
  styles (WCAG 2 ratio, :mod:`tests.http.accessibility`), reaches 4.5:1
  (3:1 for large text);
* labels: every visible link, button and form control has a name;
* landmarks: one banner, one main, the search landmark, named regions, a
  document language;
* focus visible: tabbing through the page, every focused control draws an
  outline.

The lowest ratio of each theme is printed.  JavaScript errors and failed
requests fail the test; a PNG of each view.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexer.samples import build_sample_root
from tests.http.accessibility import contrast_pairs, focus_ring, landmarks, low_contrast, unlabelled_controls
from tests.http.conftest import Site
from tests.http.test_browser import CHROMIUM_ARGS, TIMEOUT_MS, executable, shots, watch  # noqa: F401
from tests.http.test_browser_daily import LONG_CWD, PARENT, READABLE, readable_events
from tests.http.test_uvicorn import serving
from tests.logfactory import header, write_log


@pytest.fixture
def served(site: Site) -> Iterator[str]:
    build_sample_root(site.root)
    write_log(site.root, header(READABLE, 0, cwd=LONG_CWD), [readable_events()])
    site.index()
    with serving(site) as base:
        yield base


def test_contrast_labels_landmarks_and_focus_in_both_themes(
    executable: str, served: str, shots: Path, tmp_path: Path  # noqa: F811
) -> None:
    from playwright.sync_api import sync_playwright

    base = served
    exported = tmp_path / "transcript.html"
    exported.write_bytes(httpx.get(f"{base}/api/session.html", params={"sessionId": READABLE, "includeLogOnly": "true"}).content)
    problems: list[str] = []
    lowest: dict[str, float] = {}
    step = iter(range(1, 100))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            for scheme in ("light", "dark"):
                context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
                context.set_default_timeout(TIMEOUT_MS)
                page = context.new_page()
                watch(page, problems)
                failures: list[Any] = []

                def check(view: str, on: Any = page, app: bool = True) -> None:
                    failures.extend((view, pair) for pair in low_contrast(on))
                    failures.extend((view, "unlabelled", control) for control in unlabelled_controls(on))
                    ratios = [pair["ratio"] for pair in contrast_pairs(on)]
                    assert ratios, view
                    lowest[scheme] = min(lowest.get(scheme, 99.0), *ratios)
                    marks = landmarks(on)
                    assert marks["banner"] == 1 and marks["main"] == 1 and marks["lang"] == "en" and marks["title"], (view, marks)
                    if app:
                        assert marks["search"] == 1, (view, marks)
                    on.screenshot(path=str(shots / f"a11y-{next(step):02d}-{scheme}-{view}.png"), full_page=False)

                # focus: Tab from the top; every stop draws a ring
                page.goto(base + "/")
                page.wait_for_selector(".workspace .session-row")
                page.evaluate("document.activeElement.blur()")
                for _ in range(14):
                    page.keyboard.press("Tab")
                    ring = focus_ring(page)
                    assert ring is not None and (ring["outline"] or ring["shadow"] != "none"), ring
                check("browse-focus")
                page.keyboard.press("Escape")

                page.goto(f"{base}/#q=tokenizer")
                page.wait_for_selector("article.hit")
                page.locator(f"article.hit[data-session-id='{PARENT}'] button.other-matches").click()
                page.wait_for_selector(f"article.hit[data-session-id='{PARENT}'] .matches .match")
                check("results")
                assert "Search results" in landmarks(page)["regions"]

                page.goto(f"{base}/#session={PARENT}&q=tokenizer")
                page.wait_for_selector(".events .event", state="attached")
                page.check("#show-log-only")
                check("session")
                assert {"Lineage", "Surface", "Events"} <= set(landmarks(page)["regions"])

                page.goto(f"{base}/#session={READABLE}")
                page.wait_for_selector("#seq-3 .message > .md")
                page.locator("#seq-3 details.tool-call summary").click()
                page.locator("#seq-3 details.reasoning summary").click()
                check("transcript")
                page.uncheck("#show-log-only")

                page.click("#keys-button")
                page.wait_for_selector("#keys[open]")
                check("keys")
                page.keyboard.press("Escape")

                # the exported file, opened from disk
                offline = context.new_page()
                watch(offline, problems)
                offline.goto(exported.as_uri())
                offline.locator("#seq-3 details.tool-call > summary").click()
                offline.locator("#seq-3 details.reasoning > summary").click()
                offline.keyboard.press("Tab")
                ring = focus_ring(offline)
                assert ring is not None and ring["outline"], ring
                check("export-file", offline, app=False)
                assert landmarks(offline)["contentinfo"] == 1
                assert failures == [], failures
                context.close()
            assert problems == []
            print(f"\nlowest text contrast: light {lowest['light']:.2f}:1, dark {lowest['dark']:.2f}:1")
        finally:
            browser.close()
