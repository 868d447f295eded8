"""Substring candidates from the gram index (SQLite): the body of the substring seam.

:func:`candidates` implements
:func:`readmodel.search.substring.index_candidates`: the texts holding
every chosen gram of the query (:func:`readmodel.projection.grams.query_grams`)
in ``document_grams`` (:mod:`readmodel.store.gramindex`, one row per distinct
text), as one FTS5 ``MATCH`` of the grams' words (implicit AND) that SQLite
streams.  Every text the query matches holds all of the query's grams, so the
answer is a superset of the matching texts, and the caller verifies each
candidate.

A long document (over :data:`~readmodel.projection.grams.LONG_CHARS` code
points: long tool outputs, which hold nearly every bigram) is taken by its
trigrams instead, when the query has any: a tool output that merely holds the
query's letter pairs somewhere is no candidate.

Choosing grams: FTS5 intersects posting lists by skipping through the longer
ones, so cost grows with the number of grams and with the length of the
shortest list.  A long query (a pasted line, 100 KB) would otherwise name
thousands, so at most :data:`MAX_GRAMS` are used, the likely rarest first by
a fixed estimate (non-ASCII before punctuation and digits before rare
letters before common letters before spaces) and, among equals, spread over
the query.  Fewer grams only widen the candidates; verification keeps the
answer exact.

``None`` (scan and verify everything) when the index cannot answer: no gram
table of the running scheme (:func:`readmodel.store.gramindex.is_current`:
not built yet, or built by another Unicode version), or a query of a single
ASCII character, which has no gram.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from readmodel.projection.grams import LONG_MARK, gram_token, query_grams, query_trigrams
from readmodel.store import gramindex

MAX_GRAMS: Final = 8
"""Bigrams of one query the index intersects (the rest are left to verification)."""
MAX_TRIGRAMS: Final = 32
"""Trigrams of one query: only long documents have them, so their posting lists are short."""

_COMMON_LETTERS: Final = frozenset("etaoinsrlhcdu")
_SQL: Final = f'SELECT "rowid" FROM "{gramindex.TABLE}" WHERE "{gramindex.TABLE}" MATCH ?'


def _char_cost(char: str) -> int:
    """How common a folded code point is likely to be in documents (0: rare)."""
    if char > "\x7f":
        return 0
    if char == " ":
        return 4
    if char in _COMMON_LETTERS:
        return 3
    if char.isalpha():
        return 2
    return 1  # digits and punctuation: common in code, yet narrower than letters together


def choose_grams(grams: list[str], limit: int = MAX_GRAMS) -> list[str]:
    """At most ``limit`` of ``grams`` (in query order), the likely rarest, spread over the query."""
    if len(grams) <= limit:
        return grams
    ranked = sorted(range(len(grams)), key=lambda index: (sum(map(_char_cost, grams[index])), index))
    chosen: list[int] = []
    # Two passes: first grams not adjacent to a chosen one (overlapping bigrams
    # narrow less than distant ones), then whatever is left in rank order.
    for index in ranked:
        if len(chosen) < limit and index - 1 not in chosen and index + 1 not in chosen:
            chosen.append(index)
    for index in ranked:
        if len(chosen) < limit and index not in chosen:
            chosen.append(index)
    return [grams[index] for index in sorted(chosen)]


def match_expression(query: str) -> str | None:
    """The FTS5 expression of a normalised query; ``None``: no gram.

    The chosen bigrams' words (implicit AND); from three code points on, a
    long document (:data:`~readmodel.projection.grams.LONG_MARK`) must hold
    the chosen trigrams instead: ``((bigrams) NOT l) OR (trigrams)``.
    """
    grams = query_grams(query)
    if not grams:
        return None
    bigrams = " ".join(gram_token(gram) for gram in choose_grams(grams))
    trigrams = query_trigrams(query)
    if not trigrams:
        return bigrams
    chosen = choose_grams(trigrams, MAX_TRIGRAMS)
    return f"(({bigrams}) NOT {LONG_MARK}) OR ({' '.join(gram_token(gram) for gram in chosen)})"


def candidates(conn: sqlite3.Connection, query: str, doc_range: tuple[int, int] | None) -> tuple[str, list[Any]] | None:
    """The seam's answer: ``(sql, params)`` selecting a superset of the matching text ids, or ``None``.

    ``doc_range`` is not used: the table is keyed by text (schema 0018), and a text
    is one row whatever the number of documents holding it, so the candidates of
    the broadest query are at most the index's distinct texts; the caller keeps
    those some document in scope holds.
    """
    expression = match_expression(query)
    if expression is None:
        return None
    try:
        if not gramindex.is_current(conn):
            return None
    except sqlite3.OperationalError:  # an index without index_meta.grams (not at this schema)
        return None
    return _SQL, [expression]
