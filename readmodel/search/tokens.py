"""The tokens FTS5 makes of a document, computed on the indexing host.

PostgreSQL's text parsers cannot reproduce FTS5's ``unicode61`` (they keep
``foo-bar``, URLs, ``3.14`` whole and do not fold diacritics), so a PostgreSQL
index must never tokenise: the indexer computes each document's tokens here,
with SQLite's own tokenizer, and stores terms with positions (docs/postgres.md).

:class:`Tokenizer` returns, for one text, the list of terms FTS5's index holds
for it in position order (position *i* is the *i*-th term): the tokenizer and
options of the index's FTS5 table (:data:`TOKENIZE`, read from the DDL), each
term cut at FTS5's 32,768-byte limit.  Terms are ``bytes``: the cut may split
a UTF-8 sequence, exactly as the SQLite index stores it.

Two paths, equal by test (tests/search/test_tokens.py):

* the C accelerator's ``sessionq_tokens()`` calls the tokenizer through
  ``fts5_api`` (``xFindTokenizer`` + ``xTokenize``) in the sqlite3 module's own
  SQLite library — the one that builds the SQLite index;
* without it, a scratch FTS5 table in memory indexes the text and its
  ``fts5vocab`` instance table is read back (slower, same answer).

Not thread-safe: one :class:`Tokenizer` per thread.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Final

from readmodel.search import accelerator
from readmodel.store.schema import FTS_DDL

MAX_TOKEN_BYTES: Final = 32_768
"""FTS5 stores at most this many bytes of a token (``FTS5_MAX_TOKEN_SIZE``)."""

_TOKENIZE_OPTION: Final = re.search(r"tokenize='([^']*)'", FTS_DDL)
assert _TOKENIZE_OPTION is not None, "the FTS5 DDL names its tokenizer"
TOKENIZE: Final = _TOKENIZE_OPTION.group(1)
"""The index's ``tokenize=`` option (``unicode61``): the tokenizer and its arguments."""


class Tokenizer:
    """FTS5's terms of texts, as the SQLite index stores them."""

    def __init__(self, *, accelerated: bool | None = None) -> None:
        """``accelerated``: force the C path (``True``), the scratch-table path
        (``False``), or take the C path when it is available (``None``)."""
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        installed = accelerator.install(self._conn) if accelerated is not False else False
        if accelerated and not installed:
            raise RuntimeError("the search accelerator (readmodel/search/_ftsaux.c) is not available")
        self.accelerated = installed
        if not installed:
            self._conn.execute(f"CREATE VIRTUAL TABLE scratch USING fts5(text, tokenize='{TOKENIZE}')")
            self._conn.execute("CREATE VIRTUAL TABLE scratch_terms USING fts5vocab(scratch, 'instance')")

    def tokens(self, text: str) -> list[bytes]:
        """The terms of ``text`` in position order."""
        if self.accelerated:
            blob = self._conn.execute("SELECT sessionq_tokens(?, ?)", (text, TOKENIZE)).fetchone()[0]
            return blob.split(b"\0") if blob else []
        conn = self._conn
        conn.execute("BEGIN")
        try:
            conn.execute("INSERT INTO scratch (rowid, text) VALUES (1, ?)", (text,))
            rows = conn.execute('SELECT "offset", CAST("term" AS BLOB) FROM scratch_terms WHERE "doc" = 1').fetchall()
        finally:
            conn.execute("ROLLBACK")  # the scratch table stays empty
        rows.sort()
        return [term for _offset, term in rows]

    def close(self) -> None:
        self._conn.close()
