"""Removing a source's sessions on purpose (``sessionq prune --source NAME``).

A host that stops indexing keeps its sessions in a shared index: history
outlives the agent's own clean-up, and no other daemon deletes what another
source wrote.  Pruning is the deliberate way to remove them: every session of
the source with its events, documents and FTS rows, its layout problems and
its ``sources`` row, in one ``BEGIN IMMEDIATE`` transaction that bumps the
global generation — all or nothing.  The caller holds the source's lock, so
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
            cur.execute('DELETE FROM "sources" WHERE "source" = ?', (source,))
            if sids and isinstance(writer, SqliteWriter):
                # A server index has no global generation: the source's counter goes with its row.
                cur.execute('UPDATE "index_meta" SET "global_generation" = "global_generation" + 1')
            writer.commit(cur)
        except BaseException:
            if writer.in_transaction(cur):
                cur.execute("ROLLBACK")
            raise
    return len(sids)
