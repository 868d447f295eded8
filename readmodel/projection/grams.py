"""The substring candidate scheme: character grams of case-folded text.

A document matches a substring query iff the query's text-clause pattern
(:func:`readmodel.projection.filters.compile_text_filter`) finds it: a literal
match where two code points are equal when their Unicode *simple* case
foldings are (JS ``iu``) and every whitespace gap of the query matches one or
more JS whitespace characters.  This module turns that into a necessary
condition an index can answer, backend-neutrally:

* :func:`fold` maps each code point to the representative of its simple-fold
  class (:func:`readmodel.projection.filters.fold_classes`; ``K`` and ``K``
  become ``k``) and each JS whitespace character to a space.  It works code
  point by code point, so whatever stretch of a document the pattern matches
  folds to exactly the folded query with each gap a run of spaces.
* :func:`document_grams` are the document's *grams*: every bigram (two
  consecutive code points) of its folded text, and every non-ASCII code point
  on its own (so a one-code-point query such as ``库`` or ``é`` has a gram).
* :func:`query_grams` are the grams of the folded query with each whitespace
  run made one space.  Every one of them is a gram of every matching document
  (``"  "`` is left out of documents: no query has it), so the documents that
  hold all of them are a superset of the matches; the caller verifies them
  with the pattern.  A query whose folded text is one ASCII character has no
  gram: it must be scanned.

A *long* document (over :data:`LONG_CHARS` code points) is a candidate for
nearly every query by its bigrams (a long tool output holds nearly all of
them), and verifying it is what costs.  So it also has *trigrams*: every
trigram of ``" " + fold(text) + " "`` with each run of spaces made one space
(:func:`document_trigrams`), and the word :data:`LONG_MARK`.  In that
collapsed text a match is exactly the normalised query, so a query of three
or more code points takes a long document only when it holds every one of
the query's trigrams (:func:`query_trigrams`), and a short document by its
bigrams (``(bigrams NOT l) OR (trigrams)``).

Grams are identified by stable integers (:func:`gram_key`: the code point of a
unigram, ``first << 21 | second`` for a bigram, ``first << 42 | second << 21
| third`` for a trigram — distinct, since a bigram's key is above every code
point and a trigram's above every bigram's), which a PostgreSQL backend can keep in a
``bigint[]`` with a GIN index; SQLite stores them as words of a contentless
FTS5 table (:func:`gram_token`: the key in lowercase hex).

The fold depends on the Unicode database of the running Python (for the case
pairs :mod:`readmodel.projection.filters` does not restate), so an index
records :func:`scheme_fingerprint` and is rebuilt when it differs.

No SQLAlchemy here: the indexer's preparation workers compute grams.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from functools import cache
from operator import add
from types import ModuleType
from typing import Final

from readmodel.core.accelerators import GRAMS, accelerator_module
from readmodel.core.jsvalues import JS_WHITESPACE
from readmodel.projection.filters import fold_classes

SCHEME_VERSION: Final = "g1"
LONG_CHARS: Final = 2048
"""Documents longer than this (code points) also have trigrams and :data:`LONG_MARK`."""
LONG_MARK: Final = "l"
"""The word a long document's row holds (no gram's word is one: they are hex)."""
"""Bumped whenever :func:`document_grams` would give another set for some text."""

_WHITESPACE_RUN: Final = re.compile("[" + re.escape(JS_WHITESPACE) + "]+")
_WHITESPACE_CHAR: Final = re.compile("[" + re.escape(JS_WHITESPACE) + "]")
_ASCII_WHITESPACE: Final = str.maketrans({char: " " for char in JS_WHITESPACE if char.isascii()})
_DOUBLE_SPACE: Final = "  "
_SPACE_RUN: Final = re.compile(" {2,}")
_BIGRAM_SHIFT: Final = 21  # code points fit in 21 bits


def scheme_fingerprint() -> str:
    """What an index's grams were computed with: the scheme and the Unicode version."""
    return f"{SCHEME_VERSION}:unicode-{unicodedata.unidata_version}"


@cache
def _fold_map() -> dict[int, str]:
    """Each cased code point to its class representative; each JS whitespace character to a space."""
    table = {ord(member): key for key, members in fold_classes().items() for member in members if member != key}
    for char in JS_WHITESPACE:
        table[ord(char)] = " "
    return table


def fold(text: str) -> str:
    """``text`` with every code point replaced by its simple-fold class representative
    and every JS whitespace character by a space (length preserved)."""
    if text.isascii():
        # ASCII letters' representatives are their lowercase forms (a test pins it).
        return text.lower().translate(_ASCII_WHITESPACE)
    return text.translate(_fold_map())


def _folded_pieces(text: str) -> str:
    """The folded distinct whitespace-separated pieces of ``text``, each between two spaces.

    Long tool outputs repeat most of their words, so this is usually much
    shorter than the text, and its bigrams are every bigram of the text plus
    at most a space before the first piece and one after the last.
    """
    if text.isascii():
        pieces = set(text.translate(_ASCII_WHITESPACE).split(" "))
    else:
        pieces = set(_WHITESPACE_CHAR.split(text))
    return fold(" " + " ".join(pieces) + " ")


def document_grams(text: str) -> set[str]:
    """The grams of a stored document: its folded bigrams and non-ASCII code points.

    A gram is a one- or two-code-point string of folded text.  The set is a
    deterministic superset of the text's own grams (see :func:`_folded_pieces`),
    which is all a candidate index needs; ``"  "`` is left out.
    """
    folded = _folded_pieces(text)
    grams = set(map(add, folded, folded[1:]))
    grams.discard(_DOUBLE_SPACE)
    if not folded.isascii():
        grams.update(char for char in set(folded) if char > "\x7f")
    return grams


def document_trigrams(text: str) -> set[str]:
    """A long document's trigrams: of ``" " + fold(text) + " "`` with each run of spaces one space.

    (Computed for any text; only documents over :data:`LONG_CHARS` store them.)
    """
    folded = _SPACE_RUN.sub(" ", " " + fold(text) + " ")
    return set(map(add, map(add, folded, folded[1:]), folded[2:]))


def normalise_query(query: str) -> str:
    """The query's text as grams see it: trimmed, folded, each whitespace run one space."""
    return fold(_WHITESPACE_RUN.sub(" ", query.strip(JS_WHITESPACE)))


def query_grams(query: str) -> list[str]:
    """Grams every document matching ``query`` holds, in order of first occurrence.

    Empty when the query is blank or a single ASCII code point (no gram can
    narrow it: scan).  A query of one non-ASCII code point has that code point.
    """
    folded = normalise_query(query)
    if len(folded) == 1:
        return [folded] if folded > "\x7f" else []
    return list(dict.fromkeys(map(add, folded, folded[1:])))


def query_trigrams(query: str) -> list[str]:
    """Trigrams every long document matching ``query`` holds (empty under three code points)."""
    folded = normalise_query(query)
    return list(dict.fromkeys(map(add, map(add, folded, folded[1:]), folded[2:])))


def gram_key(gram: str) -> int:
    """The stable integer of a gram: a unigram's code point, ``first << 21 | second`` for a
    bigram, ``first << 42 | second << 21 | third`` for a trigram."""
    key = 0
    for char in gram:
        key = key << _BIGRAM_SHIFT | ord(char)
    return key


class _Tokens(dict[str, str]):
    """Gram → FTS5 word, computed on first use (grams repeat across documents)."""

    def __missing__(self, gram: str) -> str:
        token = format(gram_key(gram), "x")
        if len(self) < _TOKEN_CACHE:
            self[gram] = token
        return token


class _PairTokens(dict[int, str]):
    """Two ASCII code points read as one little-endian 16-bit number → the FTS5 word of their bigram."""

    def __missing__(self, pair: int) -> str:
        token = self[pair] = format((pair & 0xFF) << _BIGRAM_SHIFT | pair >> 8, "x")
        return token


_TOKEN_CACHE: Final = 1 << 20  # entries: ASCII bigrams are ~9,000; CJK ones are many more
_tokens: Final = _Tokens()
_pair_tokens: Final = _PairTokens()
_DOUBLE_SPACE_PAIR: Final = 0x2020


def gram_token(gram: str) -> str:
    """The word that stands for ``gram`` in an FTS5 table (its key in lowercase hex)."""
    return _tokens[gram]


def python_document_tokens(text: str) -> str:
    """:func:`document_tokens` in Python (the C accelerator's reference)."""
    tokens = _python_bigram_tokens(text)
    if len(text) > LONG_CHARS:
        tokens = f"{tokens} {' '.join(map(_tokens.__getitem__, document_trigrams(text)))} {LONG_MARK}"
    return tokens


def _python_bigram_tokens(text: str) -> str:
    folded = _folded_pieces(text)
    if not folded.isascii():
        grams = set(map(add, folded, folded[1:]))
        grams.discard(_DOUBLE_SPACE)
        grams.update(char for char in set(folded) if char > "\x7f")
        return " ".join(map(_tokens.__getitem__, grams))
    # ASCII (most documents): read the bytes as 16-bit numbers at even and at odd
    # offsets, which makes every bigram an int without building a string for it.
    data = folded.encode("ascii")
    if len(data) & 1:
        data += b" "  # folded ends in a space: the extra bigram is the double space
    pairs = set(memoryview(data).cast("H"))
    pairs.update(memoryview(data[1:-1]).cast("H"))
    pairs.discard(_DOUBLE_SPACE_PAIR)
    return " ".join(map(_pair_tokens.__getitem__, pairs))


def _accelerator() -> ModuleType | None:
    """The optional C gram extractor (``_grams.c``), with this module's fold table installed.

    ``SESSIONQ_GRAMS_C=0`` turns it off; without a C compiler it is not built.
    Either way :func:`document_tokens` gives the same set of words.
    """
    _grams = accelerator_module(GRAMS)
    if _grams is None:
        return None
    table = array("I", range(_FOLD_LIMIT))
    for code, representative in _fold_map().items():
        table[code] = ord(representative)  # every cased or whitespace code point is below the limit
    _grams.install_fold_table(table)
    return _grams


_FOLD_LIMIT: Final = 0x20000
_c_tokens = None


def document_tokens(text: str) -> str:
    """A stored document's words, separated by spaces, in no set order: each of
    :func:`document_grams` (as :func:`gram_token`), and for a document over
    :data:`LONG_CHARS` code points each of :func:`document_trigrams` and :data:`LONG_MARK`.

    In C when the accelerator is built (a few nanoseconds per code point), else
    :func:`python_document_tokens`; both give the same set of words.
    """
    global _c_tokens, document_tokens
    if _c_tokens is None:
        module = _accelerator()
        if module is None:
            _c_tokens = python_document_tokens
        else:
            bigrams, trigrams = module.document_tokens, module.trigram_tokens

            def _c_document_tokens(text: str) -> str:
                if len(text) > LONG_CHARS:
                    return f"{bigrams(text)} {trigrams(text)} {LONG_MARK}"
                return bigrams(text)

            _c_tokens = _c_document_tokens
    document_tokens = _c_tokens  # later calls go straight to the chosen implementation
    return _c_tokens(text)


def warm_up() -> None:
    """Build now what :func:`document_tokens` builds on its first call (the accelerator's fold
    table, ≈ 20–25 ms): a cold build's writer does it while its workers prepare the first chunks,
    instead of inside its first FTS5 write, late in the pass."""
    document_tokens("")


LONG_MARK_KEY: Final = -1
""":data:`LONG_MARK` as a gram key (no :func:`gram_key` is negative)."""


def document_gram_keys(text: str) -> list[int]:
    """A stored document's words of :func:`document_tokens` as integer keys, in no set order.

    What a server backend keeps in ``document_gram_keys.grams`` (a ``bigint[]``
    with GIN, docs/postgres.md): each word's :func:`gram_key` (the hex word
    read back), and :data:`LONG_MARK_KEY` for :data:`LONG_MARK`.  Keys are below
    2⁶³ (three 21-bit code points), so they fit a signed 64-bit integer.
    """
    return [LONG_MARK_KEY if word == LONG_MARK else int(word, 16) for word in document_tokens(text).split()]
