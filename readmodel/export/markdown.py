"""Markdown to safe HTML text: the web page's transcript subset, server-side.

The same rules as the page's ``static/markdown.js`` (a test renders random
texts with both, in Chromium, and compares the trees), as HTML text for files
that must read without scripts (the HTML transcript export).

Safety by construction: every piece of the message is escaped text; the only
markup is what the renderer writes itself.  ``<script>``, ``<img onerror>``
and every other tag in a message stay visible text.  Links are written only
for ``http(s)://`` URLs; any other scheme (``javascript:``, ``data:``, …)
stays the source text.

The subset: paragraphs (a single newline is a line break), ATX headings
(``<p class="md-heading md-hN"><strong>``), fenced and indented code blocks as
``<pre><code>``, bullet and numbered lists, block quotes, code spans,
``**strong**`` / ``__strong__``, ``*emphasis*`` / ``_emphasis_`` and
``[links](url)``.

JavaScript's rules are kept where they differ from Python's: its whitespace
set (``\\s``, ``trim``), ASCII ``\\d``, and ``.`` not matching U+2028/U+2029.
Python's ``\\w`` stands for JavaScript's ``[\\p{L}\\p{N}_]``: compared in
Chromium over every code point below U+30000 around ``_``, ``*`` and ``**``,
the two differ only on characters Python's Unicode database (14.0 in Python
3.11) does not assign yet and the browser's newer one calls letters.
"""

from __future__ import annotations

import re
from html import escape
from typing import Final

from readmodel.core.jsvalues import JS_WHITESPACE_CLASS, js_trim

_WS: Final = JS_WHITESPACE_CLASS[1:-1]  # the class's members, to build other classes
_DOT: Final = "[^\n\r\u2028\u2029]"  # JavaScript's "." (no s flag)
# A letter, number or "_" on either side disables "__" and "_" (JavaScript: [\p{L}\p{N}_]).
_INLINE: Final = re.compile(
    r"(`+)([\s\S]*?[^`])\1(?!`)"
    r"|\*\*([^*\n]+?)\*\*"
    r"|(?<!\w)__([^_\n]+?)__(?!\w)"
    rf"|\*([^*{_WS}][^*\n]*?)\*"
    rf"|(?<!\w)_([^_{_WS}][^_\n]*?)_(?!\w)"
    rf"|\[([^\]\n]+)\]\(([^){_WS}]+)\)"
)
SAFE_URL: Final = re.compile(rf'^https?://[^{_WS}<>"]+$', re.IGNORECASE)

_FENCE: Final = re.compile(rf"^ {{0,3}}(```+|~~~+){JS_WHITESPACE_CLASS}*([A-Za-z0-9_+.#-]*){JS_WHITESPACE_CLASS}*$")
_HEADING: Final = re.compile(rf"^ {{0,3}}(#{{1,6}}){JS_WHITESPACE_CLASS}+({_DOT}*?){JS_WHITESPACE_CLASS}*#*{JS_WHITESPACE_CLASS}*$")
_BULLET: Final = re.compile(rf"^ {{0,3}}[-*+]{JS_WHITESPACE_CLASS}+({_DOT}*)$")
_NUMBERED: Final = re.compile(rf"^ {{0,3}}([0-9]{{1,9}})[.)]{JS_WHITESPACE_CLASS}+({_DOT}*)$")
_QUOTE: Final = re.compile(rf"^ {{0,3}}>{JS_WHITESPACE_CLASS}?({_DOT}*)$")
_INDENTED: Final = re.compile(rf"^( {{4}}|\t)({_DOT}*)$")
_CONTINUATION: Final = re.compile(rf"^{JS_WHITESPACE_CLASS}+[^{_WS}]")
def text(value: str) -> str:
    """``value`` as HTML text (what ``textContent`` would hold)."""
    return escape(value, quote=False)


def inline(value: str) -> str:
    """The inline markup of one line of text, as HTML."""
    out: list[str] = []
    last = 0
    for m in _INLINE.finditer(value):
        if m.start() > last:
            out.append(text(value[last : m.start()]))
        last = m.end()
        if m.group(2) is not None:
            code = m.group(2)
            if len(code) > 2 and code.startswith(" ") and code.endswith(" "):
                code = code[1:-1]
            out.append(f"<code>{text(code)}</code>")
        elif m.group(3) is not None or m.group(4) is not None:
            out.append(f"<strong>{inline(m.group(3) if m.group(3) is not None else m.group(4))}</strong>")
        elif m.group(5) is not None or m.group(6) is not None:
            out.append(f"<em>{inline(m.group(5) if m.group(5) is not None else m.group(6))}</em>")
        elif SAFE_URL.match(m.group(8)):
            href = escape(m.group(8), quote=True)
            out.append(f'<a href="{href}" rel="noopener noreferrer nofollow" target="_blank">{inline(m.group(7))}</a>')
        else:
            out.append(text(m.group(0)))  # an unsafe scheme: the source text, inert
    if last < len(value):
        out.append(text(value[last:]))
    return "".join(out)


def render(value: str) -> str:
    """The block structure of ``value`` (markdown) as HTML."""
    src = re.sub(r"\r\n?", "\n", value).split("\n")
    out: list[str] = []
    i = 0
    n = len(src)
    while i < n:
        line = src[i]
        if not js_trim(line):
            i += 1
            continue
        if m := _FENCE.match(line):
            close = m.group(1)[0] * 3
            body: list[str] = []
            i += 1
            while i < n and not (js_trim(src[i]).startswith(close) and not re.sub("[`~]", "", js_trim(src[i]))):
                body.append(src[i])
                i += 1
            i += 1  # the closing fence (or the end)
            lang = f' data-lang="{escape(m.group(2), quote=True)}"' if m.group(2) else ""
            out.append(f"<pre><code{lang}>{text(chr(10).join(body))}</code></pre>")
        elif m := _HEADING.match(line):
            out.append(f'<p class="md-heading md-h{len(m.group(1))}"><strong>{inline(m.group(2))}</strong></p>')
            i += 1
        elif _BULLET.match(line) or _NUMBERED.match(line):
            numbered = not _BULLET.match(line)
            pattern = _NUMBERED if numbered else _BULLET
            start = int(_NUMBERED.match(line).group(1)) if numbered else 1  # type: ignore[union-attr]
            items: list[list[str]] = []
            while i < n and js_trim(src[i]):
                if lm := pattern.match(src[i]):
                    items.append([inline(lm.group(2) if numbered else lm.group(1))])
                elif items and _CONTINUATION.match(src[i]):
                    items[-1].append("<br>" + inline(js_trim(src[i])))
                else:
                    break
                i += 1
            tag = "ol" if numbered else "ul"
            attrs = f' start="{start}"' if numbered and start != 1 else ""
            out.append(f"<{tag}{attrs}>" + "".join(f"<li>{''.join(item)}</li>" for item in items) + f"</{tag}>")
        elif _QUOTE.match(line):
            quoted: list[str] = []
            while i < n and (qm := _QUOTE.match(src[i])):
                quoted.append(qm.group(1))
                i += 1
            out.append(f"<blockquote>{render(chr(10).join(quoted))}</blockquote>")
        elif _INDENTED.match(line):
            code: list[str] = []
            while i < n and (_INDENTED.match(src[i]) or (not js_trim(src[i]) and i + 1 < n and _INDENTED.match(src[i + 1]))):
                code.append(re.sub(r"^( {4}|\t)", "", src[i]))
                i += 1
            out.append(f"<pre><code>{text(chr(10).join(code))}</code></pre>")
        else:
            para: list[str] = []
            while (
                i < n
                and js_trim(src[i])
                and not _FENCE.match(src[i])
                and not _HEADING.match(src[i])
                and not _QUOTE.match(src[i])
                and not (para and (_BULLET.match(src[i]) or _NUMBERED.match(src[i])))
            ):
                para.append(src[i])
                i += 1
            out.append("<p>" + "<br>".join(inline(p) for p in para) + "</p>")
    return "".join(out)
