"""The word index in SQLite: ``texts_fts``, one FTS5 row per distinct text (schema 0021).

``texts_fts`` (:data:`readmodel.store.schema.FTS_DDL`) is an external-content
FTS5 table over the view ``text_contents`` (each ``texts`` row decoded), keyed
by ``texts.id``.  Documents hold texts (``document_rows.text_id``), and
matching, span counts and ``highlight()`` depend on the text alone, so a
document's matches are its text's: the search reads ``texts_fts`` and reaches
the documents through ``document_rows_text``.  Each distinct text is tokenised
and stored once however many documents repeat it.

Lifetime, as ``document_grams`` (:mod:`readmodel.store.gramindex`): the
writer indexes a text when it creates the text's row (its first document) and
removes it when it drops the row (no document names it any more,
:func:`readmodel.store.texts.orphans`).  External content means a removal
supplies the text as it was indexed: the stored text, which the caller has.
"""

from __future__ import annotations

from typing import Any, Final

from readmodel.store.schema import FTS_DDL, TEXT_CONTENTS_VIEW_DDL

TABLE: Final = "texts_fts"
DDL: Final = (TEXT_CONTENTS_VIEW_DDL, FTS_DDL)
"""The view and the table, in creation order."""

_INSERT: Final = f'INSERT INTO "{TABLE}" ("rowid", "text") VALUES (?, ?)'
_DELETE: Final = f'INSERT INTO "{TABLE}" ("{TABLE}", "rowid", "text") VALUES (\'delete\', ?, ?)'


def insert(cur: Any, rows: list[tuple[int, str]]) -> None:
    """Index ``(text id, text)`` rows of texts just created (in id order: FTS5 appends fastest)."""
    cur.executemany(_INSERT, rows)


def delete(cur: Any, rows: list[tuple[int, str]]) -> None:
    """Remove ``(text id, text)`` rows indexed earlier (the texts as stored)."""
    cur.executemany(_DELETE, rows)


def rebuild(cur: Any) -> None:
    """Index every stored text again (FTS5 reads them from ``text_contents``)."""
    cur.execute(f"INSERT INTO \"{TABLE}\" (\"{TABLE}\") VALUES ('rebuild')")
