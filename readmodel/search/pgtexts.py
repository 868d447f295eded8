"""Texts-first ranking on PostgreSQL: every mode ranked over distinct texts inside the server.

The counterpart of :mod:`readmodel.search.sqlranking` for a PostgreSQL index.
A hit's first ranking keys — the boilerplate verdict (``words`` and
``substring``), its strength and its length — depend on its text alone, and
the index keeps the search rows once per distinct text as well (migration
0020, :mod:`readmodel.search.serverterms`: ``search_texts``,
``text_postings``).  So a search is ranked in three steps, and only a page's
worth of rows ever leaves the server:

1. **Texts**: the distinct matching texts with their strength and length,
   computed from the per-text rows (within one session: only the texts its
   documents hold).

   * ``phrase`` of two or more terms (one term keeps the per-document path,
     whose ``postings_top`` streams documents in order of their exact count):
     the texts holding every term, their strength the spans ``highlight()``
     marks, counted from the positions of those texts
     (:func:`readmodel.search.tokens.phrase_spans`).
   * ``words``: the texts holding an instance of every phrase (the prefix
     token's expansions from the dictionary); when every phrase is one token
     the strength is the sum of the distinct terms' ``tf`` (in SQL), else the
     merged spans of the phrases' instances
     (:func:`readmodel.search.pgmodes.words_strength`).
   * ``substring``: the gram index's candidate texts (``search_texts.grams``),
     each counted once in one document holding it; an ASCII query without
     whitespace is counted in SQL (``replace`` of the lowered text, which is
     exactly ``str.count`` of the lowered literal), any other query on the
     reading host with the compiled pattern.  A text counted 0 is no match.

2. **Classes**: texts ordered by (strength more, length shorter) and cut into
   classes of equal keys; ``words`` and ``substring`` take the boilerplate
   verdict lazily in that order (:data:`JUDGED_AHEAD` texts per statement; a
   text in :data:`~readmodel.search.modes.BOILERPLATE_SESSIONS` sessions with
   status ok, walked session by session on ``document_hashes_walk``), specific
   classes first, boilerplate ones after them.

3. **Documents** of the leading classes, a growing batch of classes per
   statement, ordered by the remaining keys — newer time, none last, higher
   seq, session id in UTF-8 byte order.  Across sessions the batch's documents
   are sorted newest first on ``text_documents`` alone and stream through a
   server-side cursor into the joins and filters (:func:`_read_newest`), so
   of a text thousands of sessions hold only the leading holders are joined;
   within one session, its documents of the batch with a ``LIMIT``.  Reading
   stops once the page's sessions (rows, within one session) are known:
   every later class ranks after them.

The phrase mode orders tied sessions by id without looking at seq (the
reference's order, :func:`readmodel.search.postgres.rank_sessions`); the
other modes by seq first (:class:`readmodel.search.modes.Ranking`).

Equal hashes stand for equal texts (a 64-bit hash, as on SQLite).  The
per-document path (:mod:`readmodel.search.postgres`' pruned phrase ranking,
:mod:`readmodel.search.pgmodes`) is kept as the slow path and the property
tests' oracle: :attr:`PostgresSearchBackend.texts_first` switches.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from readmodel.core.jsvalues import JS_WHITESPACE
from readmodel.search.modes import BOILERPLATE_SESSIONS, text_classes
from readmodel.search.serverterms import PREFIX_BYTES
from readmodel.search.tokens import phrase_spans, term_hash

CANDIDATE_COLUMNS: Final = """s."id" AS session_id, s."sid" AS sid, s."created_at" AS created_at, s."cwd" AS cwd,
         s."parent_session" AS parent_session, 0 AS live, 1 AS persisted, d."docid" AS docid, d."seq" AS seq,
         d."type" AS type, d."time" AS time,
         CASE d."surface" WHEN 1 THEN 'current' WHEN 2 THEN 'shadowed' ELSE 'log-only' END AS surface,
         d."length" AS document_length"""
"""The candidate columns the filters name (as the SQLite backend's candidates)."""

JUDGED_AHEAD: Final = 256
"""Texts whose verdict one statement settles (the next ones in ranking order)."""

FIRST_BATCH: Final = 16
"""Texts whose documents the first step-3 statement reads; each later one reads four times more."""

_TEXT_DOCUMENT: Final = '(SELECT o."docid" FROM "document_hashes" o WHERE o."hash" = x."hash" LIMIT 1)'
"""One document holding the text ``x."hash"`` (a ``LATERAL`` subquery: the planner then probes it per text)."""

FIRST_COUNTED: Final = 16
"""Substring candidates counted by the first statement; each later one counts four times more."""

# Step 2: whether stored sessions with status ok hold each text at least BOILERPLATE_SESSIONS
# times over: from a text's first document, the first document of a later session, and so on
# (one probe of document_hashes_walk per session, never every holder of a common text).
_VERDICTS: Final = f"""
SELECT w."hash", (
  WITH RECURSIVE walk("sid", "n") AS (
    SELECT (SELECT o."docid" >> 32 FROM "document_hashes" o JOIN "sessions" s ON s."sid" = o."docid" >> 32
            WHERE o."hash" = w."hash" AND s."status" = 'ok' ORDER BY o."docid" LIMIT 1), 1
    UNION ALL
    SELECT (SELECT o."docid" >> 32 FROM "document_hashes" o JOIN "sessions" s ON s."sid" = o."docid" >> 32
            WHERE o."hash" = w."hash" AND o."docid" >= (walk."sid" + 1) << 32 AND s."status" = 'ok' ORDER BY o."docid" LIMIT 1),
           walk."n" + 1
    FROM walk WHERE walk."sid" IS NOT NULL AND walk."n" < {BOILERPLATE_SESSIONS})
  SELECT count(walk."sid") FROM walk) >= {BOILERPLATE_SESSIONS}
FROM unnest(%s::bigint[]) AS w("hash")"""


@dataclass(slots=True)
class Text:
    """One distinct matching text: its hash, strength and length (and verdict, once judged)."""

    hash: int
    strength: int
    length: int
    shared: bool | None = None


@dataclass(frozen=True)
class Scope:
    """Where a search looks: one session's docid range (``None``: every session) and the filters
    over :data:`CANDIDATE_COLUMNS` (PostgreSQL SQL and its arguments)."""

    docids: tuple[int, int] | None
    conditions: str
    params: list[Any]

    def texts_clause(self, column: str) -> tuple[str, list[Any]]:
        """A condition keeping the texts some document of the session holds (nothing across sessions)."""
        if self.docids is None:
            return "", []
        return f' AND {column} IN (SELECT "hash" FROM "document_hashes" WHERE "docid" BETWEEN %s AND %s)', list(self.docids)


def ranked(
    cur: Any, texts: list[Text], scope: Scope, need: int, *, judge: bool, seq_orders_sessions: bool, counter: Any = None
) -> list[tuple[Any, ...]]:
    """The first ``need`` ranked rows ``(strength, candidate columns…)`` of the matching ``texts``
    (steps 2 and 3; :func:`readmodel.search.postgres.to_row`'s shape).  With ``counter``
    (:func:`substring_counter`) the texts' strengths are bounds, counted lazily
    (:func:`_bounded_classes`)."""
    texts.sort(key=lambda text: (-text.strength, text.length))
    per_session = scope.docids is None
    found: list[tuple[Any, ...]] = []
    seen: set[str] = set()
    batch: list[list[Text]] = []
    size, wanted = 0, FIRST_BATCH
    if counter is None:
        classes = text_classes(texts, partial(_judge, cur) if judge else None, JUDGED_AHEAD)
    else:
        classes = _bounded_classes(cur, texts, counter)
    for group in classes:
        batch.append(group)
        size += len(group)
        if size < wanted:
            continue
        _read(cur, batch, scope, need, found, seen, per_session, seq_orders_sessions)
        if len(found) >= need:
            return found[:need]
        batch, size, wanted = [], 0, wanted * 4
    if batch:
        _read(cur, batch, scope, need, found, seen, per_session, seq_orders_sessions)
    return found[:need]


def _read(
    cur: Any, batch: list[list[Text]], scope: Scope, need: int, found: list[tuple[Any, ...]], seen: set[str], per_session: bool, seq_orders: bool
) -> None:
    """Step 3 for a batch of classes: append the rows that come next in ranking order to ``found``."""
    hashes, ranks, strengths = [], [], []
    for rank, group in enumerate(batch):
        strengths.append(group[0].strength)
        for text in group:
            hashes.append(text.hash)
            ranks.append(rank)
    if per_session:
        _read_newest(cur, hashes, ranks, strengths, scope, need, found, seen, seq_orders)
        return
    where, params = "", []
    if scope.docids is not None:
        where, params = ' AND h."docid" BETWEEN %s AND %s', list(scope.docids)
    inner = (
        f'SELECT k."rank" AS "rank", {CANDIDATE_COLUMNS} FROM unnest(%s::bigint[], %s::int[]) AS k("hash", "rank") '
        'JOIN "document_hashes" h ON h."hash" = k."hash" JOIN "documents" d ON d."docid" = h."docid" '
        f"JOIN \"sessions\" s ON s.\"sid\" = d.\"sid\" WHERE s.\"status\" = 'ok'{where}"
    )
    inner = f"SELECT * FROM ({inner}) c" + (f" WHERE {scope.conditions}" if scope.conditions else "")
    later = 'time DESC NULLS LAST, seq DESC, session_id COLLATE "C"'
    if per_session:
        inner = f"SELECT DISTINCT ON (session_id) * FROM ({inner}) b ORDER BY session_id, rank, time DESC NULLS LAST, seq DESC"
        if not seq_orders:
            later = 'time DESC NULLS LAST, session_id COLLATE "C"'
    cur.execute(f"SELECT * FROM ({inner}) r ORDER BY rank, {later} LIMIT %s", [hashes, ranks, *params, *scope.params, need])
    for row in cur.fetchall():
        if per_session:
            if row[1] in seen:
                continue
            seen.add(row[1])
        found.append((strengths[row[0]], *row[1:]))


def _read_newest(
    cur: Any, hashes: list[int], ranks: list[int], strengths: list[int], scope: Scope, need: int, found: list[tuple[Any, ...]], seen: set[str], seq_orders: bool
) -> None:
    """Step 3 across sessions: the batch's documents in order of class, newest first (sorted on
    ``text_documents`` alone), joined and filtered as they stream; a session's first is its best.
    Reading stops once the page's sessions are found and the documents tied with the last one
    on class and time are read (their seq and session id order them), so of a common text only
    its leading holders are ever joined."""
    leading = (
        'SELECT t."docid", t."time", k."rank" FROM unnest(%s::bigint[], %s::int[]) AS k("hash", "rank") '
        'JOIN "text_documents" t ON t."hash" = k."hash" ORDER BY k."rank", t."time" DESC NULLS LAST, t."docid" DESC OFFSET 0'
    )
    inner = (
        f'SELECT l."rank" AS "rank", l."time" AS "newest", l."docid" AS "walk", {CANDIDATE_COLUMNS} FROM ({leading}) l '
        'JOIN "documents" d ON d."docid" = l."docid" JOIN "sessions" s ON s."sid" = d."sid" WHERE s."status" = \'ok\''
    )
    sql = f"SELECT * FROM ({inner}) c" + (f" WHERE {scope.conditions}" if scope.conditions else "") + ' ORDER BY "rank", "newest" DESC NULLS LAST, "walk" DESC'
    leaders: list[tuple[Any, ...]] = []
    boundary = None
    with cur.connection.cursor(name="sessionq_newest") as stream:
        stream.execute(sql, [hashes, ranks, *scope.params])
        while boundary is None or rows:
            rows = stream.fetchmany(max(2 * need, 64))
            if not rows:
                break
            for row in rows:
                if boundary is not None and (row[0], row[1]) != boundary:
                    rows = []
                    break
                if row[3] in seen:
                    continue
                seen.add(row[3])
                leaders.append(row)
                if boundary is None and len(found) + len(leaders) >= need:
                    boundary = (row[0], row[1])
    # Ties on class and time: higher seq (not across sessions in the phrase mode), then id.
    leaders.sort(key=lambda row: row[3].encode("utf-8", "surrogatepass"))
    leaders.sort(key=lambda row: (row[0], -_time(row[1]), -row[11] if seq_orders else 0))
    found += [(strengths[row[0]], *row[3:]) for row in leaders]


def _time(value: Any) -> int:
    return value if value is not None else -(2**63)


def _judge(cur: Any, texts: list[Text]) -> None:
    """Settle the verdict of every text in ``texts`` that has none (one statement)."""
    lookup = [text.hash for text in texts if text.shared is None]
    if lookup:
        cur.execute(_VERDICTS, (lookup,))
        verdicts = dict(cur.fetchall())
        for text in texts:
            if text.shared is None:
                text.shared = bool(verdicts[text.hash])


def _bounded_classes(cur: Any, texts: list[Text], counter: Any) -> Generator[list[Text], None, None]:
    """:func:`~readmodel.search.modes.text_classes` (judged) of texts whose strengths are only bounds yet, in descending order
    of bound: counted a growing batch at a time, in that order.  A counted text is placed once it
    counts more than the next uncounted bound (no later text can reach it): a specific one then,
    a boilerplate one after every text is counted.  Verdicts are taken as texts are placed."""
    pending: list[Text] = []  # counted, not yet placed, in ranking order
    shared: list[Text] = []
    start, size = 0, FIRST_COUNTED
    while True:
        bound = texts[start].strength if start < len(texts) else 0
        placeable = 0
        while placeable < len(pending) and pending[placeable].strength > bound:
            placeable += 1
        while placeable:
            end = 1
            while end < len(pending) and (pending[end].strength, pending[end].length) == (pending[0].strength, pending[0].length):
                end += 1
            if pending[end - 1].shared is None:
                _judge(cur, pending[: max(end, min(placeable, JUDGED_AHEAD))])
            group, pending, placeable = pending[:end], pending[end:], placeable - end
            shared += [text for text in group if text.shared]
            specific = [text for text in group if not text.shared]
            if specific:
                yield specific
        if start >= len(texts):
            break
        batch = texts[start : start + size]
        if batch[0].strength == UNBOUNDED:
            batch = texts[start:]  # nothing narrows: count them all at once
        counts = counter(batch)
        for text in batch:
            text.strength = counts.get(text.hash, 0)
        pending = sorted(pending + [text for text in batch if text.strength], key=lambda text: (-text.strength, text.length))
        start += len(batch)
        size *= 4
    shared.sort(key=lambda text: (-text.strength, text.length))
    start = 0
    while start < len(shared):
        end = start + 1
        while end < len(shared) and (shared[end].strength, shared[end].length) == (shared[start].strength, shared[start].length):
            end += 1
        yield shared[start:end]
        start = end


def merged_spans(instances: list[tuple[int, int]]) -> int:
    """``highlight()``'s spans of ``(start, end)`` phrase instances (token positions, inclusive)."""
    spans, end = 0, -1
    for start, last in sorted(instances):
        if start > end:
            spans += 1
            end = last
        elif last > end:
            end = last
    return spans


def words_strength(phrases: list[list[bytes]], prefix: bytes | None, expansions: dict[bytes, list[bytes]], positions: dict[bytes, list[int]]) -> int:
    """The merged spans of every phrase's instances; 0 when a phrase has none."""
    instances: list[tuple[int, int]] = []
    for number, phrase in enumerate(phrases):
        sets = []
        for offset, term in enumerate(phrase):
            if prefix is not None and number == len(phrases) - 1 and offset == len(phrase) - 1:
                held: set[int] = set()
                for expanded in expansions[prefix]:
                    held.update(positions.get(expanded, ()))
            else:
                held = set(positions.get(term, ()))
            sets.append(held)
        size = len(phrase)
        starts = [start for start in sorted(sets[0]) if all(start + i in sets[i] for i in range(1, size))]
        if not starts:
            return 0
        instances += [(start, start + size - 1) for start in starts]
    return merged_spans(instances)


# -- step 1 -------------------------------------------------------------------------------


def phrase_texts(cur: Any, terms: list[bytes], scope: Scope) -> list[Text]:
    """The texts holding the phrase ``terms``, with their span counts."""
    keys = [term_hash(term) for term in terms]
    distinct = list(dict.fromkeys(keys))
    if len(distinct) == 1 and len(terms) == 1:
        clause, params = scope.texts_clause('t."hash"')
        cur.execute(
            f'SELECT t."hash", t."tf", x."length" FROM "text_postings" t JOIN "search_texts" x ON x."hash" = t."hash" WHERE t."term" = %s{clause}',
            [distinct[0], *params],
        )
        return [Text(*row) for row in cur.fetchall()]
    holders = _holding(cur, [[key] for key in distinct], scope)
    if not holders:
        return []
    positions = _positions(cur, list(holders), dict(zip(keys, terms)))
    found = []
    for value, length in holders.items():
        spans = phrase_spans(terms, positions.get(value, {}))
        if spans:
            found.append(Text(value, spans, length))
    return found


def words_texts(cur: Any, phrases: list[list[bytes]], prefix: bytes | None, expansions: dict[bytes, list[bytes]], exact: set[bytes], scope: Scope) -> list[Text]:
    """The texts holding an instance of every phrase (``prefix``: the last token, standing for
    its ``expansions``), with their merged span counts."""
    keys = {term_hash(term): term for term in exact}
    required = [[term_hash(term)] for term in exact]
    if prefix is not None:
        keys.update((term_hash(term), term) for term in expansions[prefix])
        required.append([term_hash(term) for term in expansions[prefix]])
    required.sort(key=len)
    if prefix is not None and len(prefix) <= PREFIX_BYTES and all(len(phrase) == 1 for phrase in phrases):
        return _short_prefix_texts(cur, prefix, exact, scope)
    if all(len(phrase) == 1 for phrase in phrases):
        # One position holds one term: the merged spans are the positions of the distinct terms.
        clause, params = scope.texts_clause('t."hash"')
        having = " AND ".join('bool_or(t."term" = ANY(%s))' for _ in required)
        cur.execute(
            f'SELECT t."hash", sum(t."tf"), min(x."length") FROM "text_postings" t JOIN "search_texts" x ON x."hash" = t."hash" '
            f'WHERE t."term" = ANY(%s){clause} GROUP BY t."hash" HAVING {having}',
            [list(keys), *params, *required],
        )
        return [Text(value, int(strength), length) for value, strength, length in cur.fetchall()]
    holders = _holding(cur, required, scope)
    if not holders:
        return []
    positions = _positions(cur, list(holders), keys)
    found = []
    for value, length in holders.items():
        strength = words_strength(phrases, prefix, expansions, positions.get(value, {}))
        if strength:
            found.append(Text(value, strength, length))
    return found


def substring_texts(cur: Any, grams: list[int] | None, scope: Scope) -> list[Text]:
    """The substring query's candidate texts, not counted yet: each :class:`Text`'s strength is
    the bound of its occurrences (the fewest occurrences of one of the query's ``grams`` in it;
    ``grams`` ``None``: every text, unbounded)."""
    if grams is None:
        clause, params = scope.texts_clause('x."hash"')
        cur.execute(f'SELECT x."hash", x."length" FROM "search_texts" x WHERE true{clause}', params)
        return [Text(value, UNBOUNDED, length) for value, length in cur.fetchall()]
    clause, params = scope.texts_clause('g."hash"')
    cur.execute(
        'SELECT g."hash", min(g."n"), min(x."length") FROM "text_grams" g JOIN "search_texts" x ON x."hash" = g."hash" '
        f'WHERE g."gram" = ANY(%s){clause} GROUP BY g."hash" HAVING count(*) = %s',
        [grams, *params, len(grams)],
    )
    return [Text(*row) for row in cur.fetchall()]


UNBOUNDED: Final = 2**62
"""The bound of a text no gram narrows."""


def ascii_pattern(query: str) -> str | None:
    """A PostgreSQL regular expression counting an ASCII query with whitespace in the texts'
    ASCII-folded copies (``None`` for any other query): its lowered parts, every character but
    letters and digits escaped, joined by a run of JS whitespace characters.  That is the
    query's pattern (:class:`readmodel.search.substring.Substring`): each ASCII letter's fold
    class is that letter in the folded copy, and a whitespace run is bounded by the parts
    around it, so greedy or not, the non-overlapping matches are the same."""
    if not query.isascii() or " " not in query:
        return None
    run = "[" + JS_WHITESPACE + "]+"
    return run.join("".join(char if char.isalnum() else "\\" + char for char in part.lower()) for part in query.split(" "))


def substring_counter(cur: Any, literal: str | None, count: Any, pattern: str | None = None) -> Any:
    """``counter(texts) → {hash: occurrences}`` for a substring query: ``literal`` (a lowered
    ASCII query without whitespace) counted in SQL in the texts' ASCII-folded copies, where the
    bytes ``replace`` removes are exactly ``str.count`` of it (the folded copy is what
    :class:`readmodel.search.substring.Substring` counts an ASCII literal in); any other query
    by ``count(text)`` on the reading host, in one stored document holding the text (a text no
    document holds any more is left out)."""

    def by_sql(texts: list[Text]) -> dict[int, int]:
        cur.execute(
            'SELECT "hash", (octet_length("folded") - octet_length(replace("folded", %s, \'\'))) / %s FROM "search_texts" '
            'WHERE "hash" = ANY(%s)',
            [literal, len(literal), [text.hash for text in texts]],
        )
        return dict(cur.fetchall())

    def on_host(texts: list[Text]) -> dict[int, int]:
        cur.execute(
            f'SELECT x."hash", d."text" FROM unnest(%s::bigint[]) AS x("hash") CROSS JOIN LATERAL {_TEXT_DOCUMENT} o '
            'JOIN "documents" d ON d."docid" = o."docid"',
            [[text.hash for text in texts]],
        )
        return {value: count(text) for value, text in cur.fetchall()}

    def by_pattern(texts: list[Text]) -> dict[int, int]:
        cur.execute('SELECT "hash", regexp_count("folded", %s) FROM "search_texts" WHERE "hash" = ANY(%s)', [pattern, [text.hash for text in texts]])
        return dict(cur.fetchall())

    return by_sql if literal is not None else by_pattern if pattern is not None else on_host


def _short_prefix_texts(cur: Any, prefix: bytes, exact: set[bytes], scope: Scope) -> list[Text]:
    """:func:`words_texts` of one-token phrases whose prefix token has at most
    :data:`~readmodel.search.serverterms.PREFIX_BYTES` bytes: the prefix's positions are one
    ``text_prefixes`` row per text.  The strength is the distinct terms' positions: the prefix
    row's, plus the exact terms' that do not start with the prefix (the others are in it)."""
    keys = [term_hash(term) for term in exact]
    counted = [term_hash(term) for term in exact if not term.startswith(prefix)]
    clause_t, params_t = scope.texts_clause('t."hash"')
    clause_p, params_p = scope.texts_clause('p."hash"')
    cur.execute(
        'SELECT u."hash", coalesce(sum(u."tf") FILTER (WHERE u."counted"), 0), min(x."length") FROM ('
        f'SELECT t."hash", t."tf", t."term" = ANY(%s) AS "counted" FROM "text_postings" t WHERE t."term" = ANY(%s){clause_t} '
        f'UNION ALL SELECT p."hash", p."tf", true FROM "text_prefixes" p WHERE p."prefix" = %s{clause_p}) u '
        'JOIN "search_texts" x ON x."hash" = u."hash" GROUP BY u."hash" HAVING count(*) = %s',
        [counted, keys, *params_t, prefix, *params_p, len(keys) + 1],
    )
    return [Text(value, int(strength), length) for value, strength, length in cur.fetchall()]


def _holding(cur: Any, required: list[list[int]], scope: Scope) -> dict[int, int]:
    """``hash → length`` of the texts holding one term of each list in ``required``."""
    clause, params = scope.texts_clause('p0."hash"')
    joins = "".join(f' JOIN "text_postings" p{i} ON p{i}."hash" = p0."hash" AND p{i}."term" = ANY(%s)' for i in range(1, len(required)))
    cur.execute(
        f'SELECT x."hash", x."length" FROM "search_texts" x WHERE x."hash" IN (SELECT p0."hash" FROM "text_postings" p0{joins} '
        f'WHERE p0."term" = ANY(%s){clause})',
        [*required[1:], required[0], *params],
    )
    return dict(cur.fetchall())


def _positions(cur: Any, hashes: Iterable[int], keys: dict[int, bytes]) -> dict[int, dict[bytes, list[int]]]:
    """``hash → term → positions`` of ``keys``' terms in the texts ``hashes``."""
    cur.execute('SELECT "hash", "term", "positions" FROM "text_postings" WHERE "hash" = ANY(%s) AND "term" = ANY(%s)', (list(hashes), list(keys)))
    positions: dict[int, dict[bytes, list[int]]] = {}
    for value, key, found in cur.fetchall():
        positions.setdefault(value, {})[keys[key]] = found
    return positions
