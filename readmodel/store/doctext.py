"""Documents' text stored compressed in SQLite (schema 0016): ``document_rows.text_z``.

A document's text is most of what the index stores beyond the raw blocks, and
it compresses like them: each text is one zstd frame compressed with the
index's block dictionary (:mod:`readmodel.store.blocks`; the frame header
names it), kept only when smaller than the text's UTF-8 (short texts stay
plain ``TEXT``).  Readers never see the packing: ``documents`` is a view
over ``document_rows`` whose ``text`` column is ``sessionq_text(text_z)``,
so every query, and FTS5's external-content reads (highlights, snippets,
``'rebuild'``), read plain text.

Contract: every connection that reads or writes ``documents`` has the SQL
function — :func:`install` registers it, and the project's connections
(:func:`readmodel.store.database.create_index_engine`, the search backend)
call it.  A connection without it (the ``sqlite3`` shell) fails at the
first statement naming ``documents`` with "no such function: sessionq_text",
never with wrong text.  Writers insert :func:`pack_text` of the text into
``document_rows`` (the view takes no writes).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from readmodel.store.blocks import MissingDictionary, compress_payload, decompress_payload, register_dictionary

FUNCTION: Final = "sessionq_text"
"""The SQL function the ``documents`` view decodes ``text_z`` with."""

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
    packed = compress_payload(data)
    return bytearray(packed) if len(packed) < len(data) else text


def unpack_text(stored: Any) -> Any:
    """The text :func:`pack_text` stored (``None`` and plain text unchanged).

    Raises :class:`~readmodel.store.blocks.MissingDictionary` when the frame's
    dictionary is not registered in this process.
    """
    if stored is None or isinstance(stored, str):
        return stored
    return decompress_payload(stored).decode("utf-8")


def install(conn: sqlite3.Connection) -> None:
    """Register ``sessionq_text`` on ``conn`` (idempotent).

    A frame whose dictionary this process does not know yet has it loaded from
    the connection's own index (``block_dictionaries``), once per process.
    """

    def text(stored: Any) -> Any:
        try:
            return unpack_text(stored)
        except MissingDictionary as missing:
            row = conn.execute('SELECT "data" FROM "block_dictionaries" WHERE "id" = ?', (missing.dict_id,)).fetchone()
            if row is None:
                raise
            register_dictionary(missing.dict_id, bytes(row[0]))
            return unpack_text(stored)

    conn.create_function(FUNCTION, 1, text, deterministic=True)
