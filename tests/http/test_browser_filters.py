"""Filters and the search mode in the page and in the URL (Playwright, Debian's Chromium).

Each control is used as a person would (select, type, pick a date), then:
its value is in the URL; the page shows what the API answers for the same
request; a reload of that URL restores the control and the same answer.

* results: the search mode (words by default, phrase, substring → ``mode=``),
  workspace (``ws=``), created from/to (``from=``/``to=``), event type
  (``type=``) and surface (``surface=``);
* a session view: event type and surface (only matching events show, log-only
  ones included);
* browsing: workspace and created range.

Light at 1,280 px, then dark at 390 px; no horizontal overflow; JavaScript
errors and failed requests fail the test; a PNG of each step.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from indexer.samples import build_sample_root
from tests.http.conftest import Site
from tests.http.test_browser import CHROMIUM_ARGS, TIMEOUT_MS, api, bulk_session, executable, shots, watch  # noqa: F401
from tests.http.test_browser_daily import PARENT, no_overflow
from tests.http.test_uvicorn import serving
from tests.logfactory import assistant, header, user, write_log

LATE = "late-october-session"
LATE_CREATED = int(datetime(2026, 10, 5, 9, 0, tzinfo=timezone.utc).timestamp() * 1000)


def day_ms(day: str, end: bool = False) -> int:
    start = int(datetime.fromisoformat(day).replace(tzinfo=timezone.utc).timestamp() * 1000)
    return start + 86_400_000 - 1 if end else start


@pytest.fixture
def filtered(site: Site) -> Iterator[tuple[Site, str]]:
    build_sample_root(site.root)
    for i in range(6):
        bulk_session(site.root, i, f"bulk-{i:02d}")
    events = [user(0, "does the tokenizer handle trailing commas in October too?"), assistant(1, "Yes: the tokenizer rules did not change.")]
    for n, event in enumerate(events):
        event["time"] = LATE_CREATED + 1000 * (n + 1)
    write_log(site.root, header(LATE, LATE_CREATED, cwd="/home/demo/late"), [events])
    site.index()
    with serving(site) as base:
        yield site, base


def hits(page: Any) -> list[str]:
    return page.locator("article.hit").evaluate_all("cards => cards.map(c => c.dataset.sessionId)")


def expected(base: str, query: str, match: str, **filters: Any) -> list[str]:
    params: dict[str, Any] = {"query": query, "match": match, "limit": 20, **filters}
    return [hit["header"]["id"] for hit in api(base, "searchSessions", params)["items"]]


def test_filters_and_search_mode_live_in_the_url(executable: str, filtered: tuple[Site, str], shots: Path) -> None:  # noqa: F811
    from playwright.sync_api import sync_playwright

    _, base = filtered
    problems: list[str] = []
    step = iter(range(1, 100))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light", timezone_id="UTC")
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            watch(page, problems)

            def shot(name: str, on: Any = None) -> None:
                (on or page).screenshot(path=str(shots / f"filters-{next(step):02d}-{name}.png"), full_page=False)

            def settle(count_of: list[str]) -> None:
                page.wait_for_function(
                    "n => document.querySelectorAll('article.hit').length === n && !document.querySelector('.hint:not(.new-matches)')?.textContent.startsWith('Searching')",
                    arg=len(count_of),
                )
                assert sorted(hits(page)) == sorted(count_of)

            def reload_keeps(url_part: str, control: str, value: str, answer: list[str]) -> None:
                assert url_part in page.url, page.url
                page.reload()
                page.wait_for_selector("article.hit, .results .hint")
                assert page.locator(control).input_value() == value
                settle(answer)

            # 1. the search mode: words by default (any order), left out of the URL
            page.goto(base + "/")
            page.wait_for_selector(".workspace .session-row")
            mode = page.locator("#mode")
            assert mode.is_visible() and mode.input_value() == "words"
            assert page.locator("#q").get_attribute("placeholder") == "Search all sessions (all words, any order)"
            page.fill("#q", "commas trailing")
            page.press("#q", "Enter")
            words = expected(base, "commas trailing", "words")
            assert PARENT in words and LATE in words
            settle(words)
            assert "mode=" not in page.url
            marks = page.locator(f"article.hit[data-session-id='{PARENT}'] .match.best mark").all_inner_texts()
            assert {m.lower() for m in marks} <= {"commas", "trailing"} and marks
            shot("mode-words")
            # phrase: the same words out of order match nothing
            mode.select_option("phrase")
            page.wait_for_function("location.hash.includes('mode=phrase')")
            page.wait_for_selector(".results .hint")
            assert page.locator(".results .hint").inner_text() == "No session contains this phrase."
            assert expected(base, "commas trailing", "phrase") == []
            reload_keeps("mode=phrase", "#mode", "phrase", [])
            shot("mode-phrase")
            # substring: text inside words
            page.fill("#q", "okeniz")
            page.press("#q", "Enter")
            mode.select_option("substring")
            page.wait_for_function("location.hash.includes('mode=substring')")
            substring = expected(base, "okeniz", "substring")
            assert PARENT in substring and expected(base, "okeniz", "words") == []
            settle(substring)
            assert set(m.lower() for m in page.locator("article.hit .match.best mark").all_inner_texts()) == {"okeniz"}
            reload_keeps("mode=substring", "#mode", "substring", substring)
            # the mode travels with the query into a session and back
            page.click(f"article.hit[data-session-id='{PARENT}'] a.session-title")
            page.wait_for_selector(".events .event mark", state="attached")
            assert "mode=substring" in page.url
            assert set(page.locator(".events mark").evaluate_all("ms => ms.map(m => m.textContent.toLowerCase())")) == {"okeniz"}
            page.click("p.back a")
            page.wait_for_selector("article.hit")
            assert "mode=substring" in page.url and mode.input_value() == "substring"
            shot("mode-substring")

            # 2. results filters: each lands in the URL and comes back from it
            mode.select_option("words")
            page.fill("#q", "tokenizer")
            page.press("#q", "Enter")
            every = expected(base, "tokenizer", "words")
            settle(every)
            page.select_option("#filter-ws", "/home/demo/late")
            page.wait_for_function("location.hash.includes('ws=')")
            in_late = expected(base, "tokenizer", "words", sessionFilters=[{"kind": "cwd", "values": ["/home/demo/late"]}])
            assert in_late == [LATE]
            settle(in_late)
            reload_keeps("ws=%2Fhome%2Fdemo%2Flate", "#filter-ws", "/home/demo/late", in_late)
            page.click("button.clear-filters")
            settle(every)
            page.fill("#filter-from", "2026-10-01")
            page.wait_for_function("location.hash.includes('from=2026-10-01')")
            october = expected(base, "tokenizer", "words", sessionFilters=[{"kind": "created-at", "from": day_ms("2026-10-01")}])
            assert october == [LATE]
            settle(october)
            reload_keeps("from=2026-10-01", "#filter-from", "2026-10-01", october)
            page.fill("#filter-from", "")
            page.fill("#filter-to", "2026-09-30")
            page.wait_for_function("location.hash.includes('to=2026-09-30') && !location.hash.includes('from=')")
            september = expected(base, "tokenizer", "words", sessionFilters=[{"kind": "created-at", "to": day_ms("2026-09-30", end=True)}])
            assert LATE not in september and PARENT in september
            settle(september)
            reload_keeps("to=2026-09-30", "#filter-to", "2026-09-30", september)
            page.click("button.clear-filters")
            settle(every)
            page.fill("#filter-type", "assistant/message")
            page.press("#filter-type", "Enter")
            page.wait_for_function("location.hash.includes('type=assistant%2Fmessage')")
            typed = expected(base, "tokenizer", "words", eventFilters=[{"kind": "type", "values": ["assistant/message"]}])
            settle(typed)
            assert set(page.locator("article.hit .match.best .mono:not(a)").all_inner_texts()) == {"assistant/message"}
            reload_keeps("type=assistant%2Fmessage", "#filter-type", "assistant/message", typed)
            page.select_option("#filter-surface", "shadowed")
            page.wait_for_function("location.hash.includes('surface=shadowed')")
            both = expected(
                base, "tokenizer", "words",
                eventFilters=[{"kind": "type", "values": ["assistant/message"]}, {"kind": "surface", "values": ["shadowed"]}],
            )
            settle(both)
            assert set(page.locator("article.hit .match.best .badge").all_inner_texts()) <= {"shadowed"}
            reload_keeps("surface=shadowed", "#filter-surface", "shadowed", both)
            assert page.locator("#filter-type").input_value() == "assistant/message"
            no_overflow(page)
            shot("results-filters")

            # 3. a session view: event type and surface
            surfaces = {r["seq"]: r["surface"] for r in api(base, "listEvents", {"sessionId": PARENT})}
            types = {e["seq"]: e["type"] for e in api(base, "readSession", {"sessionId": PARENT})["events"]}
            page.goto(f"{base}/#session={PARENT}")
            page.wait_for_selector(".events .event", state="attached")
            visible = "rows => rows.filter(r => r.offsetParent !== null).map(r => Number(r.dataset.seq))"
            page.fill("#event-filter-type", "user/message")
            page.press("#event-filter-type", "Enter")
            page.wait_for_function("location.hash.includes('type=user%2Fmessage')")
            page.wait_for_selector(".events.filtering")
            users = sorted(seq for seq, kind in types.items() if kind == "user/message")
            assert page.locator(".events .event").evaluate_all(visible) == users
            assert page.locator(".filter-count").inner_text() == f"{len(users)} matching events shown"
            page.reload()
            page.wait_for_selector(".events.filtering .event", state="attached")
            assert page.locator("#event-filter-type").input_value() == "user/message"
            assert page.locator(".events .event").evaluate_all(visible) == users
            shot("session-type")
            page.click(".event-filters button.clear-filters")
            page.wait_for_function("!location.hash.includes('type=')")
            page.wait_for_selector(".events:not(.filtering) .event", state="attached")
            page.select_option("#event-filter-surface", "log-only")
            page.wait_for_function("location.hash.includes('surface=log-only')")
            page.wait_for_selector(".events.filtering .event", state="attached")
            assert not page.locator("#show-log-only").is_checked()  # the filter shows them all the same
            log_only = sorted(seq for seq, surface in surfaces.items() if surface == "log-only")
            assert page.locator(".events .event").evaluate_all(visible) == log_only
            page.reload()
            page.wait_for_selector(".events.filtering .event", state="attached")
            assert page.locator("#event-filter-surface").input_value() == "log-only"
            assert page.locator(".events .event").evaluate_all(visible) == log_only
            no_overflow(page)
            shot("session-surface")

            # 4. browsing: workspace and created range
            page.goto(f"{base}/#ws=%2Fhome%2Fdemo%2Fbench&from=2026-09-21&to=2026-09-21")
            page.wait_for_selector(".workspace .session-row")
            assert page.locator("#filter-ws").input_value() == "/home/demo/bench"
            assert page.locator("#filter-from").input_value() == "2026-09-21" and page.locator("#filter-to").input_value() == "2026-09-21"
            assert page.locator(".workspace").evaluate_all("s => s.map(n => n.dataset.cwd)") == ["/home/demo/bench"]
            page.fill("#filter-from", "2026-10-01")
            page.wait_for_function("location.hash.includes('from=2026-10-01')")
            page.wait_for_selector(".workspace .hint")
            assert page.locator(".workspace .hint").inner_text() == "No sessions in this range."
            shot("browse-filters")
            assert problems == []

            # 5. dark, 390 px: the controls fit
            dark = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark", timezone_id="UTC")
            dark.set_default_timeout(TIMEOUT_MS)
            phone = dark.new_page()
            watch(phone, problems)
            phone.goto(f"{base}/#q=tokenizer&mode=phrase&type=assistant%2Fmessage")
            phone.wait_for_selector("article.hit")
            assert phone.locator("#mode").input_value() == "phrase"
            no_overflow(phone)
            shot("dark-phone-results", phone)
            phone.goto(f"{base}/#session={PARENT}&surface=current")
            phone.wait_for_selector(".events.filtering .event", state="attached")
            no_overflow(phone)
            shot("dark-phone-session", phone)
            assert problems == []
        finally:
            browser.close()
