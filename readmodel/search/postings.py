"""Counting phrase spans from FTS5's posting lists: the pure-SQL ranking's shortcut.

Without the C accelerator a match's strength (its number of highlight spans)
comes from ``highlight()``, which tokenises every matching text whole.  For
a phrase of rarer tokens the positions in the ``fts5vocab`` instance table give
the same count for a fraction of the cost; :func:`phrase_spans_from_postings`
computes it and declines when the tokens are too common for that to pay.
"""

from __future__ import annotations

import sqlite3
from typing import Final

import msgspec

# A phrase whose tokens have at most this many instances in the whole index is
# counted from the posting lists (a few µs per instance) instead of by
# highlight(), which tokenises every matching document whole (tens of ns per
# character, and matching documents can be large tool outputs).
PHRASE_INSTANCE_BUDGET: Final = 150_000


def phrase_spans_from_postings(conn: sqlite3.Connection, terms: list[bytes], phrase: str) -> list[tuple[int, int]] | None:
    """``(text id, spans)`` of every stored text matching a multi-token phrase (``texts_fts``
    is per distinct text: a document's spans are its text's),
    where ``spans`` is the number of highlighted spans ``highlight()`` would mark.

    A phrase instance starts at token position ``p`` when term ``i`` occurs at
    ``p + i`` for every ``i``; like FTS5's highlighter, instances that overlap
    the span before them extend it instead of opening a new one.  ``None`` when
    the phrase's tokens are too common for this to be cheaper than
    ``highlight()`` (see :data:`PHRASE_INSTANCE_BUDGET`).
    """
    distinct = sorted(set(terms))
    total = 0
    for term in distinct:
        row = conn.execute('SELECT "cnt" FROM temp."texts_term_rows" WHERE "term" = CAST(? AS TEXT)', (term,)).fetchone()
        total += row[0] if row else 0
    if total > PHRASE_INSTANCE_BUDGET:
        return None
    docs = [row[0] for row in conn.execute('SELECT "rowid" FROM "texts_fts" WHERE "texts_fts" MATCH ?', (phrase,))]
    if not docs:
        return []
    wanted = msgspec.json.encode(docs).decode()
    offsets: dict[bytes, dict[int, set[int]]] = {}
    for term in distinct:
        per_doc: dict[int, set[int]] = {}
        rows = conn.execute(
            'SELECT "doc", "offset" FROM temp."texts_terms" WHERE "term" = CAST(? AS TEXT) AND "doc" IN (SELECT "value" FROM json_each(?))',
            (term, wanted),
        )
        for doc, offset in rows:
            found = per_doc.get(doc)
            if found is None:
                per_doc[doc] = {offset}
            else:
                found.add(offset)
        offsets[term] = per_doc
    size = len(terms)
    head = offsets[terms[0]]
    tail = [(i, offsets[term]) for i, term in enumerate(terms) if i > 0]
    empty: set[int] = set()
    counts: list[tuple[int, int]] = []
    for doc in docs:
        later = [(i, per_doc.get(doc, empty)) for i, per_doc in tail]
        spans, end = 0, -1
        for start in sorted(head.get(doc, empty)):
            if all(start + i in positions for i, positions in later):
                if start > end:
                    spans += 1
                end = start + size - 1
        if spans == 0:
            return None  # cannot happen for a matching document; let highlight() decide
        counts.append((doc, spans))
    return counts
