"""The PostgreSQL search backend: the SQLite backend's answers from terms with positions.

PostgreSQL never tokenises (docs/postgres.md).  The reading host tokenises
the query with :class:`readmodel.search.tokens.Tokenizer` (FTS5's own
``unicode61``, the tokens the writer stored), looks the terms up by
:func:`~readmodel.search.tokens.term_hash` in ``postings``, and ranks as the
SQLite backend does (:mod:`readmodel.search.sqlite`):

* **Matching**: a document matches the phrase ``t1 … tn`` when it has a
  posting of every term and some position ``p`` with ``p + i - 1`` among the
  positions of ``ti`` for every ``i``.
* **Strength**: the number of spans ``highlight()`` marks, counted from the
  positions by its merge rule (:func:`readmodel.search.tokens.phrase_spans`);
  a one-term phrase's count is its ``tf``.
* **Order**: strength (more first), document length (shorter), time (newer;
  none last), then session id (UTF-8 byte order) across sessions, seq (higher)
  within one, each session represented by its strongest document.
* **Top-k pruning**: a document's count is at most the smallest ``tf`` of
  its terms, so the candidates are read in descending order of that bound
  (PostgreSQL sorts them with the filters applied; positions are fetched in
  batches, only for the documents read): once ``k`` sessions have a count
  above the next bound, no later document can enter the first ``k`` places.
* **Filters**: the request's metadata filters
  (:mod:`readmodel.search.predicates`) are written for PostgreSQL
  (:func:`pg_predicates`) and applied in the candidate statement.
* **Snippets**: from ``documents.text`` of the page's rows, highlighted on the
  reading host (:class:`readmodel.search.highlighter.Highlighter`) and cut by
  :mod:`readmodel.search.snippets`, as SQLite's ``highlight()`` path does.

The ``words`` and ``substring`` modes are :mod:`readmodel.search.pgmodes`.
Each answer is one ``REPEATABLE READ READ ONLY`` transaction of the index
store (:class:`readmodel.store.pgreader.PostgresIndexStore`); the generation
of its cursors is the snapshot's generation vector.  A live overlay (sessions
held in memory by an embedding host) is ranked on the reading host by the
SQLite backend's live path and merged with the server's ranking
(:mod:`readmodel.search.pglive`).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import msgspec

from readmodel.core.errors import SessionQueryError
from readmodel.core.vocabulary import Header
from readmodel.search import pgtexts
from readmodel.search.pgtexts import CANDIDATE_COLUMNS
from readmodel.search.backend import Row
from readmodel.search.config import SearchConfig
from readmodel.search.cursors import CursorCodec
from readmodel.search.engine import SessionSearch
from readmodel.search.highlighter import PREFIX_CHARS, Highlighter
from readmodel.search.pglive import LiveOverlay, LiveView
from readmodel.search.snippets import prefix_decides_snippet
from readmodel.search.predicates import BINDING_LIMIT, FIXED_BINDINGS, OUTER_PREDICATE_LIMIT, Where, binding_error, budget_error, event_where, session_where
from readmodel.search.requests import EventsRequest, SessionsRequest, bounded_terms, match_expression
from readmodel.search.tokens import Tokenizer, phrase_spans, term_hash
from readmodel.store.pgreader import PostgresIndexStore

RANKED_CACHE_ROWS: Final = 500
"""Ranked rows kept per (request, generation) for cheap later pages (as the SQLite backend)."""
RANKED_FIRST_ROWS: Final = 64
RANKED_CACHE_SIZE: Final = 32
BATCH: Final = 512
"""Candidates whose positions are fetched and counted per step of a pruned ranking."""

_NO_TIME: Final = -(2**63)
_CAST: Final = re.compile(r"CAST\((\w+) AS INTEGER\)")




def pg_predicates(where: Where) -> tuple[str, list[Any]]:
    """A predicate builder's fragments as PostgreSQL (``?`` → ``%s``) with SQLite's meaning.

    ``CAST(x AS INTEGER)`` truncates a real toward zero in SQLite (PostgreSQL
    rounds): ``trunc`` for ``created_at``, the only real column; the integer
    columns need no cast.  A constant ``0`` (an empty value list) is false.
    """
    fragments = []
    for fragment in where.fragments:
        if fragment == "0":
            fragments.append("false")
            continue
        fragment = _CAST.sub(lambda m: f"trunc({m.group(1)})" if m.group(1) == "created_at" else m.group(1), fragment)
        fragments.append(fragment.replace("?", "%s"))
    return " AND ".join(fragments), list(where.params)


def check_budgets(sessions: Where | None, events: Where, extra_bindings: int) -> None:
    """The reference's predicate and binding budgets, exactly as the SQLite backend checks them."""
    fragments = len(events.fragments) + (len(sessions.fragments) if sessions is not None else 1)
    if fragments > OUTER_PREDICATE_LIMIT:
        raise budget_error()
    params = len(events.params) + (len(sessions.params) if sessions is not None else 0)
    if FIXED_BINDINGS + params + extra_bindings > BINDING_LIMIT:
        raise binding_error()


def rank_sessions(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Each session's strongest candidate, sessions in ranking order.

    ``rows`` are ``(strength, candidate columns…)`` (:data:`CANDIDATE_COLUMNS`
    order); the strongest by (strength, shorter, newer, higher seq), sessions by
    the same keys then id ascending.
    """
    best: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
    for row in rows:
        key = _key(row)
        held = best.get(row[1])
        if held is None or key > held[0]:
            best[row[1]] = (key, row)
    by_id = sorted(best.values(), key=lambda item: item[1][1])
    return [row for key, row in sorted(by_id, key=lambda item: item[0][:3], reverse=True)]


def rank_events(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """One session's candidates in ranking order (strength, shorter, newer, higher seq)."""
    return sorted(rows, key=_key, reverse=True)


def _key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    time = row[11]
    return (row[0], -row[13], time if type(time) in (int, float) else _NO_TIME, row[9])


def to_row(ranked: tuple[Any, ...]) -> Row:
    """A ranked candidate as the engine's :class:`Row` (``header_json`` holds the sid until the page is filled)."""
    _, session_id, sid, _c, _w, _p, live, persisted, docid, seq, etype, time, surface, _l = ranked[:14]
    return Row(session_id, sid, live, persisted, docid, seq, etype, time, surface)


class PostgresSearchBackend:
    """Search over a PostgreSQL index.  Implements :class:`readmodel.search.backend.SearchBackend`.

    Thread-safe: each snapshot is its own transaction on a pooled connection;
    the tokenizer and highlighter are per thread.
    """

    def __init__(self, store: PostgresIndexStore, *, live: Any = None, config: SearchConfig | None = None, redact: bool = True) -> None:
        """``live``: the host's live source (:mod:`readmodel.search.pglive`); with ``redact`` its
        documents hold secret markers, as the indexer stores them."""
        self.store = store
        self.live = live
        self.config = config or SearchConfig()
        self.overlay = LiveOverlay(live, self.config, redact) if live is not None else None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._ranked: OrderedDict[tuple[str, ...], tuple[list[tuple[Any, ...]], bool]] = OrderedDict()
        self.texts_first = True
        """Rank over distinct texts in the server (:mod:`readmodel.search.pgtexts`); false: the
        per-document path (the property tests' oracle)."""

    def ranked(self, key: tuple[str, ...], fetch: Callable[[int], list[tuple[Any, ...]]], offset: int, need: int) -> list[Row]:
        """Rows ``offset .. offset + need`` of a ranking, cut from a small cache when it holds them.

        The ranking of one request over one generation (``key`` holds both)
        never changes, so later pages of a cursor walk are cut from the rows
        an earlier call ranked.  ``fetch(k)`` returns the first ``k`` ranked
        rows (fewer: the ranking is complete); a miss fetches at least twice
        what the cache held, up to :data:`RANKED_CACHE_ROWS`.
        """
        with self._lock:
            cached = self._ranked.get(key)
            if cached is not None:
                self._ranked.move_to_end(key)
        held = 0
        if cached is not None:
            rows, complete = cached
            if complete or offset + need <= len(rows):
                return [to_row(row) for row in rows[offset : offset + need]]
            held = len(rows)
        if offset + need > RANKED_CACHE_ROWS:
            return [to_row(row) for row in fetch(offset + need)[offset : offset + need]]
        want = min(RANKED_CACHE_ROWS, max(offset + need, 2 * held, RANKED_FIRST_ROWS))
        rows = fetch(want)
        with self._lock:
            self._ranked[key] = (rows[:want], len(rows) < want)
            while len(self._ranked) > RANKED_CACHE_SIZE:
                self._ranked.popitem(last=False)
        return [to_row(row) for row in rows[offset : offset + need]]

    def open(self) -> None:
        with self.store.read():
            pass

    def close(self) -> None:
        """Release the live overlay's in-memory index (the connections are the store's)."""
        if self.overlay is not None:
            self.overlay.close()

    def tokenizer(self) -> Tokenizer:
        held = getattr(self._local, "tokenizer", None)
        if held is None:
            held = self._local.tokenizer = Tokenizer()
        return held

    def highlighter(self) -> Highlighter:
        held = getattr(self._local, "highlighter", None)
        if held is None:
            held = self._local.highlighter = Highlighter()
        return held

    @contextmanager
    def snapshot(self, signal: Any) -> Iterator[_Snapshot]:
        _check(signal)
        with self.store.transaction() as cur, _cancelling(cur.connection, signal):
            cur.execute('SELECT "identity", "cursor_secret" FROM "index_meta"')
            identity, secret = cur.fetchone()
            codec = CursorCodec(identity, bytes(secret))
            if self.overlay is None:
                yield _Snapshot(self, cur, codec, signal)
            else:
                with self.overlay.synced(cur, signal) as view:
                    yield _Snapshot(self, cur, codec, signal, view)
        _check(signal)


@contextmanager
def _cancelling(conn: Any, signal: Any) -> Iterator[None]:
    """Cancel the running statement on the server once ``signal`` aborts (as SQLite's progress handler
    interrupts one); the cancelled statement's error becomes ``SESSION_QUERY_ABORTED``."""
    if signal is None or not hasattr(signal, "wait"):
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if signal.wait(0.05):
                if not done.is_set():
                    conn.cancel_safe()
                return

    watcher = threading.Thread(target=watch, name="sessionq-pg-cancel", daemon=True)
    watcher.start()
    try:
        yield
    except Exception:
        if signal.aborted:
            _check(signal)
        raise
    finally:
        done.set()


def _check(signal: Any) -> None:
    if signal is not None and signal.aborted:
        reason = getattr(signal, "reason", None)
        raise SessionQueryError("SESSION_QUERY_ABORTED", "session-search was aborted", reason if isinstance(reason, BaseException) else None)


class _Snapshot:
    """:class:`readmodel.search.backend.SearchSnapshot` over one PostgreSQL transaction."""

    def __init__(self, backend: PostgresSearchBackend, cur: Any, codec: CursorCodec, signal: Any, view: LiveView | None = None) -> None:
        self.backend, self.cur, self.codec, self.signal = backend, cur, codec, signal
        self.epoch = 0 if view is None else view.epoch
        self.live = view if view is not None and view.holds else None
        """The live overlay while it holds sessions (:mod:`readmodel.search.pglive`), else ``None``."""

    def generation(self) -> str:
        """The server's generation vector, with the live overlay's epoch once it moved (a live
        change makes cross-session cursors stale, as SQLite's ``<index>.<epoch>``)."""
        from readmodel.store.pgreader import PostgresIndexReader

        stored = PostgresIndexReader(self.cur).generation()[1]
        return stored if not self.epoch else f"{stored}.{self.epoch}"

    def target(self, session_id: str) -> tuple[Header, str, int | None]:
        """As SQLite's: a live session first (handle ``None``), else the stored one."""
        if self.live is not None and (live := self.live.target(session_id)) is not None:
            return live
        self.cur.execute(
            'SELECT "sid", "header_json", "generation", "status", "error_code", "error_message" FROM "sessions" WHERE "id" = %s', (session_id,)
        )
        row = self.cur.fetchone()
        if row is None:
            raise SessionQueryError("SESSION_QUERY_SESSION_NOT_FOUND", f'session "{session_id}" not found')
        if row[3] != "ok":
            raise SessionQueryError(row[4], row[5])
        return msgspec.json.decode(row[1]), f"persisted:{row[2]}", row[0]

    def sessions_page(self, request: SessionsRequest, offset: int, cache_key: tuple[str, ...]) -> list[Row]:
        sessions, events = session_where(request.session_filters), event_where(request.event_filters)
        check_budgets(sessions, events, 2)
        if request.match != "phrase":
            from readmodel.search import pgmodes

            return pgmodes.query(self, request, sessions, events, None, offset, cache_key)
        return self._phrase(request, sessions, events, None, request.limit + 1, offset, cache_key)

    def events_page(self, request: EventsRequest, handle: int | None, offset: int, cache_key: tuple[str, ...]) -> list[Row]:
        """``handle`` ``None``: a live session (:meth:`target`)."""
        events = event_where(request.filters)
        check_budgets(None, events, 3)
        if handle is None and self.live is not None and request.match == "phrase":
            return self.live.phrase_events(request, offset, cache_key)
        if request.match != "phrase":
            from readmodel.search import pgmodes

            return pgmodes.query(self, request, None, events, handle, offset, cache_key, live_target=handle is None)
        return self._phrase(request, None, events, handle, request.limit + 1, offset, cache_key)

    # -- phrase ------------------------------------------------------------------

    def _phrase(
        self, request: SessionsRequest | EventsRequest, sessions: Where | None, events: Where, sid: int | None, need: int, offset: int, key: tuple[str, ...]
    ) -> list[Row]:
        terms = bounded_terms(self.backend.tokenizer().tokens(request.query))
        if not terms:
            return []
        if self.backend.texts_first and len(terms) > 1:
            # A longer phrase's spans come from positions: counted once per distinct text.  One
            # term's count is its tf, which postings_top streams in order: nothing to gain there.
            scope = self.scope(sessions, events, sid)
            rank = lambda want: pgtexts.ranked(self.cur, pgtexts.phrase_texts(self.cur, terms, scope), scope, want, judge=False, seq_orders_sessions=False)  # noqa: E731
        else:
            rank = lambda want: self._phrase_ranking(terms, sessions, events, sid, want)  # noqa: E731
        if self.live is not None and sid is None and sessions is not None:
            # The live sessions' leaders join the server's first k sessions (none of them live).
            stored, live = rank, self.live
            rank = lambda want: rank_sessions([*stored(want), *live.phrase_leaders(request.query, sessions, events)])[:want]  # noqa: E731
        rows = self.backend.ranked(key, rank, offset, need)
        return self.fill(rows, match_expression(request.query), request=request)

    def scope(self, sessions: Where | None, events: Where, sid: int | None) -> pgtexts.Scope:
        """Where a texts-first ranking looks: ``sid``'s docid range (``None``: every session) and the filters."""
        conditions, params = self.filters(sessions, events)
        return pgtexts.Scope(None if sid is None else (sid << 32, (sid << 32) | 0xFFFFFFFF), conditions, params)

    def _phrase_ranking(self, terms: list[bytes], sessions: Where | None, events: Where, sid: int | None, need: int) -> list[tuple[Any, ...]]:
        """The first ``need`` ranked candidates of the phrase ``terms`` (pruned: see the module docstring)."""
        keys = [term_hash(term) for term in terms]
        distinct = list(dict.fromkeys(keys))
        conditions, params = self.filters(sessions, events)
        # Two statements.  The bounds: documents holding every term (each term's row once) with
        # min(tf), strongest first (one term: the order of postings_top itself, so it streams).
        # Then per batch the candidate columns of the batch's documents, with the filters.
        joins = "".join(f' JOIN "postings" p{i} ON p{i}."term" = %s AND p{i}."docid" = p0."docid"' for i in range(1, len(distinct)))
        bound = "least(" + ", ".join(f'p{i}."tf"' for i in range(len(distinct))) + ")" if len(distinct) > 1 else 'p0."tf"'
        scope = ""
        scope_params: list[Any] = []
        if sid is not None:
            scope = ' AND p0."docid" BETWEEN %s AND %s'
            scope_params = [sid << 32, (sid << 32) | 0xFFFFFFFF]
        bounds_sql = f'SELECT p0."docid", {bound} AS bound FROM "postings" p0{joins} WHERE p0."term" = %s{scope} ORDER BY bound DESC'
        rows_sql = (
            f'SELECT * FROM (SELECT {CANDIDATE_COLUMNS} FROM "documents" d JOIN "sessions" s ON s."sid" = d."sid" '
            f"WHERE d.\"docid\" = ANY(%s) AND s.\"status\" = 'ok') c" + (f" WHERE {conditions}" if conditions else "")
        )
        single = len(terms) == 1
        counted: list[tuple[Any, ...]] = []
        with self.cur.connection.cursor(name="sessionq_candidates") as stream:
            stream.execute(bounds_sql, [*distinct[1:], distinct[0], *scope_params])
            while batch := stream.fetchmany(BATCH):
                _check(self.signal)
                bounds = dict(batch)
                self.cur.execute(rows_sql, [list(bounds), *params])
                counted += self._count([(bounds[row[7]], *row) for row in self.cur.fetchall()], terms, keys, single)
                if len(batch) < BATCH:
                    break
                # Nothing after this batch counts more than its last bound.
                if _decided(counted, batch[-1][1], need, per_session=sid is None):
                    break
        return (rank_sessions(counted) if sid is None else rank_events(counted))[:need]

    def _count(self, batch: list[tuple[Any, ...]], terms: list[bytes], keys: list[int], single: bool) -> list[tuple[Any, ...]]:
        """``(spans, candidate columns…)`` of a batch's matching documents (the bound replaced by the count)."""
        if single:
            return list(batch)  # one term: every instance is its own span, so the count is tf
        docids = [row[8] for row in batch]
        self.cur.execute('SELECT "docid", "term", "positions" FROM "postings" WHERE "docid" = ANY(%s) AND "term" = ANY(%s)', (docids, list(set(keys))))
        positions: dict[int, dict[bytes, list[int]]] = {}
        by_key = dict(zip(keys, terms))
        for docid, key, found in self.cur.fetchall():
            positions.setdefault(docid, {})[by_key[key]] = found
        out = []
        for row in batch:
            spans = phrase_spans(terms, positions.get(row[8], {}))
            if spans:
                out.append((spans, *row[1:]))
        return out

    def filters(self, sessions: Where | None, events: Where) -> tuple[str, list[Any]]:
        """The request's filters over the candidate columns, as PostgreSQL; with live sessions,
        the stored sessions they overlay are left out too (the live side ranks them)."""
        parts, params = [], []
        for where in (sessions, events):
            if where is not None and where.fragments:
                sql, args = pg_predicates(where)
                parts.append(sql)
                params += args
        if self.live is not None and (overlaid := self.live.overlaid):
            parts.append("session_id <> ALL(%s)")
            params.append(overlaid)
        return " AND ".join(parts), params

    def fill(self, page: list[Row], expression: str | None, marker: Any = None, literal: bool = False, *, request: Any = None) -> list[Row]:
        """Headers and marked texts of one page's rows (``marker(text)`` instead of ``highlight()`` of ``expression``).

        ``literal``: ``marker`` marks the first occurrence of a literal (a substring query
        without whitespace), which a prefix holding it whole marks as the whole text does
        (an earlier occurrence, as long, would lie in the prefix too), so prefixes are tried
        first as for ``highlight()``.  Live rows are the overlay's to fill (``request``: what
        it marks them for)."""
        rows = self.live.fill(page, request) if self.live is not None and request is not None else page
        if not rows:
            return page
        self.cur.execute('SELECT "sid", "header_json" FROM "sessions" WHERE "sid" = ANY(%s)', ([row.header_json for row in rows],))
        headers = dict(self.cur.fetchall())
        for row in rows:
            row.header_json = bytes(headers[row.header_json])
        # Equal texts mark equally: each distinct text of the page is read and marked once.
        self.cur.execute('SELECT "docid", "hash" FROM "document_hashes" WHERE "docid" = ANY(%s)', ([row.docid for row in rows],))
        hashes = dict(self.cur.fetchall())
        holders: dict[Any, list[Row]] = {}
        for row in rows:
            holders.setdefault(hashes.get(row.docid, ("document", row.docid)), []).append(row)
        marked = self._marked([group[0].docid for group in holders.values()], expression, marker, literal)
        for group in holders.values():
            for row in group:
                row.marked_text = marked.get(group[0].docid, "")
        return page

    def _marked(self, docids: list[int], expression: str | None, marker: Any, literal: bool) -> dict[int, str]:
        """``docid → marked text`` (see :meth:`fill`)."""
        if marker is not None and not literal:
            return {docid: marker(text) for docid, (text, _) in self._texts(docids, None).items()}
        # As Highlighter.snippet_source, reading only the prefixes it tries: a long tool
        # output's prefix costs PostgreSQL a partial decompression, not the whole value.
        highlighter = self.backend.highlighter()
        mark = marker if marker is not None else (lambda text: highlighter.marked(text, expression or ""))
        width = self.backend.config.snippet_chars
        first = PREFIX_CHARS + 4 * width
        pending = set(docids)
        found: dict[int, str] = {}
        for size in (first, 16 * first, None):
            for docid, (text, length) in self._texts(list(pending), size).items():
                if size is None or length <= size:
                    found[docid] = mark(text)
                    pending.discard(docid)
                    continue
                marked = mark(text)
                if marked and prefix_decides_snippet(marked, width):
                    found[docid] = marked
                    pending.discard(docid)
            if not pending:
                break
        return found

    def _texts(self, docids: list[int], size: int | None) -> dict[int, tuple[str, int]]:
        """``docid → (text or its first size code points, length)`` of stored documents."""
        column = '"text"' if size is None else f'substr("text", 1, {int(size)})'
        self.cur.execute(f'SELECT "docid", {column}, "length" FROM "documents" WHERE "docid" = ANY(%s)', (docids,))
        return {docid: (text, length) for docid, text, length in self.cur.fetchall()}


def _decided(counted: list[tuple[Any, ...]], bound: int, need: int, *, per_session: bool) -> bool:
    """Whether ``need`` places are settled: that many sessions (or documents) count more than ``bound``."""
    if per_session:
        return len({row[1] for row in counted if row[0] > bound}) >= need
    return sum(1 for row in counted if row[0] > bound) >= need


def postgres_search(store: PostgresIndexStore, *, live: Any = None, config: SearchConfig | None = None, redact: bool = True) -> SessionSearch:
    """A :class:`SessionSearch` over the PostgreSQL index ``store`` reads, with the live source ``live``
    overlaid (``redact``: its documents hold secret markers, as the indexer stores them)."""
    config = config or SearchConfig()
    return SessionSearch(PostgresSearchBackend(store, live=live, config=config, redact=redact), config)
