"""Documents' text stored compressed in SQLite (schema 0016; once per distinct text since 0018: ``texts.text_z``).

A document's text is most of what the index stores beyond the raw blocks, and
it compresses like them: each text is one zstd frame compressed with the
index's block dictionary (:mod:`readmodel.store.blocks`; the frame header
names it), kept only when smaller than the text's UTF-8 (short texts stay
plain ``TEXT``).  Readers never see the packing: ``documents`` is a view
over ``document_rows`` and ``texts`` whose ``text`` column is
:data:`readmodel.store.schema.TEXT_EXPRESSION` —
plain texts as they are, packed ones ``sessionq_text(text_z)`` cast to
text — so every query, and FTS5's external-content reads (highlights,
snippets, ``'rebuild'``), read plain text.  The function returns the UTF-8
bytes and SQLite's ``CAST`` makes them text without a conversion: a Python
``str`` in between would cost as much as the decompression itself.

Contract: every connection that reads or writes ``documents`` has the SQL
function — :func:`install` registers it, and the project's connections
(:func:`readmodel.store.database.create_index_engine`, the search backend)
call it.  A connection without it (the ``sqlite3`` shell) fails at the
first statement naming ``documents`` with "no such function: sessionq_text",
never with wrong text.  Writers write ``documents`` as they always did (the
same statements serve PostgreSQL, where it is a table): ``INSTEAD OF``
triggers on the view (migration 0016) store ``sessionq_pack(text)`` —
:func:`pack_text` — in ``document_rows``.
"""

from __future__ import annotations

import sqlite3
import zlib
from typing import Any, Final

from readmodel.core.checkedcache import CheckedCache
from readmodel.projection.texthash import text_hash
from readmodel.store.blocks import MissingDictionary, compress_text, decompress_payload, register_dictionary

FUNCTION: Final = "sessionq_text"
"""The SQL function the ``documents`` view decodes ``text_z`` with."""
HASH_FUNCTION: Final = "sessionq_hash"
"""The SQL function of a text's :func:`~readmodel.projection.texthash.text_hash` (the view's INSERT trigger)."""
PACK_FUNCTION: Final = "sessionq_pack"
"""The SQL function the view's write triggers store a text with (:func:`pack_text`)."""


MIN_PACKED_BYTES: Final = 64
"""Texts shorter than this (UTF-8 bytes) are stored plain: a frame's header and the
dictionary id alone take about a dozen bytes, and most such texts would not shrink."""


def pack_text(text: str) -> str | bytearray:
    """What ``document_rows.text_z`` stores for ``text`` (thread-safe; the active block dictionary).

    A ``bytearray`` (the ``sqlite3`` module binds it faster than ``bytes``) when
    compression makes it smaller, else ``text`` itself.
    """
    if len(text) < MIN_PACKED_BYTES // 4:
        return text
    data = text.encode("utf-8")
    if len(data) < MIN_PACKED_BYTES:
        return text
    packed = compress_text(data)
    return bytearray(packed) if len(packed) < len(data) else text


def unpack_text(stored: Any) -> Any:
    """The text :func:`pack_text` stored (``None`` and plain text unchanged).

    Raises :class:`~readmodel.store.blocks.MissingDictionary` when the frame's
    dictionary is not registered in this process.
    """
    if stored is None or isinstance(stored, str):
        return stored
    return decompress_payload(stored).decode("utf-8")


CACHED_MIN_BYTES: Final = 16 * 1024
"""Packed texts from this size on (a few hundred KB of tool output once decoded) are kept
decoded in :data:`_decoded`: decoding one costs about a millisecond, and the same few
long documents come back in every page, keystroke and cursor of a search that matches them."""
CACHE_BYTES: Final = 32 * 1024 * 1024
"""Decoded bytes :data:`_decoded` holds at most (per process, least recently used dropped)."""


# Keyed by the packed bytes' CRC-32 and length; a hit is confirmed by the packed bytes themselves.
_decoded: Final[CheckedCache[tuple[int, int], bytes]] = CheckedCache(CACHE_BYTES, len)


def _decompress(stored: bytes) -> bytes:
    """The UTF-8 of one packed text (long ones through :data:`_decoded`)."""
    if len(stored) < CACHED_MIN_BYTES:
        return decompress_payload(stored)
    key = (zlib.crc32(stored), len(stored))
    text = _decoded.get(key, stored)
    if text is None:
        text = decompress_payload(stored)
        _decoded.put(key, bytes(stored), text)
    return text


def install(conn: sqlite3.Connection) -> None:
    """Register ``sessionq_text`` and ``sessionq_pack`` on ``conn`` (idempotent).

    A frame whose dictionary this process does not know yet has it loaded from
    the connection's own index (``block_dictionaries``), once per process.
    """

    def text(stored: Any) -> Any:
        if stored is None or isinstance(stored, str):
            return stored
        try:
            return _decompress(stored)
        except MissingDictionary as missing:
            row = conn.execute('SELECT "data" FROM "block_dictionaries" WHERE "id" = ?', (missing.dict_id,)).fetchone()
            if row is None:
                raise
            register_dictionary(missing.dict_id, bytes(row[0]))
            return _decompress(stored)

    conn.create_function(FUNCTION, 1, text, deterministic=True)
    # The documents view's INSERT trigger finds a text's row by its hash (schema 0018).
    conn.create_function(HASH_FUNCTION, 1, lambda value: text_hash(value) if isinstance(value, str) else None, deterministic=True)
    # Not deterministic: the active dictionary may change between two writes of one text.
    conn.create_function(PACK_FUNCTION, 1, lambda value: pack_text(value) if isinstance(value, str) else value)
