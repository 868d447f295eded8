"""Copying a SQLite index built by the real indexer into a PostgreSQL index at head.

The PostgreSQL entry of tests/backends.py builds its indexes with this until
the PostgreSQL writer lands: the real indexer builds a SQLite index, and
:func:`copy_index` creates the PostgreSQL schema through the migrations
(``sessionq db upgrade``) and copies every relational table row for row
(``index_meta`` included, so the identity and the cursor secret are the
SQLite index's), then computes the PostgreSQL-only search rows from the
copied ``documents.text`` exactly as the writer does
(:func:`readmodel.search.serverterms.backfill`: terms and postings by the
:class:`~readmodel.search.tokens.Tokenizer`, gram keys by
:func:`~readmodel.projection.grams.document_gram_keys`).  The FTS5 tables are
SQLite's own and are not copied.
"""

from __future__ import annotations


import psycopg

from readmodel.search import serverterms
from readmodel.store.postgres import upgrade
from readmodel.store.schema import metadata
from tests import indexdb

COPY_CHUNK = 5_000
# Server tables SQLite holds otherwise (schema 0018: each document's text hash is its text's).
_SQLITE_SOURCES = {"document_hashes": 'SELECT d."docid", t."hash" FROM "document_rows" d JOIN "texts" t ON t."id" = d."text_id"'}


def copy_index(sqlite_db: str, url: str, *, revision: str | None = None) -> str:
    """Fill the empty PostgreSQL database ``url`` with the SQLite index ``sqlite_db``; returns ``url``.

    With ``revision`` (one before 0014) the schema is created at that revision and only the
    relational tables are copied: what an index built before the search tables holds.
    """
    if revision is None:
        upgrade(url)
    else:
        from alembic import command

        from readmodel.store.postgres import create_postgres_engine
        from readmodel.store.revisions import alembic_config

        engine = create_postgres_engine(url)
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), revision)
        engine.dispose()
    source = indexdb.connect(f"file:{sqlite_db}?mode=ro", uri=True)
    try:
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            cur.execute('DELETE FROM "index_meta"')  # the row db upgrade made; the SQLite index's replaces it
            for table in metadata.sorted_tables:
                columns = [column.name for column in table.columns]
                names = ", ".join(f'"{name}"' for name in columns)
                rows = source.execute(_SQLITE_SOURCES.get(table.name, f'SELECT {names} FROM "{table.name}"'))
                with cur.copy(f'COPY "{table.name}" ({names}) FROM STDIN') as copy:
                    while chunk := rows.fetchmany(COPY_CHUNK):
                        for row in chunk:
                            copy.write_row(row)
            if revision is not None:
                return url
            # Bulk load first, secondary indexes after (a build is far cheaper than row-by-row upkeep).
            indexes = [ddl for ddl in serverterms.DDL if ddl.startswith("CREATE INDEX")]
            for ddl in indexes:
                cur.execute("DROP INDEX " + ddl.split('"')[1])
            serverterms.backfill(cur)
            for ddl in indexes:
                cur.execute(ddl)
            cur.execute("ANALYZE")
    finally:
        source.close()
    return url
