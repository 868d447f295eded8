"""The ``words`` and ``substring`` modes on PostgreSQL (semantics: :mod:`readmodel.search.modes`).

As on SQLite (:mod:`readmodel.search.sqlitemodes`), the matching documents
are selected with the filters applied, then ranked in Python by
:class:`readmodel.search.modes.Ranking`; only where they are found differs.

``words``
    The query's phrases are the ones :func:`~readmodel.search.modes.words_expression`
    builds (each token of a bare part, each quoted part; the last one's last
    token a prefix unless the query ends in whitespace or a closing quote),
    each tokenised by :class:`~readmodel.search.tokens.Tokenizer` as FTS5
    tokenises a quoted string.  A prefix token stands for every term of the
    dictionary that starts with its bytes (``terms_prefix``).  A document
    matches when it holds an instance of every phrase; its strength is the
    number of spans ``highlight()`` marks for the whole expression: every
    phrase's instances in position order, an instance starting at or before
    the open span's last token extending it (:func:`readmodel.search.pgtexts.merged_spans`).
``substring``
    The candidates hold every chosen gram of the query in
    ``document_gram_keys`` (GIN, ``@>``), with long documents taken by their
    trigrams (:mod:`readmodel.search.gramsearch`'s choice, as integer keys);
    every candidate text is verified and counted by the compiled pattern, each distinct text
    (by its stored hash) read and counted once.

A text's identity for the boilerplate verdict is its stored hash
(``document_hashes``, :mod:`readmodel.projection.texthash`); a scoped search
(filters, or one session) looks the texts it saw in fewer than
:data:`~readmodel.search.modes.BOILERPLATE_SESSIONS` sessions up in the whole
index by that hash.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from readmodel.projection.grams import LONG_MARK_KEY, gram_key, normalise_query, query_grams, query_trigrams, scheme_fingerprint
from readmodel.search import pgtexts
from readmodel.search.pgtexts import words_strength
from readmodel.search.backend import Row
from readmodel.search.gramsearch import MAX_TRIGRAMS, choose_grams
from readmodel.search.modes import BOILERPLATE_SESSIONS, Match, Ranking, split_parts, words_expression
from readmodel.search.predicates import Where
from readmodel.search.requests import bounded_terms
from readmodel.search.serverterms import PREFIX_KEY_BYTES
from readmodel.search.substring import compiled_substring
from readmodel.search.tokens import term_hash

# The candidate columns the filters name, under their names (as readmodel.search.postgres's).
_INNER = """SELECT s."id" AS session_id, s."sid" AS sid, d."docid" AS docid, d."seq" AS seq, d."type" AS type, d."time" AS time,
       CASE d."surface" WHEN 1 THEN 'current' WHEN 2 THEN 'shadowed' ELSE 'log-only' END AS surface, d."length" AS document_length,
       h."hash" AS text_hash, s."created_at" AS created_at, s."cwd" AS cwd, s."parent_session" AS parent_session, 0 AS live, 1 AS persisted"""
_OUTER = "session_id, sid, docid, seq, type, time, surface, document_length, text_hash"


def phrases_of(query: str, prefix: bool, tokenize: Any) -> tuple[list[list[bytes]], bool, list[bytes]]:
    """``(phrases, last_is_prefix, all tokens)`` of a words query, as its FTS5 expression reads.

    Each phrase is the tokens FTS5 gets from one quoted string of the
    expression (a bare token's text alone, a quoted part's words joined).
    """
    expression, terms = words_expression(query, prefix, tokenize)
    if not expression:
        return [], False, terms
    phrases: list[list[bytes]] = []
    for text, quoted in split_parts(query)[0]:
        words = [word for word in (token.decode("utf-8", "ignore") for token in tokenize(text)) if word]
        if not words:
            continue
        for piece in [" ".join(words)] if quoted else words:
            tokens = tokenize(piece)
            if tokens:
                phrases.append(tokens)
    return phrases, expression.endswith("*"), terms


def query(
    snap: Any, request: Any, sessions: Where | None, events: Where, sid: int | None, offset: int, key: tuple[str, ...], *, live_target: bool = False
) -> list[Row]:
    """A page of a ``words`` or ``substring`` search (``sid``: within that session; ``live_target``:
    within the live session ``request.session_id``; ``key``: its ranking's cache key).

    With live sessions (``snap.live``) the ranking is the per-document one, the live
    matches included (:mod:`readmodel.search.pglive`)."""
    tokenizer = snap.backend.tokenizer()
    if request.match == "words":
        expression, terms = words_expression(request.query, request.prefix, tokenizer.tokens)
        bounded_terms(terms)
        if not expression:
            return []
        marker = None
    else:
        expression, marker = None, compiled_substring(request.query).mark_first
    if snap.backend.texts_first and snap.live is None:
        rows = snap.backend.ranked(key, lambda want: _texts_ranking(snap, request, sessions, events, sid, want), offset, request.limit + 1)
    else:
        rank = lambda want: _ranking(snap, request, sessions, events, sid, live_target)  # noqa: E731
        rows = snap.backend.ranked(key, rank, offset, request.limit + 1)
    literal = request.match == "substring" and compiled_substring(request.query).literal is not None
    return snap.fill(rows, expression, marker, literal=literal, request=request)


def _texts_ranking(snap: Any, request: Any, sessions: Where | None, events: Where, sid: int | None, need: int) -> list[tuple[Any, ...]]:
    """The first ``need`` rows of the ranking, texts first (:mod:`readmodel.search.pgtexts`)."""
    cur = snap.cur
    scope = snap.scope(sessions, events, sid)
    if request.match == "words":
        phrases, last_prefix, _ = phrases_of(request.query, request.prefix, snap.backend.tokenizer().tokens)
        if not phrases:
            return []
        prefix, expansions, exact = _expanded(cur, phrases, last_prefix)
        if prefix is not None and not expansions[prefix]:
            return []
        texts = pgtexts.words_texts(cur, phrases, prefix, expansions, exact, scope)
    else:
        substring = compiled_substring(request.query)
        grams = _current_grams(cur, request.query)
        keys = list(dict.fromkeys(gram_key(gram) for gram in choose_grams(grams))) if grams else None
        texts = pgtexts.substring_texts(cur, keys, scope)
        if keys is not None and _gram_is_query(request.query):
            return pgtexts.ranked(cur, texts, scope, need, judge=True, seq_orders_sessions=True)
        counter = pgtexts.substring_counter(cur, substring.literal, substring.count, pgtexts.ascii_pattern(request.query))
        return pgtexts.ranked(cur, texts, scope, need, judge=True, seq_orders_sessions=True, counter=counter)
    return pgtexts.ranked(cur, texts, scope, need, judge=True, seq_orders_sessions=True)


def _expanded(cur: Any, phrases: list[list[bytes]], last_prefix: bool) -> tuple[bytes | None, dict[bytes, list[bytes]], set[bytes]]:
    """``(prefix token or None, its expansions, the terms read exactly)`` of a words query's phrases."""
    exact = {term for phrase in phrases for term in phrase}
    expansions: dict[bytes, list[bytes]] = {}
    prefix = phrases[-1][-1] if last_prefix else None
    if prefix is not None:
        expansions[prefix] = _prefixed(cur, prefix)
        if sum(phrase.count(prefix) for phrase in phrases) == 1:
            exact.discard(prefix)  # only ever read as a prefix
    return prefix, expansions, exact


def _ranking(snap: Any, request: Any, sessions: Where | None, events: Where, sid: int | None, live_target: bool = False) -> list[tuple[Any, ...]]:
    """The whole ranking, as ``(strength, candidate columns…)`` rows (:func:`readmodel.search.postgres.to_row`'s shape);
    with live sessions their matches are ranked with the stored ones (``live_target``: only the live session's)."""
    cur = snap.cur
    within = sid is not None or live_target
    # Scoped (filters, or one session): some copies of a matching text may lie outside the matches.
    scoped = within or any(where is not None and where.fragments for where in (sessions, events))
    ranking = Ranking(keep_all=within)
    matches: list[Match] = []
    if not live_target:
        conditions, params = snap.filters(sessions, events)
        scope, scope_params = "", []
        if sid is not None:
            scope = ' AND d."docid" BETWEEN %s AND %s'
            scope_params = [sid << 32, (sid << 32) | 0xFFFFFFFF]
        where = (scope, scope_params, conditions, params)
        if request.match == "words":
            phrases, last_prefix, _ = phrases_of(request.query, request.prefix, snap.backend.tokenizer().tokens)
            matches = _words(cur, phrases, last_prefix, where) if phrases else []
        else:
            matches = _substring(cur, request.query, compiled_substring(request.query), where)
    if snap.live is not None and sid is None:
        matches += snap.live.mode_matches(request, sessions, events, request.session_id if live_target else None)
    for match in matches:
        ranking.add(match)
    if scoped:
        _add_holders(cur, ranking, snap.live)
    ranked = ranking.sessions() if not within else ranking.events()
    # The shape of readmodel.search.postgres's candidates: (strength, id, sid, created, cwd, parent, live, persisted, docid, …).
    return [(m.strength, m.session_id, m.header_json, None, None, None, m.live, m.persisted, m.docid, m.seq, m.type, m.time, m.surface, m.length) for m in ranked]


def _match(row: Sequence[Any], strength: int) -> Match:
    session_id, sid, docid, seq, etype, time, surface, length, text_hash = row[:9]
    digest = b"h" + int(text_hash).to_bytes(8, "little", signed=True) if text_hash is not None else b"doc:" + str(docid).encode()
    return Match(session_id, sid, 0, 1, docid, seq, etype, time, surface, length, strength, digest)


def _select(cur: Any, source: str, source_params: list[Any], where: tuple[Any, ...], counted: bool = False) -> list[tuple[Any, ...]]:
    """The candidate rows of the documents ``source`` (a relation ``c`` of docids) names, filtered;
    with ``counted`` each row ends with ``c.strength``."""
    scope, scope_params, conditions, params = where
    extra = ', c."strength" AS strength' if counted else ""
    sql = (
        f'SELECT {_OUTER}{", strength" if counted else ""} FROM ({_INNER}{extra} FROM {source} JOIN "documents" d ON d."docid" = c."docid" '
        f'JOIN "sessions" s ON s."sid" = d."sid" LEFT JOIN "document_hashes" h ON h."docid" = d."docid" '
        f"WHERE s.\"status\" = 'ok'{scope}) f" + (f" WHERE {conditions}" if conditions else "")
    )
    cur.execute(sql, [*source_params, *scope_params, *params])
    return cur.fetchall()


def _words(cur: Any, phrases: list[list[bytes]], last_prefix: bool, where: tuple[Any, ...]) -> list[Match]:
    """Every document holding an instance of every phrase, with its merged span count."""
    prefix, expansions, exact = _expanded(cur, phrases, last_prefix)
    if prefix is not None and not expansions[prefix]:
        return []
    keys = {term_hash(term): term for term in exact}
    for term in expansions.get(prefix, []) if prefix is not None else []:
        keys[term_hash(term)] = term
    # Documents holding every exact term (and one of the prefix's terms), joined on docid.
    required = [[term_hash(term)] for term in exact]
    if prefix is not None:
        required.append([term_hash(term) for term in expansions[prefix]])
    required.sort(key=len)
    if all(len(phrase) == 1 for phrase in phrases):
        # One-token phrases: an instance is one position, and a position holds one term,
        # so the merged spans are the positions of the distinct terms: the sum of their tf.
        having = " AND ".join('bool_or("term" = ANY(%s))' for _ in required)
        source = f'(SELECT "docid", sum("tf") AS "strength" FROM "postings" WHERE "term" = ANY(%s) GROUP BY "docid" HAVING {having}) c'
        counted = _select(cur, source, [list(keys), *required], where, counted=True)
        return [_match(row, int(row[9])) for row in counted]
    source = "(SELECT DISTINCT p0.\"docid\" FROM \"postings\" p0" + "".join(
        f' JOIN "postings" p{i} ON p{i}."docid" = p0."docid" AND p{i}."term" = ANY(%s)' for i in range(1, len(required))
    ) + ' WHERE p0."term" = ANY(%s)) c'
    candidates = _select(cur, source, [*required[1:], required[0]], where)
    if not candidates:
        return []
    positions: dict[int, dict[bytes, list[int]]] = {}
    cur.execute('SELECT "docid", "term", "positions" FROM "postings" WHERE "docid" = ANY(%s) AND "term" = ANY(%s)', ([row[2] for row in candidates], list(keys)))
    for docid, key, found in cur.fetchall():
        positions.setdefault(docid, {})[keys[key]] = found
    found_matches = []
    for row in candidates:
        strength = words_strength(phrases, prefix, expansions, positions.get(row[2], {}))
        if strength:
            found_matches.append(_match(row, strength))
    return found_matches


def _prefixed(cur: Any, prefix: bytes) -> list[bytes]:
    """The dictionary's terms starting with ``prefix`` (through ``terms_prefix``)."""
    key = prefix[:PREFIX_KEY_BYTES]
    upper = _successor(key)
    sql = f'SELECT "text" FROM "terms" WHERE substr("text", 1, {PREFIX_KEY_BYTES}) >= %s'
    args: list[Any] = [key]
    if upper is not None:
        sql += f' AND substr("text", 1, {PREFIX_KEY_BYTES}) < %s'
        args.append(upper)
    cur.execute(sql, args)
    return [bytes(text) for (text,) in cur.fetchall() if bytes(text).startswith(prefix)]


def _successor(key: bytes) -> bytes | None:
    """The smallest byte string above every string that starts with ``key`` (``None``: none)."""
    stripped = key.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _substring(cur: Any, text: str, substring: Any, where: tuple[Any, ...]) -> list[Match]:
    """Every document the substring pattern finds, among the gram index's candidates."""
    grams = _gram_condition(cur, text, 'g."grams"')
    source = f'(SELECT g."docid" FROM "document_gram_keys" g WHERE {grams[0]}) c' if grams is not None else '"documents" c'
    rows = _select(cur, source, grams[1] if grams is not None else [], where)
    # Each distinct text is read and counted once (boilerplate repeats across sessions), by its
    # stored hash as the SQLite ranking does (readmodel.search.sqlranking).
    cur.execute(
        'SELECT DISTINCT ON (h."hash") h."hash", d."text" FROM "document_hashes" h JOIN "documents" d ON d."docid" = h."docid" '
        'WHERE h."docid" = ANY(%s) ORDER BY h."hash"',
        ([row[2] for row in rows if row[8] is not None],),
    )
    counts = {text_hash: substring.count(text) for text_hash, text in cur.fetchall()}
    unhashed = [row[2] for row in rows if row[8] is None]
    if unhashed:
        cur.execute('SELECT "docid", "text" FROM "documents" WHERE "docid" = ANY(%s)', (unhashed,))
        by_docid = {docid: substring.count(text) for docid, text in cur.fetchall()}
    found = []
    for row in rows:
        strength = counts[row[8]] if row[8] is not None else by_docid[row[2]]
        if strength:
            found.append(_match(row, strength))
    return found


def _gram_is_query(query: str) -> bool:
    """Whether the query is its one gram and never overlaps itself (one non-ASCII code point, or
    two different code points without whitespace): then a text's count of that gram
    (``text_grams.n``, in the text folded as the pattern folds) is exactly its occurrences."""
    folded = normalise_query(query)
    return " " not in folded and ((len(folded) == 1 and folded > "\x7f") or (len(folded) == 2 and folded[0] != folded[1]))


def _current_grams(cur: Any, text: str) -> list[str]:
    """The substring query's grams (:func:`query_grams`) when the index's grams are of the running
    scheme (else none: every document or text is a candidate)."""
    cur.execute('SELECT "grams" FROM "index_meta"')
    row = cur.fetchone()
    return query_grams(text) if row is not None and row[0] == scheme_fingerprint() else []


def _gram_condition(cur: Any, text: str, column: str) -> tuple[str, list[Any]] | None:
    """The gram index's condition over ``column`` (a ``bigint[]`` of gram keys) for a substring
    query, with its arguments; ``None``: every document is a candidate (no index for the running
    scheme, or no gram to choose)."""
    grams = _current_grams(cur, text)
    if not grams:
        return None
    bigrams = [gram_key(gram) for gram in choose_grams(grams)]
    trigrams = [gram_key(gram) for gram in choose_grams(query_trigrams(text), MAX_TRIGRAMS)]
    if trigrams:
        return f"(({column} @> %s::bigint[] AND NOT {column} @> %s::bigint[]) OR {column} @> %s::bigint[])", [bigrams, [LONG_MARK_KEY], trigrams]
    return f"{column} @> %s::bigint[]", [bigrams]


def _add_holders(cur: Any, ranking: Ranking, live: Any = None) -> None:
    """Sessions outside a scoped search that hold the texts it saw in fewer than
    :data:`BOILERPLATE_SESSIONS` sessions (by text hash).  With live sessions (``live``, a
    :class:`readmodel.search.pglive.LiveView`) the search corpus is the live sessions and the
    stored ones they do not overlay (as on SQLite): both are looked up."""
    rare = [digest for digest in ranking.rare() if digest.startswith(b"h")]
    if not rare:
        return
    hashes = [int.from_bytes(digest[1:], "little", signed=True) for digest in rare]
    overlaid = live.overlaid if live is not None else []
    cur.execute(
        'SELECT w."hash", (SELECT array_agg(x."id") FROM (SELECT DISTINCT s."id" FROM "document_hashes" o JOIN "sessions" s '
        'ON s."sid" = o."docid" >> 32 WHERE o."hash" = w."hash" AND s."status" = \'ok\' AND s."id" <> ALL(%s) LIMIT %s) x) '
        'FROM unnest(%s::bigint[]) w("hash")',
        (overlaid, BOILERPLATE_SESSIONS, hashes),
    )
    for text_hash, ids in cur.fetchall():
        ranking.add_holders(b"h" + int(text_hash).to_bytes(8, "little", signed=True), ids or [])
    if live is not None:
        for value in hashes:
            ranking.add_holders(b"h" + int(value).to_bytes(8, "little", signed=True), live.hash_holders(value))
