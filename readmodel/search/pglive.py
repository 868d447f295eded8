"""Live sessions in a PostgreSQL search: ranked on the reading host, merged with the server's ranking.

The live source (query-spec §1: the in-process session store the embedding
host holds) is always in the reading process, so its sessions are ranked
there, by the SQLite backend's own live path: :class:`LiveOverlay` keeps an
in-memory SQLite index (no file, no stored session) whose TEMP tables
``live_sessions`` and ``live_docs`` (:mod:`readmodel.search.sqlite`) the
source is synced into at every snapshot, as a SQLite reader's own connection
is.  Each stored session a live one overlays gets a row of that index's
``sessions`` (its id and source only, status ``overlaid``, never searched),
read from the PostgreSQL snapshot: so a live session is ``persisted`` when the
index stores it, the ``source`` filter (a sessionq extension) finds it by its
stored row's source, and a live-only session has none.

The PostgreSQL side ranks without the overlaid sessions (their ids are
excluded in the candidate statements, :meth:`readmodel.search.postgres._Snapshot.filters`),
and the two rankings are merged by the backend-neutral key:

* ``phrase`` across sessions: each live session's strongest document with its
  strength and length (:meth:`LiveView.phrase_leaders`) joins the server's
  first ``k`` sessions, ordered by :func:`readmodel.search.postgres.rank_sessions`
  (strength, shorter, newer, session id); sessions never overlap, and the
  first ``k`` of the merge hold at most ``k`` stored sessions, which the
  server's first ``k`` are.  Within a live session the SQLite backend answers
  alone (:meth:`LiveView.phrase_events`); within a stored one, the server.
* ``words`` and ``substring``: the boilerplate verdict couples the sides (a
  text held by a live session and two stored ones is boilerplate on both), so
  with live sessions these modes take the per-document path
  (:mod:`readmodel.search.pgmodes`, as SQLite takes its slow path): the
  server's matches and the live ones (:meth:`LiveView.mode_matches`, digests by
  :func:`readmodel.projection.texthash.text_hash`, the stored texts' hash) go
  into one :class:`readmodel.search.modes.Ranking`; a scoped search looks the
  rare texts up among the stored sessions not overlaid and among the live
  documents (:meth:`LiveView.hash_holders`).

Snippets and headers of live rows are the SQLite backend's
(:meth:`LiveView.fill`).  The cross-session generation is the server's with
the overlay's epoch appended once it moved (``<server>.<epoch>``; as SQLite's
``<index>.<epoch>``), so a live change makes cursors stale; a live session's
own generation is ``live:<n>`` as on SQLite.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import msgspec

from readmodel.core.vocabulary import Header
from readmodel.projection.texthash import text_hash
from readmodel.search import sqlitemodes
from readmodel.search.backend import Row
from readmodel.search.config import SearchConfig
from readmodel.search.modes import Match
from readmodel.search.predicates import Where
from readmodel.search.requests import EventsRequest, SessionsRequest, bounded_terms, match_expression
from readmodel.search.phrasetexts import RANK_KEY
from readmodel.search.sqlite import SqliteSearchBackend, _finish

OVERLAID: Final = "overlaid"
"""The status of the in-memory index's rows standing for stored sessions a live one overlays."""

_STORED_ROW: Final = (
    'INSERT INTO "sessions" ("id", "path", "header_json", "id_key", "revision", "size", "event_count", "stored_count", '
    '"tail_state", "status", "generation", "indexed_at", "source") '
    f"VALUES (?, ?, x'', x'', '', 0, 0, 0, '', '{OVERLAID}', 0, 0, ?)"
)

# Each live session's strongest document (SQLite's own choice: the max of its ranking key), with
# the keys the merge needs, as (strength, candidate columns…) (readmodel.search.postgres.to_row).
# {items} is the SQLite backend's live items, (rowid, n, length) of each matching live document;
# materialised: an FTS5 auxiliary function (the span count) may not run inside the aggregate.
_LEADERS: Final = f"""
WITH items AS MATERIALIZED ({{items}}),
candidates AS (
  SELECT l."id" AS session_id, NULL AS header_json, l."created_at" AS created_at, l."cwd" AS cwd,
         l."parent_session" AS parent_session, 1 AS live, l."persisted" AS persisted, -ld."rowid" AS docid, ld."seq" AS seq,
         ld."type" AS type, ld."time" AS time, ld."surface" AS surface, i."length" AS document_length, i."n" AS match_count
  FROM items i JOIN temp."live_docs" ld ON ld."rowid" = i."rowid" JOIN temp."live_sessions" l ON l."id" = ld."session_id"),
filtered AS (SELECT * FROM candidates{{where}}),
best AS (SELECT *, max({RANK_KEY}) FROM filtered GROUP BY session_id)
SELECT match_count, session_id, NULL, created_at, cwd, parent_session, live, persisted, docid, seq, type, time, surface,
       document_length
FROM best"""


def text_digest(value: int) -> bytes:
    """A :class:`~readmodel.search.modes.Match` digest of a text by its stored hash (as
    :mod:`readmodel.search.pgmodes` makes them from ``document_hashes``)."""
    return b"h" + int(value).to_bytes(8, "little", signed=True)


class LiveOverlay:
    """A PostgreSQL backend's live sessions, in an in-memory SQLite index of this process.

    Thread-safe: a snapshot holds the in-memory index's lock (live searches are serialised,
    as every search of a SQLite reader is)."""

    def __init__(self, live: Any, config: SearchConfig, redact: bool) -> None:
        self.live = live
        self.engine = SqliteSearchBackend(None, live=live, config=config, redact=redact)
        self._stored: dict[str, str | None] = {}  # the overlaid stored sessions: id → source
        self._hashes: tuple[int, dict[int, set[str]]] = (-1, {})  # (epoch, text hash → live holders)

    def close(self) -> None:
        self.engine.close()

    @contextmanager
    def synced(self, cur: Any, signal: Any) -> Iterator[LiveView]:
        """The overlay synced with the live source now, the stored rows from ``cur``'s snapshot."""
        engine = self.engine
        with engine._serialised(signal), engine._cancellable(signal):
            conn = engine._connection()
            conn.execute("BEGIN")
            try:
                listed = list(self.live.list())  # one listing for the stored rows and the sync
                self._sync_stored(conn, cur, [session.header["id"] for session in listed])
                engine._sync_live(conn, listed)
                yield LiveView(self, conn)
            finally:
                _finish(conn)

    def _sync_stored(self, conn: sqlite3.Connection, cur: Any, ids: list[str]) -> None:
        """Rows of the stored sessions among ``ids`` (id and source), rewritten when they changed."""
        stored: dict[str, str | None] = {}
        if ids:
            cur.execute('SELECT "id", "source" FROM "sessions" WHERE "id" = ANY(%s)', (ids,))
            stored = dict(cur.fetchall())
        if stored != self._stored:
            self._stored = {}
            conn.execute('DELETE FROM "sessions"')
            conn.executemany(_STORED_ROW, [(session_id, session_id, source) for session_id, source in stored.items()])
            self._stored = stored

    def hash_holders(self, conn: sqlite3.Connection) -> dict[int, set[str]]:
        """The live sessions holding each text, by its :func:`text_hash` (computed once per epoch)."""
        epoch = self.engine._live_state.epoch
        if self._hashes[0] != epoch:
            holders: dict[int, set[str]] = {}
            for text, session_id in conn.execute('SELECT "text", "session_id" FROM temp."live_docs"'):
                holders.setdefault(text_hash(text), set()).add(session_id)
            self._hashes = (epoch, holders)
        return self._hashes[1]


class LiveView:
    """The overlay within one snapshot (its in-memory connection inside a transaction)."""

    def __init__(self, overlay: LiveOverlay, conn: sqlite3.Connection) -> None:
        self.overlay, self.engine, self.conn = overlay, overlay.engine, conn

    @property
    def epoch(self) -> int:
        """How many times the overlay changed in this process (0: never)."""
        return self.engine._live_state.epoch

    @property
    def holds(self) -> bool:
        """Whether the live source holds any session now."""
        return bool(self.engine._live_state.fingerprints)

    @property
    def overlaid(self) -> list[str]:
        """The ids of the stored sessions live ones overlay (the server's ranking leaves them out)."""
        return list(self.overlay._stored)

    def target(self, session_id: str) -> tuple[Header, str, None] | None:
        """A live session's ``(header, generation, None)`` for a within-session search; ``None``: not live."""
        found = self.conn.execute('SELECT "header_json", "generation" FROM temp."live_sessions" WHERE "id" = ?', (session_id,)).fetchone()
        return None if found is None else (msgspec.json.decode(found[0]), f"live:{found[1]}", None)

    def phrase_leaders(self, query: str, sessions: Where, events: Where) -> list[tuple[Any, ...]]:
        """Each live session's strongest document of the phrase ``query`` within the filters."""
        if not bounded_terms(self.engine._terms(self.conn, query)):
            return []
        items, args = self.engine._live_items(match_expression(query), None)
        where = " AND ".join(fragment for fragment in (sessions.sql(), events.sql()) if fragment)
        sql = _LEADERS.format(items=items, where=f" WHERE {where}" if where else "")
        return self.conn.execute(sql, [*args, *sessions.params, *events.params]).fetchall()

    def phrase_events(self, request: EventsRequest, offset: int, cache_key: tuple[str, ...]) -> list[Row]:
        """A page of a phrase search within a live session: the SQLite backend's own, filled."""
        return self.engine._query_events(self.conn, request, None, offset, cache_key)

    def mode_matches(self, request: SessionsRequest | EventsRequest, sessions: Where | None, events: Where, session_id: str | None) -> list[Match]:
        """The live documents a ``words`` or ``substring`` request matches within the filters (of
        ``session_id`` alone, or of every live session), their texts' digests by stored hash."""
        mode = sqlitemodes._Mode(self.engine, self.conn, request.match, request.query, request.prefix)
        if mode.empty:
            return []
        inner, args = mode.live(session_id)
        wheres = [where for where in (sessions, events) if where is not None and where.fragments]
        sql = f"SELECT * FROM ({inner})" + (" WHERE " + " AND ".join(where.sql() for where in wheres) if wheres else "")
        found = []
        texts = 'SELECT "text" FROM temp."live_docs" WHERE "rowid" = ?'
        for session_id_, _h, _c, _w, _p, live, persisted, docid, seq, etype, time, surface, length, text, counted in self.conn.execute(
            sql, [*args, *(param for where in wheres for param in where.params)]
        ).fetchall():
            strength = mode.strength(text, counted)
            if strength:
                raw = self.conn.execute(texts, (-docid,)).fetchone()[0]
                found.append(Match(session_id_, None, live, persisted, docid, seq, etype, time, surface, length, strength, text_digest(text_hash(raw))))
        return found

    def hash_holders(self, value: int) -> set[str]:
        """The live sessions holding the text whose :func:`text_hash` is ``value``."""
        return self.overlay.hash_holders(self.conn).get(value, set())

    def fill(self, rows: Sequence[Row], request: SessionsRequest | EventsRequest) -> list[Row]:
        """Headers and marked texts of the page's live rows, as the SQLite backend fills them;
        returns the other (stored) rows, left to the server."""
        live = [row for row in rows if row.live]
        if live:
            if request.match == "phrase":
                self.engine._highlight(self.conn, live, match_expression(request.query))
            else:
                mode = sqlitemodes._Mode(self.engine, self.conn, request.match, request.query, request.prefix)
                if mode.mode == "substring":
                    self.engine._highlight(self.conn, live, "", lambda row: mode.mark(self.conn, row.docid))
                else:
                    self.engine._highlight(self.conn, live, mode.expression)
        return [row for row in rows if not row.live]
