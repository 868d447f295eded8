"""What the reconciler needs of an index backend, and the SQLite backend's answers.

The reconcile logic (:mod:`indexer.reconcile`, :mod:`indexer.ingest`,
:mod:`indexer.projection`) is one piece of code that writes through a DB-API
cursor in SQLite's SQL dialect (``?`` placeholders, ``INSERT OR IGNORE``).
A backend supplies, through an :class:`IndexWriter`:

* the cursor of a pass (:meth:`~IndexWriter.cursor`): SQLite's own, or one that
  speaks that dialect to another server (:mod:`indexer.pgwriter`);
* the batch transaction (:meth:`~IndexWriter.begin` / :meth:`~IndexWriter.commit` /
  :meth:`~IndexWriter.abandon`) and its generation (:meth:`~IndexWriter.open_batch`
  / :meth:`~IndexWriter.close_batch`): SQLite bumps ``index_meta.global_generation``
  and the source's counter, a server only the source's own ``sources`` row;
* the sid reservation across writers (:meth:`~IndexWriter.reserve_sids`);
* the search rows: a cursor with ``write_search_rows``/``delete_search_rows``
  methods takes a document's search rows itself (:func:`indexer.projection.write_fts_rows`);
  SQLite's cursor has none and gets FTS5 and gram rows;
* the exceptions a bad log's rows raise (:attr:`~IndexWriter.data_errors`), and which
  observed headers its session rows cannot hold (:meth:`~IndexWriter.storable`).

:func:`writer_for` picks the backend from an engine's dialect.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from sqlalchemy import Engine

from readmodel.store import gramindex

from .ownership import reserve_sids


class IndexWriter(Protocol):
    """One backend's side of a reconcile pass (see the module docstring)."""

    data_errors: tuple[type[BaseException], ...]
    errors: tuple[type[BaseException], ...]

    def cursor(self) -> Any: ...  # a context manager yielding the pass's cursor

    def begin(self, cur: Any) -> None: ...

    def commit(self, cur: Any) -> None: ...

    def in_transaction(self, cur: Any) -> bool: ...

    def reserve_sids(self, cur: Any, count: int) -> tuple[int, int]: ...

    def open_batch(self, cur: Any, source: str) -> int: ...

    def close_batch(self, cur: Any, source: str, generation: int, changed: bool, now: float) -> None: ...

    def grams_current(self, cur: Any) -> bool: ...

    def rebuild_grams(self, cur: Any) -> None: ...

    def storable(self, item: Any) -> Any: ...


class SqliteWriter:
    """The SQLite backend: ``BEGIN IMMEDIATE`` batches, FTS5 and gram rows, one global generation."""

    data_errors: tuple[type[BaseException], ...] = (sqlite3.DataError,)
    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def cursor(self) -> Iterator[sqlite3.Cursor]:
        with self.engine.connect() as conn:
            yield conn.connection.driver_connection.cursor()

    def begin(self, cur: sqlite3.Cursor) -> None:
        cur.execute("BEGIN IMMEDIATE")

    def commit(self, cur: sqlite3.Cursor) -> None:
        cur.execute("COMMIT")

    def in_transaction(self, cur: sqlite3.Cursor) -> bool:
        return cur.connection.in_transaction

    def reserve_sids(self, cur: sqlite3.Cursor, count: int) -> tuple[int, int]:
        return reserve_sids(cur, count)

    def open_batch(self, cur: sqlite3.Cursor, source: str) -> int:
        """The generation the batch's rows carry (its transaction is open)."""
        return cur.execute('SELECT "global_generation" FROM "index_meta"').fetchone()[0] + 1

    def close_batch(self, cur: sqlite3.Cursor, source: str, generation: int, changed: bool, now: float) -> None:
        """Record the batch in ``index_meta`` and the source's row, just before ``COMMIT``."""
        if changed:
            cur.execute('UPDATE "index_meta" SET "global_generation" = ?, "last_reconcile_at" = ?', (generation, now))
        else:
            cur.execute('UPDATE "index_meta" SET "last_reconcile_at" = ?', (now,))
        cur.execute(
            'UPDATE "sources" SET "generation" = "generation" + ?, "last_reconcile_at" = ? WHERE "source" = ?',
            (int(changed), now, source),
        )

    def grams_current(self, cur: sqlite3.Cursor) -> bool:
        return gramindex.is_current(cur)

    def rebuild_grams(self, cur: sqlite3.Cursor) -> None:
        gramindex.rebuild(cur)

    def storable(self, item: Any) -> Any:
        """An observed transcript as it is (the listing already refused what SQLite cannot hold)."""
        return item


def writer_for(engine: Engine) -> IndexWriter:
    """The backend of ``engine``'s index (PostgreSQL or SQLite)."""
    if engine.dialect.name == "postgresql":
        from .pgwriter import PostgresWriter

        return PostgresWriter(engine)
    return SqliteWriter(engine)
