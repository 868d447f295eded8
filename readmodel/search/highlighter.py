"""FTS5's ``highlight()`` of one text, on the reading host (a server backend's snippets).

A snippet is cut from the document text with its matches marked as FTS5's
``highlight()`` marks them (:mod:`readmodel.search.snippets`).  A server
backend stores the text (``documents.text``) but no FTS5 table, so the
reading host highlights the page's few documents itself in an in-memory FTS5
table with the index's own tokenizer (:data:`readmodel.search.tokens.TOKENIZE`):
the same tokens, so the same marks as the SQLite backend's ``highlight()``
over ``texts_fts``.  PostgreSQL never tokenises.

As the SQLite backend without its accelerator does, a prefix of the text is
tried first (plus four snippet widths, then sixteen times as long), and the
first that provably decides the snippet (:func:`prefix_decides_snippet`) is
used; the whole text is the fallback.  Not thread-safe: one per thread.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from readmodel.search.snippets import END_MARK, START_MARK, prefix_decides_snippet
from readmodel.search.tokens import TOKENIZE

PREFIX_CHARS: Final = 2048
"""The first prefix tried, before the four snippet widths (as the SQLite backend's)."""


class Highlighter:
    """``highlight()`` of texts for FTS5 match expressions, in a private in-memory database."""

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._conn.execute(f"CREATE VIRTUAL TABLE scratch USING fts5(text, tokenize='{TOKENIZE}')")

    def marked(self, text: str, expression: str) -> str:
        """``text`` with the matches of ``expression`` between the markers (``""``: no match)."""
        conn = self._conn
        conn.execute("BEGIN")
        try:
            conn.execute("INSERT INTO scratch (rowid, text) VALUES (1, ?)", (text,))
            row = conn.execute("SELECT highlight(scratch, 0, ?, ?) FROM scratch WHERE scratch MATCH ?", (START_MARK, END_MARK, expression)).fetchone()
        finally:
            conn.execute("ROLLBACK")  # the table stays empty
        return row[0] if row else ""

    def snippet_source(self, text: str, expression: str, width: int) -> str:
        """What the snippet of ``text`` needs: a marked prefix that decides it, else the whole text marked."""
        first = PREFIX_CHARS + 4 * width
        for size in (first, 16 * first):
            if size >= len(text):
                break
            marked = self.marked(text[:size], expression)
            if marked and prefix_decides_snippet(marked, width):
                return marked
        return self.marked(text, expression)

    def close(self) -> None:
        self._conn.close()
