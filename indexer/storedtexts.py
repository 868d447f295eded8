"""A document's stored text: what is extracted from its event, sanitised (no NUL, no
noncharacters SQLite's FTS5 or JSON would trip on, no lone surrogates) and, when
documents are redacted, with detected secrets replaced by markers, together with
its hash.  Long sessions repeat their texts, so derived texts are remembered
within bounds (:func:`stored_text`).
"""

from __future__ import annotations

import re
import sys
from typing import Final

from readmodel.core.checkedcache import CheckedCache
from readmodel.projection.secrets import redact
from readmodel.projection.texthash import text_hash


_SANITIZE: Final = str.maketrans({"\x00": "\ufffd", "\ufdd0": "\ufffd", "\ufdd1": "\ufffd"})


_SURROGATES: Final = re.compile("[\ud800-\udfff]")


def sanitize_document(text: str) -> str:
    """Reserve the highlight markers: NUL, U+FDD0 and U+FDD1 become U+FFFD.

    Lone surrogates cannot be stored as UTF-8 text; they become U+FFFD too.
    """
    # ``in`` scans are memchr-fast, while ``str.translate`` with a mapping costs
    # microseconds per character on non-ASCII text: translate only when needed.
    if text.isascii():
        return text.translate(_SANITIZE) if "\x00" in text else text
    if "\x00" in text or "\ufdd0" in text or "\ufdd1" in text:
        text = text.translate(_SANITIZE)
    try:
        text.encode("utf-8")  # fails exactly when a lone surrogate is present
    except UnicodeEncodeError:
        text = _SURROGATES.sub("\ufffd", text)
    return text


STORED_TEXTS_CHARS: Final = 8_000_000
"""Characters of extracted texts (and of what they became) :func:`stored_text` remembers."""


_stored_texts: Final[tuple[CheckedCache[str, tuple[str, int]], ...]] = tuple(
    CheckedCache(STORED_TEXTS_CHARS, lambda value: 2 * len(value[0])) for _ in range(2)
)


LONG_TEXT_CHARS: Final = STORED_TEXTS_CHARS // 64
"""Texts longer than this are remembered apart (:data:`LONG_TEXTS_BYTES`): among the
others one would push out dozens of short ones."""


LONG_TEXTS_BYTES: Final = 32 * 1024 * 1024
"""Memory the long texts :func:`stored_text` remembers may take (the extracted and the
stored text); one over a quarter of it is never kept."""


def _footprint(value: tuple[str, int, int]) -> int:
    return value[2]


_long_texts: Final[tuple[CheckedCache[str, tuple[str, int, int]], ...]] = tuple(
    CheckedCache(LONG_TEXTS_BYTES, _footprint) for _ in range(2)
)


def stored_text(text: str, redact_documents: bool) -> tuple[str, int]:
    """A document's stored text and its :func:`~readmodel.projection.texthash.text_hash`, from
    the text extracted from its event: sanitised, and with secrets replaced by markers
    when ``redact_documents``.

    A pure function of its arguments, remembered for the texts seen last: agent
    histories repeat the same texts (harness messages, tool outputs, the same
    file read again; the 160 MB benchmark root's 101,230 documents hold 1,641
    distinct texts), and secret detection and hashing are most of a document's
    cost.  A hit compares the whole text (the cache's key), so it is exact.
    Long texts (tool outputs of hundreds of KB) have a cache of their own, bounded
    by memory: the 100 MB benchmark log repeats 14 of them 228 times (81 M of its
    92 M characters of documents), and deriving them each time was 7% of its
    preparation's CPU.
    """
    if len(text) > LONG_TEXT_CHARS:
        return _stored_long_text(text, redact_documents)
    cache = _stored_texts[redact_documents]
    known = cache.get(text, True)
    if known is not None:
        return known
    result = _derive_stored_text(text, redact_documents)
    cache.put(text, True, result)
    return result


def _stored_long_text(text: str, redact_documents: bool) -> tuple[str, int]:
    """:func:`stored_text` of a text over :data:`LONG_TEXT_CHARS`."""
    cache = _long_texts[redact_documents]
    known = cache.get(text, True)
    if known is not None:
        return known[0], known[1]
    stored, digest = _derive_stored_text(text, redact_documents)
    # The cache keeps the extracted text (its key) and the stored one (the same object
    # when nothing changed).
    footprint = sys.getsizeof(text) + (sys.getsizeof(stored) if stored is not text else 0)
    if footprint <= LONG_TEXTS_BYTES // 4:
        cache.put(text, True, (stored, digest, footprint))
    return stored, digest


def _derive_stored_text(text: str, redact_documents: bool) -> tuple[str, int]:
    stored = sanitize_document(text)
    if redact_documents:
        stored = redact(stored)
    return stored, text_hash(stored)
