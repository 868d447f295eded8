"""Cheaper ways to the highlighter's answers: snippets from document prefixes, span counts
from posting lists.

Snippets from highlighted document prefixes equal snippets from whole documents.

Search highlights only a growing prefix of a large document when that prefix
provably decides the snippet (``prefix_decides_snippet``).  These tests pin the
soundness of that proof: whenever a prefix is accepted, its snippet is exactly
the whole document's, for arbitrary texts, cuts, phrases and widths — including
cuts inside a token that would fake a match ("tool" cut to "to").  Phrase span
counts taken from the posting lists equal the markers ``highlight()`` writes.
"""

from __future__ import annotations

import re
import sqlite3

from hypothesis import example, given, settings
from hypothesis import strategies as st

from readmodel.search.modes import words_expression
from readmodel.search.requests import match_expression
from readmodel.search.snippets import END_MARK, START_MARK, make_snippet, prefix_decides_snippet
from readmodel.search import postings
from readmodel.search.postings import phrase_spans_from_postings
from readmodel.search.sqlite import _MARKS, _TERMS_DDL, _empty_index
from tests.search.test_search_rules import reference_snippet
from tests import indexdb

_HIGHLIGHT = 'highlight("texts_fts", 0, ?, ?)'

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
    conn = indexdb.connect(":memory:")
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


@settings(deadline=None)
@given(
    text=_documents(),
    query=st.lists(st.sampled_from(_WORDS + ['"the tool', "t", "c", "日"]), min_size=1, max_size=3).map(" ".join),
    width=st.integers(min_value=1, max_value=40),
    cuts=st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=6),
)
@example(text="to to to ", query="t to", width=1, cuts=[0.5])
@example(text="to to tool t", query="t to", width=1, cuts=[0.3, 0.5, 0.8])
def test_an_accepted_prefix_gives_the_whole_documents_snippet_for_words_with_a_prefix_term(text: str, query: str, width: int, cuts: list[float]) -> None:
    """The words mode's prefix snippets (a page row's first window highlighted alone): several
    phrases, the last a prefix, cuts anywhere (``tool`` cut to ``to`` matches ``"to"*``)."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE \"scratch\" USING fts5(\"text\", tokenize='unicode61')")
    expression, _ = words_expression(query, True, lambda part: [token.encode() for token in re.findall(r"\w+", part.lower())])
    if not expression:
        return
    whole = _highlight(conn, text, expression)
    if whole is None:
        # Snippets are made only for documents that match.  With several phrases a cut
        # can create the one token the whole lacks ("to to" cut to "to t" holds "t"),
        # so a prefix's match says nothing about a document that does not match.
        return
    for cut in cuts:
        marked = _highlight(conn, text[: int(cut * len(text))], expression)
        if marked is None or not prefix_decides_snippet(marked, width):
            continue
        assert make_snippet(marked, width) == make_snippet(whole, width)


def test_a_token_cut_by_the_prefix_is_never_taken_for_a_match() -> None:
    conn = indexdb.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE \"scratch\" USING fts5(\"text\", tokenize='unicode61')")
    text = "x1 " * 40 + "tool and more text after it"
    cut = text.index("tool") + 2  # "...x1 to"
    marked = _highlight(conn, text[:cut], match_expression("to"))
    assert marked is not None and marked.endswith(END_MARK)
    assert not prefix_decides_snippet(marked, 10)
    assert _highlight(conn, text, match_expression("to")) is None


def test_a_prefix_that_ends_before_the_window_is_decided_is_refused() -> None:
    conn = indexdb.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE \"scratch\" USING fts5(\"text\", tokenize='unicode61')")
    text = "the tool " + "a " * 200
    marked = _highlight(conn, text[:20], match_expression("tool"))
    assert marked is not None
    assert not prefix_decides_snippet(marked, 40)  # 40 characters past the match are not in the prefix
    assert prefix_decides_snippet(_highlight(conn, text[:120], match_expression("tool")) or "", 40)


# -- phrase span counts from the posting lists --------------------------------------------


def _index_with(documents: list[str]) -> sqlite3.Connection:
    conn = _empty_index()
    for ddl in _TERMS_DDL:
        conn.execute(ddl)
    for seq, text in enumerate(documents):
        docid = (1 << 32) | seq
        conn.execute(
            'INSERT INTO "documents" ("docid", "sid", "seq", "type", "time", "surface", "length", "text") VALUES (?, 1, ?, ?, 0, 1, ?, ?)',
            (docid, seq, "user/message", len(text), text),
        )
        indexdb.index_text(conn, docid)
    return conn


@settings(deadline=None)
@given(
    documents=st.lists(_documents(), min_size=1, max_size=8),
    query=st.lists(st.sampled_from(_WORDS), min_size=2, max_size=4).map(" ".join),
)
def test_phrase_spans_from_postings_equal_highlight_markers(documents: list[str], query: str) -> None:
    conn = _index_with(documents)
    phrase = match_expression(query)
    conn.execute('INSERT INTO temp."query_terms" ("text") VALUES (?)', (query,))
    terms = [row[0] for row in conn.execute('SELECT "term" FROM temp."query_terms_v" ORDER BY "offset"')]
    expected = conn.execute(
        f'SELECT "rowid", {_MARKS.format(h=_HIGHLIGHT)} FROM "texts_fts" WHERE "texts_fts" MATCH ? ORDER BY "rowid"',
        (START_MARK, END_MARK, START_MARK, END_MARK, START_MARK, phrase),
    ).fetchall()
    counted = phrase_spans_from_postings(conn, terms, phrase)
    assert counted is not None
    assert sorted(counted) == expected  # per text (texts_fts's rowids)


def test_phrases_of_very_common_tokens_fall_back_to_highlight(monkeypatch) -> None:
    conn = _index_with(["to tool to tool", "tool to"])
    conn.execute('INSERT INTO temp."query_terms" ("text") VALUES (?)', ("to tool",))
    monkeypatch.setattr(postings, "PHRASE_INSTANCE_BUDGET", 3)
    assert phrase_spans_from_postings(conn, ["to", "tool"], match_expression("to tool")) is None
    monkeypatch.setattr(postings, "PHRASE_INSTANCE_BUDGET", 100)
    first_text = conn.execute('SELECT "text_id" FROM "document_rows" WHERE "docid" = ?', ((1 << 32) | 0,)).fetchone()[0]
    assert phrase_spans_from_postings(conn, ["to", "tool"], match_expression("to tool")) == [(first_text, 2)]


_HEAD_PIECES = ["word", "é", " ", "\n", " " * 300, "\u3000\u2028", "x" * 50, "😀"]


@given(
    head=st.lists(st.sampled_from(_HEAD_PIECES), max_size=80).map("".join),
    tail=st.lists(st.sampled_from(["a", " ", "bc", START_MARK + "y" + END_MARK, "\n\n"]), max_size=40).map("".join),
    width=st.integers(min_value=1, max_value=40),
)
def test_snippets_after_long_heads_equal_the_plain_algorithm(head: str, tail: str, width: int) -> None:
    marked = head + START_MARK + "hit" + END_MARK + tail
    assert make_snippet(marked, width) == reference_snippet(marked, width)
