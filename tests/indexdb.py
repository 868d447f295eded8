"""Opening an index file directly in tests, as every sessionq connection does.

The ``documents`` view decodes its text with the SQL function
``sessionq_text`` (:mod:`readmodel.store.doctext`, schema 0016): a test that
reads documents through its own ``sqlite3`` connection registers it, as the
project's connections do.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from readmodel.store import doctext



def connect(database: Any, **kwargs: Any) -> sqlite3.Connection:
    """``sqlite3.connect`` with the index's SQL functions registered."""
    conn = sqlite3.connect(database, **kwargs)
    doctext.install(conn)
    return conn


def index_text(conn: sqlite3.Connection, docid: int) -> None:
    """Index the text of a document inserted through the ``documents`` view in ``texts_fts``
    (schema 0021: one row per text), unless an earlier document's insert already did.

    The view's trigger creates the text row but, as it never wrote FTS5 rows, not its
    search row; the indexer writes both (:func:`indexer.projection.index_texts`)."""
    conn.execute(
        'INSERT INTO "texts_fts" ("rowid", "text") SELECT t."id", x."text" FROM "document_rows" d JOIN "texts" t ON t."id" = d."text_id" '
        'JOIN "text_contents" x ON x."id" = t."id" WHERE d."docid" = ? AND t."id" NOT IN (SELECT "id" FROM "texts_fts_docsize")',
        (docid,),
    )
