"""Snippets: bounded plain-text excerpts positioned by the first highlighted match.

Backend-neutral: a backend hands over the document text with its matches
marked (``START_MARK`` … ``END_MARK``); this module cuts the snippet, and says
when a prefix or a source window of the text provably decides it.
"""

from __future__ import annotations

import re
from typing import Final


from readmodel.core.jsvalues import (
    JS_WHITESPACE,
)


START_MARK: Final = "\ufdd0"
END_MARK: Final = "\ufdd1"
ELLIPSIS: Final = "\u2026"
MARKS_NEUTRALISED: Final = str.maketrans({"\x00": "\ufffd", START_MARK: "\ufffd", END_MARK: "\ufffd"})
"""NUL and the two markers as U+FFFD."""
_SURROGATES: Final = re.compile("[\ud800-\udfff]")


def sanitize_text(text: str) -> str:
    """Text as documents and queries hold it: NUL, the two markers and lone surrogates as U+FFFD."""
    text = text.translate(MARKS_NEUTRALISED)
    return text if text.isascii() else _SURROGATES.sub("\ufffd", text)
_WHITESPACE: Final = frozenset(JS_WHITESPACE)
_WHITESPACE_RUN: Final = re.compile("[" + "".join(re.escape(char) for char in sorted(JS_WHITESPACE)) + "]+")


def _normalised(marked_text: str, max_chars: int) -> tuple[list[str], int, int | None, bool]:
    """Whitespace-normalised characters up to where the snippet window is decided.

    Returns ``(chars, base, match_start, complete)``: the normalised characters
    from offset ``base`` on (earlier ones can never enter the window), the
    normalised offset of the first highlight, and whether the whole text was
    consumed (``False``: the window was decided before the end, so any text
    after the stopping point cannot change it).  The text before the first
    highlight holds no markers and is collapsed by a regular expression, so a
    match deep in a large document costs no per-character Python.
    """
    chars: list[str] = []
    base = 0
    match_start: int | None = None
    first = marked_text.find(START_MARK)
    if first > 0:
        chars, base = _head_before_match(marked_text[:first], max_chars + 2)
        marked_text = marked_text[first:]
    for char in marked_text:
        if char == START_MARK:
            if match_start is None:
                match_start = len(chars)
        elif char == END_MARK:
            continue
        elif char in _WHITESPACE:
            if chars and chars[-1] != " ":
                chars.append(" ")
        else:
            if match_start is not None and len(chars) > match_start + max_chars + 1:
                return chars, base, match_start + base, False
            chars.append(char)
    return chars, base, None if match_start is None else match_start + base, True


def _head_before_match(head: str, keep: int) -> tuple[list[str], int]:
    """The last ``keep`` normalised characters before the first match, and their offset.

    Only a window of the raw text is collapsed, grown until it yields more than
    ``keep`` characters (a first character that may be a cut whitespace run is
    never kept).  A head that long has at least ``keep`` normalised characters,
    and past that every quantity the snippet computes is a difference of
    offsets, so the kept characters may be placed at offset 0.
    """
    window = _head_window(head, keep)
    if window is not None:
        return list(window[-keep:]), 0
    whole = _WHITESPACE_RUN.sub(" ", head)
    if whole.startswith(" "):
        whole = whole[1:]
    base = max(0, len(whole) - keep)
    return list(whole[base:]), base


def _head_window(head: str, keep: int) -> str | None:
    """A collapsed suffix window of ``head`` with more than ``keep`` characters, or
    ``None`` when none of the growing windows short of the whole head has them.

    Only the suffix the window covers is read, so a head cut short at its start
    gives the whole head's answer whenever this is not ``None``.
    """
    width = 4 * (keep + 1)
    while width < len(head):
        window = _WHITESPACE_RUN.sub(" ", head[-width:])
        if len(window) > keep:
            return window
        width *= 4
    return None


def snippet_source_decides(source: str, max_chars: int) -> str | None:
    """The marked text to cut a snippet from, given ``sessionq_snippet_source()``'s answer.

    ``source`` is a flags character, then text before the first span (possibly
    cut short at its start), then ``highlight()``'s output from the first span
    on (possibly cut short at its end).  Returns ``head + window`` when it
    provably yields the whole document's snippet: a short head must still
    decide the collapsed text before the match (:func:`_head_window` — beyond
    that point :func:`make_snippet` never looks), and a short window must
    decide the snippet window (:func:`prefix_decides_snippet`).  ``None``
    otherwise.
    """
    flags = ord(source[0]) - ord("0")
    marked = source[1:]
    if flags & 1 and _head_window(marked[: marked.find(START_MARK)], max_chars + 2) is None:
        return None
    if not flags & 2 and not prefix_decides_snippet(marked, max_chars):
        return None
    return marked


def prefix_decides_snippet(marked_prefix: str, max_chars: int) -> bool:
    """Whether a highlighted *prefix* of a document yields the whole document's snippet.

    True when the first highlight ends before the prefix does (so its last
    token was not cut, and no earlier match can straddle the cut) and the
    snippet window is decided within the prefix.  Tokenisation is local, so
    every complete token of the prefix is a token of the document.
    """
    start = marked_prefix.find(START_MARK)
    if start < 0:
        return False
    end = marked_prefix.find(END_MARK, start)
    if end < 0 or end >= len(marked_prefix) - 1:
        return False
    return not _normalised(marked_prefix, max_chars)[3]


def make_snippet(marked_text: str, max_chars: int) -> str:
    """A bounded plain-text excerpt positioned by the first highlight (search-tools-export-spec §4).

    Normalisation stops early once the window is decided: with at least
    ``match_start + max_chars + 1`` normalised characters the text is known to
    extend past the window, so the rest of a large document never matters.
    """
    chars, base, match_start, complete = _normalised(marked_text, max_chars)
    if complete and chars and chars[-1] == " ":
        chars.pop()
    n = base + len(chars) + (0 if complete else 1)  # incomplete: more text follows
    if complete and n <= max_chars:
        return "".join(chars)
    if max_chars == 1:
        return ELLIPSIS
    m = min(match_start or 0, n - 1)
    start = max(0, m - max_chars // 3)
    prefix = ELLIPSIS if start > 0 else ""
    suffix = ELLIPSIS
    content = max_chars - len(prefix) - len(suffix)
    if content < 1:
        start = m
        suffix = ""
        content = max_chars - len(prefix)
    elif m >= start + content:
        start = m - content + 1
    end = min(n, start + content)
    if complete and end == n:
        suffix = ""
        content = max_chars - len(prefix)
        start = max(0, end - content)
    end = min(n, start + content)
    return prefix + "".join(chars[start - base : end - base]) + suffix
