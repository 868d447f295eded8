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

:func:`postings` and :func:`phrase_spans` are what a server backend stores and
ranks with (docs/postgres.md): each term's positions in a document, and the
number of spans ``highlight()`` marks for a phrase — its merge rule over the
phrase instances, as ``sessionq_spans()`` (``_ftsaux.c``) and
:mod:`readmodel.search.postings` count them.  A document's count is at most
the smallest term frequency among the phrase's terms, which bounds top-k
pruning.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Final

from readmodel.search import accelerator
from readmodel.store.schema import FTS_DDL

MAX_TOKEN_BYTES: Final = 32_768
"""FTS5 stores at most this many bytes of a token (``FTS5_MAX_TOKEN_SIZE``)."""

_TOKENIZE_OPTION: Final = re.search(r"tokenize='([^']*)'", FTS_DDL)
assert _TOKENIZE_OPTION is not None, "the FTS5 DDL names its tokenizer"
TOKENIZE: Final = _TOKENIZE_OPTION.group(1)
"""The index's ``tokenize=`` option (``unicode61``): the tokenizer and its arguments."""


def term_hash(term: bytes) -> int:
    """The stable signed 64-bit key of a term (``terms.term``, ``postings.term`` on PostgreSQL).

    Contract: the little-endian signed value of the 8-byte BLAKE2b digest of
    the term's bytes exactly as :meth:`Tokenizer.tokens` returns them (so a
    cut UTF-8 sequence hashes as stored); equal in every process and on every
    machine, and fits a ``bigint``.  Different terms collide with probability
    about 2⁻⁶⁴ per pair; the writer detects a collision through the
    ``terms`` dictionary (:mod:`readmodel.search.serverterms`) and fails loudly
    rather than answer wrongly.
    """
    return int.from_bytes(hashlib.blake2b(term, digest_size=8).digest(), "little", signed=True)


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


def postings(terms: Sequence[bytes]) -> dict[bytes, list[int]]:
    """Each term of a document with its positions, ascending (``tf`` is their number)."""
    found: dict[bytes, list[int]] = {}
    for position, term in enumerate(terms):
        found.setdefault(term, []).append(position)
    return found


def phrase_spans(phrase: Sequence[bytes], positions: Mapping[bytes, Sequence[int]]) -> int:
    """How many spans ``highlight()`` marks for ``phrase`` in a document with these term ``positions``.

    An instance starts at ``p`` when the phrase's ``i``-th term is at ``p + i``
    for every ``i``; instances come in position order, and one that starts at
    or before the last token of the open span extends it, a later one opens a
    new span.  0 when the phrase does not occur (or has no terms).
    """
    if not phrase:
        return 0
    later = [(offset, set(positions.get(term, ()))) for offset, term in enumerate(phrase) if offset]
    spans, end = 0, -1
    for start in positions.get(phrase[0], ()):
        if all(start + offset in found for offset, found in later):
            if start > end:
                spans += 1
            end = start + len(phrase) - 1
    return spans
