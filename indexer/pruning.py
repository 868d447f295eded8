"""Removing a source's sessions on purpose (``sessionq prune --source NAME``).

A host that stops indexing keeps its sessions in a shared index: history
outlives the agent's own clean-up, and no other daemon deletes what another
source wrote.  Pruning is the deliberate way to remove them: every session of
the source with its events, documents and FTS rows, its layout problems and
its ``sources`` row, in one transaction (``BEGIN IMMEDIATE`` on SQLite) that
bumps the global generation — all or nothing.  On PostgreSQL, whose
generation is the sum of the sources' counters and ``global_generation``
(:data:`readmodel.store.sources.SERVER_GENERATION_SQL`), the removed row's
counter moves into ``global_generation`` with the bump.  The caller holds the source's lock, so
the source's daemon is not running meanwhile.
"""

from __future__ import annotations

import msgspec
from sqlalchemy import Engine

from .projection import delete_session_rows
from .writers import SqliteWriter, writer_for


class SourceCounts(msgspec.Struct, frozen=True):
    """What an index holds of one source."""

    source: str
    sessions: int
    known: bool  # the source has a row in ``sources`` (it indexed here at least once)


def source_counts(engine: Engine, source: str) -> SourceCounts:
    """How many sessions ``source`` has in the index (read-only)."""
    with writer_for(engine).cursor() as cur:
        sessions = cur.execute('SELECT count(*) FROM "sessions" WHERE "source" = ?', (source,)).fetchone()[0]
        known = cur.execute('SELECT 1 FROM "sources" WHERE "source" = ?', (source,)).fetchone() is not None
    return SourceCounts(source, int(sessions), known)


def prune_source(engine: Engine, source: str) -> int:
    """Remove every row of ``source`` in one transaction; returns the sessions removed."""
    writer = writer_for(engine)
    with writer.cursor() as cur:
        writer.begin(cur)
        try:
            sids = [row[0] for row in cur.execute('SELECT "sid" FROM "sessions" WHERE "source" = ?', (source,)).fetchall()]
            for sid in sids:
                delete_session_rows(cur, sid)
            cur.execute('DELETE FROM "sessions" WHERE "source" = ?', (source,))
            cur.execute('DELETE FROM "layout_problems" WHERE "source" = ?', (source,))
            counter = cur.execute('DELETE FROM "sources" WHERE "source" = ? RETURNING "generation"', (source,)).fetchone()
            if isinstance(writer, SqliteWriter):
                if sids:
                    cur.execute('UPDATE "index_meta" SET "global_generation" = "global_generation" + 1')
            elif sids or (counter and counter[0]):
                # A server index's generation is the sum of the sources' counters plus this one
                # (readmodel.store.status): the removed counter moves here, plus one for the prune,
                # so the sum never goes back and a source indexed again never repeats a vector.
                cur.execute('UPDATE "index_meta" SET "global_generation" = "global_generation" + ?', ((counter[0] if counter else 0) + (1 if sids else 0),))
            writer.commit(cur)
        except BaseException:
            if writer.in_transaction(cur):
                cur.execute("ROLLBACK")
            raise
    return len(sids)
