"""Snippets from highlighted document prefixes equal snippets from whole documents.

Search highlights only a growing prefix of a large document when that prefix
provably decides the snippet (``prefix_decides_snippet``).  These tests pin the
soundness of that proof: whenever a prefix is accepted, its snippet is exactly
the whole document's, for arbitrary texts, cuts, phrases and widths — including
cuts inside a token that would fake a match ("tool" cut to "to").
"""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from readmodel.search import END_MARK, START_MARK, make_snippet, match_expression, prefix_decides_snippet

_WORDS = ["to", "tool", "the", "a", "ol", "Tool", "café", "cafe", "日本", "x1", "é"]
_GAPS = [" ", "  ", "\n", "\t", "-", ", ", " \u3000 "]


def _highlight(conn: sqlite3.Connection, text: str, phrase: str) -> str | None:
    conn.execute('DELETE FROM "scratch"')
    conn.execute('INSERT INTO "scratch" ("rowid", "text") VALUES (1, ?)', (text,))
    row = conn.execute(
        'SELECT highlight("scratch", 0, ?, ?) FROM "scratch" WHERE "scratch" MATCH ?', (START_MARK, END_MARK, phrase)
    ).fetchone()
    return row[0] if row else None


@st.composite
def _documents(draw: st.DrawFn) -> str:
    tokens = draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=120))
    gaps = draw(st.lists(st.sampled_from(_GAPS), min_size=len(tokens), max_size=len(tokens)))
    return "".join(token + gap for token, gap in zip(tokens, gaps, strict=True))


@settings(deadline=None)
@given(
    text=_documents(),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
    width=st.integers(min_value=1, max_value=40),
    cuts=st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=6),
)
def test_an_accepted_prefix_gives_the_whole_documents_snippet(text: str, query: str, width: int, cuts: list[float]) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE \"scratch\" USING fts5(\"text\", tokenize='unicode61')")
    phrase = match_expression(query)
    whole = _highlight(conn, text, phrase)
    for cut in cuts:
        size = int(cut * len(text))
        marked = _highlight(conn, text[:size], phrase)
        if marked is None or not prefix_decides_snippet(marked, width):
            continue
        assert whole is not None, "a prefix match must be a match of the whole document"
        assert make_snippet(marked, width) == make_snippet(whole, width)


def test_a_token_cut_by_the_prefix_is_never_taken_for_a_match() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE \"scratch\" USING fts5(\"text\", tokenize='unicode61')")
    text = "x1 " * 40 + "tool and more text after it"
    cut = text.index("tool") + 2  # "...x1 to"
    marked = _highlight(conn, text[:cut], match_expression("to"))
    assert marked is not None and marked.endswith(END_MARK)
    assert not prefix_decides_snippet(marked, 10)
    assert _highlight(conn, text, match_expression("to")) is None


def test_a_prefix_that_ends_before_the_window_is_decided_is_refused() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE \"scratch\" USING fts5(\"text\", tokenize='unicode61')")
    text = "the tool " + "a " * 200
    marked = _highlight(conn, text[:20], match_expression("tool"))
    assert marked is not None
    assert not prefix_decides_snippet(marked, 40)  # 40 characters past the match are not in the prefix
    assert prefix_decides_snippet(_highlight(conn, text[:120], match_expression("tool")) or "", 40)
