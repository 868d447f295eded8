"""The ``substring`` search mode: its pattern, its occurrences, and the candidate seam.

Semantics (a sessionq extension): a document matches a ``substring`` query
iff ``compile_text_filter(query).search(text)`` finds the query in it — the
documents ``filterEvents`` with ``{kind: "text", text: query}`` selects:
literal, case-insensitive by JS ``iu`` simple case folding, every whitespace
run of the query matching one or more whitespace characters.

Finding them is two steps:

1. **Candidates.**  :func:`index_candidates` asks the index for the docids
   that may match.  ``None`` means "no candidate index can answer": every
   persisted document in scope is a candidate (the slow path, also the
   oracle of the tests).
2. **Verification.**  Every candidate's text is checked with the compiled
   pattern (:func:`occurrences`), so candidates may be a superset.

THE SEAM (what a candidate index implements)
--------------------------------------------

``index_candidates(conn, query, doc_range) -> tuple[str, list] | None``

``conn``
    The search backend's read-only ``sqlite3.Connection``, inside the read
    transaction of one search (so the candidates and the documents verified
    are the same snapshot).  Never begin, commit or write ``main``; TEMP
    objects of one's own are allowed.  Cancellation is already wired: the
    backend's progress handler interrupts any statement run on ``conn``.
``query``
    The *normalised* query (:func:`readmodel.search.requests.normalize_query`):
    non-empty, JS-trimmed, every whitespace run one U+0020, NUL, the highlight
    markers and lone surrogates already U+FFFD, at most 16,384 code points.
    ``query.split(" ")`` are its literal parts; a document matches when the
    parts occur in order, case-folded as :func:`compile_text_filter` folds
    (each code point's JS simple case folding; see
    ``readmodel.projection.filters._fold_table``), with one or more JS
    whitespace characters between consecutive parts.  A part may be a single
    code point (``库``, ``->`` is two); an index may give up (``None``) on
    parts too short for it.
``doc_range``
    ``None`` for every persisted document, or an inclusive ``(low, high)``
    docid range (one session: ``sid << 32`` … ``sid << 32 | 0xFFFFFFFF``).

Returns ``None`` (no index in this database, an index older than the data,
or a query it cannot narrow), or ``(sql, params)``: one SQL ``SELECT`` whose
single column is **text ids** (``texts.id``, schema 0018: each distinct
document text is one row), run on ``conn`` with ``params`` bound.  The ids
must be a **superset** of the stored texts whose text matches (held by
documents in ``doc_range`` or not); false positives cost only verification,
a false negative loses a hit (the property tests compare against ``None``'s
slow path).  The caller keeps the texts some document in scope holds
(``doc_range``, the session and event filters), so a provider may ignore
``doc_range``.  The live overlay (``temp.live_docs``) is never the
provider's concern: live documents are always verified one by one.

A SQL answer rather than a Python list lets SQLite stream a large candidate
set (a common two-character query) without materialising it in Python; a
provider that computes text ids in Python returns
``('SELECT value FROM json_each(?)', [json_array_text])``.

The gram index (:mod:`readmodel.search.gramsearch`) answers it: the
texts holding the query's character grams in ``document_grams``, or
``None`` when that table is not built for the running gram scheme or the
query is one ASCII character.
"""

from __future__ import annotations

import re
import sqlite3
from functools import lru_cache
from typing import Any, Final

from readmodel.core.errors import SessionQueryError
from readmodel.core.checkedcache import CheckedCache
from readmodel.projection.filters import compile_text_filter
from readmodel.search import gramsearch
from readmodel.search.snippets import END_MARK, START_MARK


def index_candidates(conn: sqlite3.Connection, query: str, doc_range: tuple[int, int] | None) -> tuple[str, list[Any]] | None:
    """Candidate text ids for a ``substring`` query, as the seam above defines; ``None``: scan."""
    return gramsearch.candidates(conn, query, doc_range)


def check_substring_query(query: str) -> None:
    """Refuse a one-character ASCII letter or digit (``SESSION_QUERY_INVALID_QUERY``).

    It would match nearly every document and rank them by how often a letter
    occurs, which answers nothing; a single CJK or other non-ASCII code point,
    or a single punctuation character, is a meaningful substring and allowed.
    """
    if len(query) == 1 and query.isascii() and query.isalnum():
        raise SessionQueryError(
            "SESSION_QUERY_INVALID_QUERY", "session-search substring query must be at least 2 characters when it is a Latin letter or digit"
        )


_ASCII_WHITESPACE_RUN: Final = "[\t\n\x0b\x0c\r ]+"
"""The JS whitespace characters that are ASCII, as a run."""


class Substring:
    """A normalised ``substring`` query, compiled: counting and marking its occurrences.

    The exact pattern is :func:`compile_text_filter`'s (every cased character
    an explicit class of its JS simple case-fold equivalents), which Python's
    regular expressions can only scan character by character.  When the query
    and a document are both ASCII, simple case folding within ASCII is
    ``str.lower()`` and the only whitespace is ASCII, so the lowered literal
    pattern over the lowered text finds exactly the same spans, several
    times faster (a literal lets the engine skip ahead).
    """

    def __init__(self, query: str) -> None:
        self.pattern = compile_text_filter(query)
        self.fast = re.compile(_ASCII_WHITESPACE_RUN.join(re.escape(part.lower()) for part in query.split(" "))) if query.isascii() else None
        # One literal ASCII part: the lowered pattern's non-overlapping matches, leftmost first,
        # are exactly str.count's (a search that skips ahead, with no match objects).
        self.literal = query.lower() if query.isascii() and " " not in query else None
        self.literal_bytes = self.literal.encode() if self.literal is not None else None
        self.wide = self.literal is not None and ("k" in self.literal or "s" in self.literal)
        self.fast_bytes = re.compile(self.fast.pattern.encode()) if self.fast is not None else None

    def _for(self, text: str) -> tuple[re.Pattern[str], str]:
        if self.fast is not None and text.isascii():
            return self.fast, text.lower()
        return self.pattern, text

    def count(self, text: str) -> int:
        """How many non-overlapping occurrences ``text`` holds (0: no match)."""
        if self.literal is not None:
            if text.isascii():
                return text.lower().count(self.literal)
            return self.count_utf8(text.encode("utf-8", "surrogatepass"))
        pattern, subject = self._for(text)
        return len(pattern.findall(subject))

    def count_utf8(self, data: bytes) -> int:
        """:meth:`count` of a text given as its UTF-8 bytes (an ASCII literal is counted on
        the bytes, never decoding them)."""
        if self.literal is None:
            return self.count(data.decode("utf-8", "surrogatepass"))
        return _ascii_folded(data, "k" in self.literal or "s" in self.literal).count(self.literal.encode())

    def count_prepared(self, text: PreparedText) -> int:
        """:meth:`count` of a text prepared once for every query (:class:`PreparedText`)."""
        if self.literal_bytes is not None:
            subject = _ascii_folded(text.data, True) if self.wide and text.wide else text.lowered
            return subject.count(self.literal_bytes)
        if self.fast_bytes is not None and text.ascii:
            return len(self.fast_bytes.findall(text.lowered))
        return self.count(text.data.decode("utf-8", "surrogatepass"))

    def mark_prepared(self, text: PreparedText) -> str:
        """:meth:`mark_first` of a prepared text (an ASCII literal found on its lowered bytes)."""
        plain = text.data.decode("utf-8", "surrogatepass")
        if self.literal_bytes is None:
            return self.mark_first(plain)
        subject = _ascii_folded(text.data, True) if self.wide and text.wide else text.lowered
        index = subject.find(self.literal_bytes)
        if index < 0:
            return plain
        start = index if text.ascii else len(text.data[:index].decode("utf-8", "surrogatepass"))
        end = start + len(self.literal_bytes)  # each code point of a fold class matches one
        return plain[:start] + START_MARK + plain[start:end] + END_MARK + plain[end:]

    def mark_first(self, text: str) -> str:
        """``text`` with its first occurrence between the highlight markers.

        A snippet is positioned by the first match only and is plain text, so
        the later occurrences need no marks (marking them all would cost a
        substitution over a whole, possibly huge, document).
        """
        if self.literal is not None:
            start = _find_literal(self.literal, text)
            if start < 0:
                return text
            end = start + len(self.literal)  # each code point of a fold class matches one
        else:
            pattern, subject = self._for(text)
            found = pattern.search(subject)
            if found is None:
                return text
            start, end = found.span()
        return text[:start] + START_MARK + text[start:end] + END_MARK + text[end:]


class PreparedText:
    """A stored text as every substring query counts it: its UTF-8, lowered (ASCII letters only),
    whether it is ASCII and whether it holds a non-ASCII member of an ASCII letter's fold class."""

    __slots__ = ("data", "lowered", "ascii", "wide")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.lowered = data.lower()
        self.ascii = data.isascii()
        self.wide = not self.ascii and any(code in data for code, _ in _WIDE_FOLDS)


class PreparedTexts:
    """Stored texts already prepared, by text id (thread-safe, bounded, least recently used dropped).

    Schema 0018 stores each distinct text once, and a common substring (``re``, ``te``) is
    counted in nearly all of them at every query: decoding and lowering them again each
    time cost more than the counting.  An entry is used only while the stored (packed) form
    read from the index is byte for byte the one it was prepared from, so a text id reused
    for another text after its text was dropped is never answered with the old one.
    """

    def __init__(self, capacity: int) -> None:
        self.cache: CheckedCache[int, PreparedText] = CheckedCache(capacity, lambda prepared: 2 * len(prepared.data))

    def get(self, conn: sqlite3.Connection, text_id: int, stored: Any) -> PreparedText:
        """The prepared text of ``texts`` row ``text_id`` whose ``text_z`` is ``stored``."""
        cached = self.cache.get(text_id, stored)
        if cached is not None:
            return cached
        if isinstance(stored, str):
            data = stored.encode("utf-8", "surrogatepass")
        else:  # through the connection's sessionq_text: it loads a dictionary this process lacks
            data = bytes(conn.execute("SELECT sessionq_text(?)", (stored,)).fetchone()[0])
            stored = bytes(stored)
        prepared = PreparedText(data)
        self.cache.put(text_id, stored, prepared)
        return prepared


PREPARED_BYTES: Final = 64 * 1024 * 1024
"""Bytes of prepared texts (UTF-8 and lowered) a process keeps (:data:`prepared_texts`)."""

prepared_texts: Final = PreparedTexts(PREPARED_BYTES)


_WIDE_FOLDS: Final = (("\u212a".encode(), b"k"), ("\u017f".encode(), b"s"))
"""The only non-ASCII members of ASCII letters' simple case-fold classes (KELVIN SIGN, LONG S)."""


def _ascii_folded(data: bytes, wide: bool) -> bytes:
    """A text's UTF-8 ``data``, lowered, with (``wide``: the query has a ``k`` or an ``s``) every
    non-ASCII code point of an ASCII letter's fold class as that letter.

    Other non-ASCII code points stay multi-byte sequences of bytes above 0x7F, which no byte of
    an ASCII query matches, so an ASCII literal's non-overlapping occurrences are the same in
    both (``bytes.lower`` lowers ASCII letters only).
    """
    for code, letter in _WIDE_FOLDS if wide else ():
        data = data.replace(code, letter)
    return data.lower()


def _find_literal(literal: str, text: str) -> int:
    """The code point offset of a lowered ASCII literal's first occurrence in ``text``; -1: none."""
    if text.isascii():
        return text.lower().find(literal)
    folded = _ascii_folded(text.encode("utf-8", "surrogatepass"), "k" in literal or "s" in literal)
    index = folded.find(literal.encode())
    # The folded bytes are the UTF-8 of a text with one code point per original one.
    return index if index < 0 else len(folded[:index].decode("utf-8", "surrogatepass"))


@lru_cache(maxsize=64)
def compiled_substring(query: str) -> Substring:
    """The compiled form of a normalised query (cached: a cursor walk compiles the same query again)."""
    return Substring(query)
