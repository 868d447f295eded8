"""A comparable dump of an index database: what must be equal between builds.

Incremental indexing must give exactly the database content of a cold rebuild.
Row ids, generations and timestamps legitimately differ; block boundaries may
differ too (appends merge into the last block), so raw events are compared
decoded, one per seq.  Everything else is compared row for row.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from readmodel.blocks import decompress_block


def index_state(db_path: str, fts_probe: str = "the") -> dict[str, Any]:
    """Every comparable row of the index at ``db_path``, keyed by table."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        ids = {sid: session_id for sid, session_id in conn.execute('SELECT "sid", "id" FROM "sessions"')}
        state: dict[str, Any] = {}
        state["sessions"] = sorted(
            conn.execute(
                'SELECT "id", "path", "header_json", "created_at", "id_key", "cwd", "parent_session", "revision", "size", '
                '"event_count", "stored_count", "synthetic_from", "tail_state", "surface_nodes", "title_seq", "status", '
                '"error_code", "error_message" FROM "sessions"'
            )
        )
        state["events"] = sorted((ids[row[0]], *row[1:]) for row in conn.execute('SELECT * FROM "events"'))
        raw: list[tuple[Any, ...]] = []
        for sid, first, count, synthetic, data in conn.execute('SELECT "sid", "first_seq", "count", "synthetic", "data" FROM "event_blocks"'):
            lines = decompress_block(data)
            assert len(lines) == count
            raw.extend((ids[sid], first + offset, synthetic, line) for offset, line in enumerate(lines))
        state["raw_events"] = sorted(raw)
        state["links"] = sorted((ids[sid], source, seq) for sid, source, seq in conn.execute('SELECT * FROM "event_links"'))
        state["documents"] = sorted(
            (ids[row[0]], *row[1:]) for row in conn.execute('SELECT "sid", "seq", "type", "time", "surface", "length", "text" FROM "documents"')
        )
        docids = {docid: (ids[sid], seq) for docid, sid, seq in conn.execute('SELECT "docid", "sid", "seq" FROM "documents"')}
        state["fts_probe"] = sorted(
            docids[row[0]] for row in conn.execute('SELECT "rowid" FROM "documents_fts" WHERE "documents_fts" MATCH ?', (f'"{fts_probe}"',))
        )
        state["layout_problems"] = sorted(conn.execute('SELECT "path", "kind", "message" FROM "layout_problems"'))
        return state
    finally:
        conn.close()


def fts_consistent(db_path: str) -> bool:
    """FTS5's own integrity check of the external-content index against ``documents``."""
    conn = sqlite3.connect(db_path)
    try:
        conn.execute("INSERT INTO \"documents_fts\"(\"documents_fts\", \"rank\") VALUES ('integrity-check', 1)")
        return True
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()
