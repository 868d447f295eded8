"""The ``words`` and ``substring`` search modes: their matching and their ranking (a sessionq extension).

``phrase`` (the default) is the reference's search and lives in
:mod:`readmodel.search.sqlite`; nothing here touches it.

Matching
--------

``words``
    The query is split into bare parts and ``"quoted parts"`` (an unclosed
    quote runs to the end).  Every unicode61 token of a bare part (tokenised
    exactly as the phrase mode tokenises) must occur in the document, in any
    order and at any distance; every quoted part must occur as a phrase.  The
    last token (or quoted phrase) also matches as a prefix unless the raw
    query ends in whitespace or with a closing quote (search as you type).
    The FTS5 expression is built only from quoted tokens
    (:func:`words_expression`), so FTS5 syntax in a query is always data.
``substring``
    The documents ``filterEvents`` with a ``text`` clause of the query selects
    (:mod:`readmodel.search.substring`).

Ranking (deterministic)
-----------------------

A document's *strength* is its number of highlighted spans: FTS5
``highlight()``'s spans of the words expression, or the non-overlapping
occurrences of the substring.  A document is *boilerplate* when its exact text
is held by at least :data:`BOILERPLATE_SESSIONS` distinct sessions of the
search corpus (harness system and runtime-context messages every session
carries); with a live overlay the search corpus is the live sessions and the stored
sessions they do not overlay, on both backends.  Documents are ordered by: specific (not boilerplate) first, then
strength (more first), then shorter, then newer time, then higher seq.
Cross-session search keeps each session's strongest document by that order and
orders sessions by it, ties by session id (UTF-8 byte order).  So a session's
best match prefers its own text, and sessions whose only matches are shared
boilerplate come after all others; nothing is dropped: the sessions returned
are exactly the sessions that match.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

BOILERPLATE_SESSIONS: Final = 3
"""A text held verbatim by at least this many distinct sessions is boilerplate.

Two sessions may share a pasted prompt or a fork's copied history; three or
more sharing a document word for word is what harness-injected text looks
like (on the shared corpus the runtime-context policy message is in most
sessions)."""

_NO_TIME: Final = -(2**63)


class RankedText(Protocol):
    """A distinct matching text in a texts-first ranking (both backends)."""

    strength: int
    length: int
    shared: bool | None  # boilerplate verdict; None until judged


_T = TypeVar("_T", bound=RankedText)


def text_classes(texts: Sequence[_T], judge: Callable[[Sequence[_T]], None] | None, ahead: int) -> Iterator[list[_T]]:
    """Step 2 of the texts-first ranking: ``texts`` (in ranking order) in classes of equal
    ``(strength, length)``, in ranking order.

    With ``judge`` (it settles ``shared`` of the texts it is given, ``ahead`` texts at a time,
    lazily, the next ones in ranking order), each class's specific texts come in its place and
    its boilerplate ones after every class; without it each class comes whole."""
    deferred: list[list[_T]] = []
    start = judged = 0
    while start < len(texts):
        end = start + 1
        while end < len(texts) and (texts[end].strength, texts[end].length) == (texts[start].strength, texts[start].length):
            end += 1
        if judge is None:
            yield list(texts[start:end])
            start = end
            continue
        if judged < end:
            judged = max(end, judged + ahead)
            judge(texts[start:judged])
        specific = [text for text in texts[start:end] if not text.shared]
        shared = [text for text in texts[start:end] if text.shared]
        if specific:
            yield specific
        if shared:
            deferred.append(shared)
        start = end
    yield from deferred


def people_match(query: str) -> tuple[str, str]:
    """``(mode, query)`` for a query a person typed (the CLI and ``browse``).

    People get ``words`` (any order, the last word as a prefix); a query wholly
    in double quotes is the reference's exact ``phrase`` of what is inside them.
    Programs (RPC, HTTP, Python) keep ``phrase`` as the default.
    """
    stripped = query.strip()
    inner = stripped[1:-1]
    if len(stripped) >= 2 and stripped[0] == stripped[-1] == '"' and '"' not in inner and inner.strip():
        return "phrase", inner
    return "words", query


def split_parts(query: str) -> tuple[list[tuple[str, bool]], bool]:
    """``([(text, quoted), ...], closed)``: the query's bare and quoted parts, and
    whether it ends with a closing quote.

    A double quote opens a quoted part and the next one closes it; an unclosed
    quote runs to the end of the query.  Empty parts are dropped.
    """
    pieces = query.split('"')
    parts = [(piece, index % 2 == 1) for index, piece in enumerate(pieces) if piece.strip()]
    closed = len(pieces) > 1 and len(pieces) % 2 == 1 and pieces[-1].strip() == ""
    return parts, closed


def words_expression(query: str, prefix: bool, tokenize: Callable[[str], list[bytes]]) -> tuple[str, list[bytes]]:
    """The FTS5 expression of a ``words`` query, and all its tokens.

    ``tokenize`` gives a text's unicode61 tokens as FTS5 stores them.  Each
    token of a bare part is its own quoted phrase; a quoted part is one quoted
    phrase of its tokens; the last phrase gets ``*`` when ``prefix`` holds and
    the query does not end with a closing quote.  Returns ``("", [])`` when the
    query has no token (it matches nothing).
    """
    parts, closed = split_parts(query)
    phrases: list[str] = []
    terms: list[bytes] = []
    for text, quoted in parts:
        tokens = tokenize(text)
        terms += tokens
        words = [token.decode("utf-8", "ignore") for token in tokens]
        words = [word for word in words if word]
        if not words:
            continue
        if quoted:
            phrases.append(_quoted(" ".join(words)))
        else:
            phrases += [_quoted(word) for word in words]
    if not phrases:
        return "", terms
    if prefix and not closed:
        phrases[-1] += "*"
    return " ".join(phrases), terms


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


@dataclass(slots=True)
class Match:
    """One matching document while ranking (identity columns of :class:`readmodel.search.backend.Row`)."""

    session_id: str
    header_json: Any
    live: int
    persisted: int
    docid: int
    seq: int
    type: str
    time: Any
    surface: str
    length: int
    strength: int
    digest: bytes | None
    """Identifies the text (``None`` until settled: see :mod:`readmodel.search.sqlitemodes`)."""
    base: tuple[Any, ...] = ()
    """The ranking key without the boilerplate flag (strength, shorter, newer, higher seq)."""

    def __post_init__(self) -> None:
        self.base = (self.strength, -self.length, self.time if type(self.time) in (int, float) else _NO_TIME, self.seq)

    def row(self) -> tuple[Any, ...]:
        return (self.session_id, self.header_json, self.live, self.persisted, self.docid, self.seq, self.type, self.time, self.surface)

    def key(self, boilerplate: set[bytes]) -> tuple[Any, ...]:
        """The ranking key, larger first (see the module docstring)."""
        return (0 if self.digest in boilerplate else 1, *self.base)


@dataclass
class Ranking:
    """Collects matching documents, then orders them.

    Cross-session (``keep_all`` false), of several documents with the same
    text in one session only the strongest is kept: they share strength and
    length, so it is the newest, and no other can be the session's best; so
    memory is bounded by the distinct matching texts per session.  A
    one-session search keeps every match (each is a hit).
    """

    keep_all: bool = False
    best: dict[tuple[str, bytes], Match] = field(default_factory=dict)
    every: list[Match] = field(default_factory=list)
    holders: dict[bytes, set[str]] = field(default_factory=dict)

    def add(self, match: Match) -> None:
        if self.keep_all:
            self.every.append(match)
        slot = (match.session_id, match.digest)
        held = self.best.get(slot)
        if held is None or match.base > held.base:
            self.best[slot] = match
        sessions = self.holders.setdefault(match.digest, set())
        if len(sessions) < BOILERPLATE_SESSIONS:
            sessions.add(match.session_id)

    def rare(self) -> dict[bytes, Match]:
        """Each text held by fewer than :data:`BOILERPLATE_SESSIONS` sessions among the matches,
        with one match holding it (to look its text up)."""
        found: dict[bytes, Match] = {}
        for (_, digest), match in self.best.items():
            if digest not in found and len(self.holders[digest]) < BOILERPLATE_SESSIONS:
                found[digest] = match
        return found

    def add_holders(self, digest: bytes, sessions: Iterable[str]) -> None:
        """Sessions outside the search's scope that hold the text ``digest`` (a scoped search's lookup)."""
        held = self.holders[digest]
        for session_id in sessions:
            if len(held) >= BOILERPLATE_SESSIONS:
                break
            held.add(session_id)

    def boilerplate(self) -> set[bytes]:
        return {digest for digest, sessions in self.holders.items() if len(sessions) >= BOILERPLATE_SESSIONS}

    def sessions(self) -> list[Match]:
        """Each session's best document, sessions in ranking order."""
        boilerplate = self.boilerplate()
        leaders: dict[str, tuple[tuple[Any, ...], Match]] = {}
        for match in self.best.values():
            key = match.key(boilerplate)
            held = leaders.get(match.session_id)
            if held is None or key > held[0]:
                leaders[match.session_id] = (key, match)
        # Session ids ascending, then (a stable sort) keys descending: ties keep id order.
        by_id = sorted(leaders.values(), key=lambda item: item[1].session_id)
        return [match for _, match in sorted(by_id, key=lambda item: item[0], reverse=True)]

    def events(self) -> list[Match]:
        """Every kept document of a one-session search, in ranking order."""
        boilerplate = self.boilerplate()
        return sorted(self.every, key=lambda match: match.key(boilerplate), reverse=True)
