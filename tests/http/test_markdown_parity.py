"""The server-side markdown renderer (HTML export) equals the page's ``markdown.js``.

Both render the same texts in Chromium: the page's renderer builds DOM nodes,
the Python one writes HTML text that the browser parses; the two trees must
serialise the same.  Texts are drawn by hypothesis from the characters the
syntax cares about (fences, list markers, emphasis, links with safe and unsafe
schemes, markup, JavaScript-only whitespace, CJK and emoji).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from readmodel.export.markdown import render
from readmodel.http.app import STATIC_DIR
from tests.http.test_browser import CHROMIUM_ARGS, chromium

PIECES = [
    "a", "b", "word", "漢字", "😀", "é", "1", "12.", "3)", " ", "  ", "    ", "\t", "\n", "\n\n", "\r\n", "\r",
    "#", "## ", "> ", "- ", "* ", "+ ", "`", "``", "```", "~~~", "```py\n", "*", "**", "_", "__",
    "[", "]", "(", ")", "[t](https://example.com/x)", "[t](javascript:alert(1))", "[t](data:text/html,x)",
    "<script>x()</script>", "<img src=x onerror=y()>", "&amp;", "\"", "'", "\u00a0", "\u2028", "\u3000", "\ufeff", "\x1c",
]

COMPARE = """([text, html]) => {
  const a = document.createElement("div");
  a.append(window.SessionqMarkdown.render(text));
  const b = document.createElement("template");
  b.innerHTML = html;
  return [a.innerHTML, b.innerHTML];
}"""


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = chromium()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_content("<!doctype html><meta charset=utf-8><body></body>")
            page.add_script_tag(content=(STATIC_DIR / "markdown.js").read_text())
            yield page
        finally:
            browser.close()


def same(page: Any, text: str) -> None:
    from_js, from_python = page.evaluate(COMPARE, [text, render(text)])
    assert from_python == from_js, repr(text)


@pytest.mark.parametrize(
    "text",
    [
        "**Bold** and `code`, *em* and _em_, __strong__ but snake_case_name stays",
        "```python\nprint('<hi>')\n```\n\n- one\n- two\n  continued\n\n7. seven\n8. eight",
        "# Title #\n> quoted **text**\n> more\n\n    indented code\n\n    more code",
        "[ok](https://example.com/a?b=1&c=2) [bad](javascript:alert(1)) <script>alert(1)</script>",
        "ビルドして下さい 😀\nsecond line",
        "``a ` b`` and ` padded `",
        "unclosed ```\n```\ncode without end",
    ],
)
def test_known_texts_render_the_same_as_the_page(page: Any, text: str) -> None:
    same(page, text)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(PIECES), max_size=24).map("".join))
def test_random_texts_render_the_same_as_the_page(page: Any, text: str) -> None:
    same(page, text)
