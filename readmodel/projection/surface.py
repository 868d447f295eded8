"""The surface fold: which events are on the model-visible surface.

A session log is append-only; the *surface* is the ordered list of event seqs
whose messages the model currently sees (format-spec.md §6, query-spec.md
Appendix A and §4.4).  Three event types can join it (``user/message``,
``assistant/message``, ``tool/result``), either by appending to the end or by
*replacing* a contiguous range of current nodes, in which case the new node
takes the position of that range and the range's nodes become *shadowed*.

Every event is classified:

* ``current``  — its seq is on the final surface;
* ``shadowed`` — a replacement removed it (even if it was itself a replacement);
* ``log-only`` — anything else (in a valid log: exactly the non-surface types).

The fold validates the whole surface contract, in the reference's order, and
raises :class:`SurfaceFoldError` at the first violation; the query side turns
that into ``SESSION_QUERY_INVALID_SURFACE`` (:func:`invalid_surface_error`).

Resumability
------------
:class:`SurfaceFold` consumes events one by one and can be serialised
(:meth:`SurfaceFold.to_bytes`) and restored (:meth:`SurfaceFold.from_bytes`) at
any point; restoring the state saved after event N and feeding N+1..M is
indistinguishable from folding 0..M in one go.  Each step reports which earlier
events changed classification (a replacement turns its range from current to
shadowed; nothing else ever changes an earlier event's surface), so an indexer
only rewrites those rows.

What the state keeps, and why
-----------------------------
* ``nodes``: the current surface, in order, plus a seq → position index.
  Appending is O(1).  A replacement of k nodes costs O(k) to collect them plus
  O(t) to re-index the t nodes after the range (the list splice itself is a
  C-level memmove).  Compactions shadow old history and keep a short recent
  tail, and a tool-result prune replaces a single node in place (O(1)), so this
  stays linear overall; a pathological log replacing long ranges near the front
  of a long surface degrades to O(surface length) per replacement, which is
  accepted because such replacements are rare (one per compaction).
* ``tool_results``: for every *current* ``tool/result`` node, a 32-byte BLAKE2b
  digest of a canonical encoding of its ``data`` with the result content blanked
  (see :func:`tool_result_fingerprint`).  The tool-result rewrite rule (§6.4)
  compares a replacement with the node it shadows; only a current
  ``tool/result`` can ever be that node, so nothing is kept for other events,
  and the large inner content never enters the state.  The digest is computed
  when first needed (a replacement targeting the node, :meth:`SurfaceFold.state`,
  :meth:`SurfaceFold.to_bytes`), from the blanked data taken at append time;
  at most ``_PENDING_DIGESTS_MAX`` wait at once, so most appended tool results
  of a read are never hashed.
* optional history (``track_history=True``, the default): one byte per event
  (its classification) and the list of replacements, so a resumed fold can
  still answer :meth:`SurfaceFold.result` for the whole log.  An indexer that
  stores classifications itself folds with ``track_history=False`` and keeps
  the state proportional to the current surface only.
* a fold that failed stays failed (its error is part of the state): the log is
  append-only, so no later event can make an invalid prefix valid again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Literal

import msgspec

from readmodel.core.errors import SessionQueryError
from readmodel.core.jsvalues import MAX_SAFE_INTEGER, is_non_negative_safe_integer, is_number
from readmodel.core.vocabulary import Event, Surface
from readmodel.core.intruns import int_run
from readmodel.projection.toolresults import (
    UNBLANKABLE,
    UNDEFINED,
    PendingDigest,
    defer_fingerprint,
    tool_result_fingerprint,
)

SURFACE_EVENT_TYPES: Final[frozenset[str]] = frozenset(("user/message", "assistant/message", "tool/result"))
"""The event types that can join the model-visible surface."""

CURRENT: Final[Surface] = "current"
SHADOWED: Final[Surface] = "shadowed"
LOG_ONLY: Final[Surface] = "log-only"

# One byte per event in the history; the order of this tuple is the encoding.
_SURFACE_CODES: Final[tuple[Surface, Surface, Surface]] = (LOG_ONLY, CURRENT, SHADOWED)
_CODE_LOG_ONLY: Final = 0
_CODE_CURRENT: Final = 1
_CODE_SHADOWED: Final = 2
_INT_ONLY: Final = frozenset({int})

_STATE_FORMAT: Final = 1
"""Version of :meth:`SurfaceFold.to_bytes`; bump when the encoding changes."""

"""Fingerprint of a tool/result whose data cannot even be blanked (the
reference would fail reading ``data.message.content[0]``); never a digest."""


class SurfaceFoldError(ValueError):
    """A log breaks the surface contract.

    ``seq`` is the log index of the offending event (the fold rejects the first
    violation and the log as a whole).
    """

    def __init__(self, message: str, seq: int) -> None:
        super().__init__(message)
        self.message = message
        self.seq = seq


def invalid_surface_error(error: SurfaceFoldError) -> SessionQueryError:
    """The coded query error for a fold failure (query-spec.md §2.4)."""
    return SessionQueryError(
        "SESSION_QUERY_INVALID_SURFACE", f"invalid session surface: {error.message}", error
    )


class SurfaceReplacement(msgspec.Struct, frozen=True, array_like=True):
    """One replacement observed by the fold.

    ``start``/``end`` are the declared seqs; ``shadowed_seqs`` are the nodes it
    actually removed, in surface order (not the seq range between the bounds).
    """

    seq: int
    start: int
    end: int
    shadowed_seqs: tuple[int, ...]


class SurfaceDelta(msgspec.Struct, frozen=True):
    """What one batch of events did (:meth:`SurfaceFold.extend`).

    * ``first_seq``: seq of the batch's first event;
    * ``surfaces``: classification of each batch event as of the end of the
      batch (an event appended and shadowed inside the batch is ``shadowed``);
    * ``shadowed_earlier``: seqs before ``first_seq`` that went from current to
      shadowed, in the order the batch shadowed them — the only earlier rows
      whose classification changed;
    * ``replacements``: the batch's replacements, in log order.
    """

    first_seq: int
    surfaces: list[Surface]
    shadowed_earlier: list[int]
    replacements: list[SurfaceReplacement]


class SurfaceFoldResult(msgspec.Struct, frozen=True):
    """The complete fold of a log (reference ``foldSurface`` plus classifications).

    ``nodes`` is the final surface in model-history order; ``surfaces[seq]`` is
    the classification of every event; ``replacements`` in log order.
    """

    nodes: list[int]
    replacements: list[SurfaceReplacement]
    surfaces: list[Surface]

    def classify(self, seq: int) -> Surface:
        """Classification of event ``seq`` (IndexError when out of range)."""
        return self.surfaces[seq]

    def replaced_by(self) -> dict[int, int]:
        """Shadowed seq → seq of the replacement that removed it (at most one)."""
        return {shadowed: r.seq for r in self.replacements for shadowed in r.shadowed_seqs}

    def replaced_event_seqs(self) -> dict[int, tuple[int, ...]]:
        """Replacement seq → the nodes it removed, in surface order."""
        return {r.seq: r.shadowed_seqs for r in self.replacements}


class _History(msgspec.Struct, array_like=True):
    surfaces: bytes
    replacements: list[SurfaceReplacement]


class _Snapshot(msgspec.Struct, array_like=True):
    format: int
    next_seq: int
    generation: int
    nodes: list[int]
    tool_results: dict[int, bytes]
    history: _History | None
    error: tuple[str, int] | None


# ---------------------------------------------------------------------------
# Per-event validation (pure functions; the fold only commits what they accept)
# ---------------------------------------------------------------------------

def _describe(value: Any) -> str:
    """Short JSON-ish rendering of an arbitrary value for error messages."""
    try:
        text = msgspec.json.encode(value).decode("utf-8", "replace")
    except (TypeError, ValueError, OverflowError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_seq(event: Any, expected: int) -> None:
    """§6.1 step 1: the event's seq is its 0-based position (JS ``===``)."""
    seq = event.get("seq") if type(event) is dict else None
    if not (is_number(seq) and seq == expected):
        raise SurfaceFoldError(
            f"event at log position {expected} carries seq {_describe(seq)}; "
            f"seqs must count up from 0 without gaps",
            expected,
        )


def _surface_op(event: Event, seq: int) -> str | dict[str, Any] | None:
    """§6.1 steps 2-6: the event's validated surface operation.

    Returns ``None`` for a log-only event, ``"append"``, or the replace object.
    """
    kind = event.get("type")
    if not (type(kind) is str and kind in SURFACE_EVENT_TYPES):
        for key in ("surfaceOp", "sourceEventSeqs"):
            if key in event:  # presence counts, even with a null value
                raise SurfaceFoldError(
                    f"{_describe(kind)} event at seq {seq} is not a surface type but carries {key}", seq
                )
        return None
    if "surfaceOp" not in event:
        raise SurfaceFoldError(f"{kind} event at seq {seq} has no surfaceOp; surface types need one", seq)
    op = event["surfaceOp"]
    if type(op) is str and op == "append":
        return op
    if type(op) is not dict:
        raise SurfaceFoldError(f"{kind} event at seq {seq} has an unusable surfaceOp {_describe(op)}", seq)
    if not _is_replace_op(op):
        raise SurfaceFoldError(
            f"{kind} event at seq {seq} has a malformed replace surfaceOp {_describe(op)}; "
            f"expected exactly {{op: \"replace\", start, end}} with non-negative integer seqs",
            seq,
        )
    return op


def _is_replace_op(op: dict[str, Any]) -> bool:
    """Exactly ``{op: "replace", start, end}`` with non-negative safe-integer bounds."""
    return (
        len(op) == 3
        and "start" in op
        and "end" in op
        and type(op.get("op")) is str
        and op["op"] == "replace"
        and is_non_negative_safe_integer(op["start"])
        and is_non_negative_safe_integer(op["end"])
    )


def _check_provenance(event: Event, seq: int, shadowed: Sequence[int]) -> None:
    """§6.3: ``sourceEventSeqs`` shape, then coverage of every shadowed node.

    Order matches the reference: array, non-empty (unless assistant), each
    element a non-negative safe integer (first bad one reported), duplicates,
    then the first element that is not earlier than ``seq``, then coverage.
    """
    sources: set[int | float] = set()
    if "sourceEventSeqs" in event:
        raw = event["sourceEventSeqs"]
        if not shadowed and int_run is not None:
            # The common case in one C call: earlier seqs first, first + 1, … pass every check.
            run = int_run(raw)
            if run is not None and run[0] >= 0 and run[0] + run[1] - 1 < seq and run[0] + run[1] - 1 <= MAX_SAFE_INTEGER:
                return
        if type(raw) is not list:
            raise SurfaceFoldError(f"sourceEventSeqs of the event at seq {seq} is not an array", seq)
        if not raw and event.get("type") != "assistant/message":
            raise SurfaceFoldError(
                f"sourceEventSeqs of the event at seq {seq} is empty; only assistant/message may cite nothing",
                seq,
            )
        not_earlier = _collect_sources(raw, seq, sources)
        if len(sources) != len(raw):
            raise SurfaceFoldError(f"sourceEventSeqs of the event at seq {seq} repeats a seq", seq)
        if not_earlier is not None:
            raise SurfaceFoldError(
                f"sourceEventSeqs of the event at seq {seq} cites {_describe(not_earlier)}, "
                f"which is not an earlier event",
                seq,
            )
    missing = [node for node in shadowed if node not in sources] if shadowed else None
    if missing:
        listed = ", ".join(str(node) for node in missing)
        raise SurfaceFoldError(
            f"replacement at seq {seq} shadows nodes its sourceEventSeqs do not cite: {listed}", seq
        )


def _collect_sources(raw: list[Any], seq: int, sources: set[int | float]) -> int | float | None:
    """Type-check every element into ``sources``; return the first not-earlier one."""
    # Common case, in C-level passes: every element an exact int in the safe range.
    # (sorted() of an all-int list is cheaper than min() plus max().)
    if raw and set(map(type, raw)) == _INT_ONLY:
        ordered = sorted(raw)
        if ordered[0] >= 0 and ordered[-1] <= MAX_SAFE_INTEGER:
            sources.update(raw)
            return None if ordered[-1] < seq else next(source for source in raw if source >= seq)
    not_earlier: int | float | None = None
    for source in raw:
        if not is_non_negative_safe_integer(source):
            raise SurfaceFoldError(
                f"sourceEventSeqs of the event at seq {seq} holds {_describe(source)}, "
                f"not a non-negative integer seq",
                seq,
            )
        sources.add(source)
        if not_earlier is None and source >= seq:
            not_earlier = source
    return not_earlier


# ---------------------------------------------------------------------------
# Tool-result rewrite rule (§6.4): the check (fingerprints: projection.toolresults)
# ---------------------------------------------------------------------------

# Pending digests kept before all of them are computed (bounds the fold's memory).
_PENDING_DIGESTS_MAX: Final = 1024


def _check_tool_result_rewrite(
    event: Event, seq: int, shadowed: Sequence[int], fingerprints: dict[int, bytes]
) -> bytes | None:
    """§6.4 for a replacing event; returns its fingerprint when it is a tool/result."""
    if event.get("type") != "tool/result":
        return None
    if len(shadowed) != 1:
        raise SurfaceFoldError(
            f"tool/result replacement at seq {seq} shadows {len(shadowed)} nodes; it must rewrite exactly one",
            seq,
        )
    original = fingerprints.get(shadowed[0])
    if original is None:
        raise SurfaceFoldError(
            f"tool/result replacement at seq {seq} targets node {shadowed[0]}, which is not a tool/result", seq
        )
    replacement = tool_result_fingerprint(event.get("data", UNDEFINED))
    if original == UNBLANKABLE or replacement == UNBLANKABLE:
        raise SurfaceFoldError(
            f"tool/result replacement at seq {seq} cannot be compared: a tool result lacks message.content",
            seq,
        )
    if original != replacement:
        raise SurfaceFoldError(
            f"tool/result replacement at seq {seq} changes more than the result content of node {shadowed[0]}",
            seq,
        )
    return replacement


# ---------------------------------------------------------------------------
# The resumable fold
# ---------------------------------------------------------------------------

SurfaceBase = Callable[[], tuple[list[int], dict[int, bytes]]]
"""Loads a deferred surface: ``(current nodes in order, {tool-result seq: digest})``."""


class SurfaceFold:
    """Incremental, serialisable surface fold.

    Contract:

    * events are fed in log order (``apply``/``extend``); ``next_seq`` is the
      seq the next event must carry;
    * an event is fully validated before any state changes; the first invalid
      event raises :class:`SurfaceFoldError`, leaves the state as it was after
      the previous event, and makes the fold *failed*: every later
      ``apply``/``extend``/``result`` re-raises that error;
    * ``to_bytes``/``from_bytes`` round-trip the complete state, including the
      failure, so resuming is exact.
    """

    __slots__ = ("_next_seq", "_generation", "_nodes", "_positions", "_tool_results", "_pending", "_surfaces",
                 "_replacements", "_error", "_base", "_remember_digests")

    def __init__(self, *, track_history: bool = True, remember_digests: bool = False) -> None:
        self._next_seq = 0
        # Whether a deferred tool-result digest is remembered for the same event's stored
        # digest (toolresults.defer_fingerprint): only where a projector in this process asks.
        self._remember_digests = remember_digests
        self._generation = 0
        self._nodes: list[int] = []
        # seq -> position in _nodes; built lazily after a restore, because a
        # resumed fold usually only appends and the index costs O(surface).
        self._positions: dict[int, int] | None = {}
        # Digest per current tool/result; an entry may be a PendingDigest
        # (listed in _pending) until something needs its bytes.
        self._tool_results: dict[int, bytes | PendingDigest] = {}
        self._pending: list[int] = []
        self._surfaces: bytearray | None = bytearray() if track_history else None
        self._replacements: list[SurfaceReplacement] | None = [] if track_history else None
        self._error: SurfaceFoldError | None = None
        # A deferred base (see :meth:`resumed`): the surface before this fold's
        # own events, loaded only when something needs it.
        self._base: SurfaceBase | None = None

    @classmethod
    def resumed(cls, next_seq: int, generation: int, base: SurfaceBase, *, remember_digests: bool = False) -> SurfaceFold:
        """A fold continuing after ``next_seq`` events whose surface lives elsewhere.

        ``base()`` returns the surface at that point — current nodes in
        model-history order and the digests of current ``tool/result`` nodes —
        and is called at most once, only when an event needs the surface (a
        replacement) or a caller asks for it.  Appends and log-only events never
        do, so resuming a long log costs nothing proportional to its surface.
        The fold does not track history.
        """
        fold = cls(track_history=False, remember_digests=remember_digests)
        fold._next_seq = next_seq
        fold._generation = generation
        fold._positions = None
        fold._base = base
        return fold

    def _materialize(self) -> None:
        """Prepend the deferred base to the nodes appended since the resume."""
        if self._base is None:
            return
        base_nodes, base_digests = self._base()
        self._base = None
        self._nodes = [*base_nodes, *self._nodes]
        self._tool_results = {**base_digests, **self._tool_results}
        self._positions = None

    # -- inspection -------------------------------------------------------
    @property
    def next_seq(self) -> int:
        """Number of events folded so far (= seq the next event must carry)."""
        return self._next_seq

    @property
    def generation(self) -> int:
        """Number of replacements committed so far (the reference's replace generation)."""
        return self._generation

    @property
    def tracks_history(self) -> bool:
        """Whether per-event classifications and replacements are retained."""
        return self._surfaces is not None

    @property
    def error(self) -> SurfaceFoldError | None:
        """The error that failed this fold, if any."""
        return self._error

    def nodes(self) -> list[int]:
        """A copy of the current surface, in model-history order."""
        self._materialize()
        return list(self._nodes)

    def state(self) -> tuple[list[int], dict[int, bytes]]:
        """The surface as a :data:`SurfaceBase` returns it (copies)."""
        self._materialize()
        self._resolve_pending()
        return list(self._nodes), dict(self._tool_results)  # type: ignore[arg-type]

    def is_current(self, seq: int) -> bool:
        """Whether ``seq`` is a current surface node (works without history)."""
        return seq in self._index()

    def _index(self) -> dict[int, int]:
        self._materialize()
        if self._positions is None:
            self._positions = {node: index for index, node in enumerate(self._nodes)}
        return self._positions

    def classify(self, seq: int) -> Surface:
        """Classification of an already folded event (needs history)."""
        if not 0 <= seq < self._next_seq:
            raise IndexError(f"seq {seq} has not been folded")
        if self._surfaces is None:
            raise ValueError("this fold does not track history; only is_current() is available")
        return _SURFACE_CODES[self._surfaces[seq]]

    def result(self) -> SurfaceFoldResult:
        """The fold of every event seen so far (needs history)."""
        self._raise_if_failed()
        self._materialize()
        if self._surfaces is None or self._replacements is None:
            raise ValueError("this fold does not track history")
        return SurfaceFoldResult(
            nodes=list(self._nodes),
            replacements=list(self._replacements),
            surfaces=[_SURFACE_CODES[code] for code in self._surfaces],
        )

    # -- feeding ------------------------------------------------------------
    def apply(self, event: Event) -> SurfaceReplacement | None:
        """Fold one event; return its replacement when it replaced nodes.

        The returned replacement's ``shadowed_seqs`` are exactly the earlier
        events whose classification changed (current → shadowed).  The event's
        own classification right after this call is ``current`` if it is a
        surface type, else ``log-only``.
        """
        self._raise_if_failed()
        seq = self._next_seq
        try:
            # Fast paths for the common cases, with an exact int seq (same results
            # as _apply_valid): a log-only event without surface keys, and an append.
            if type(event) is dict and type(event.get("seq")) is int and event["seq"] == seq:
                kind = event.get("type")
                if type(kind) is str:
                    if kind not in SURFACE_EVENT_TYPES:
                        if "surfaceOp" not in event and "sourceEventSeqs" not in event:
                            self._commit_log_only()
                            return None
                    else:
                        op = event.get("surfaceOp")
                        if type(op) is str and op == "append":
                            _check_provenance(event, seq, ())
                            self._commit_append(event, seq)
                            return None
            return self._apply_valid(event, seq)
        except SurfaceFoldError as error:
            self._error = error
            raise

    def append(self, event: Event) -> None:
        """Fold a surface event known to append: equivalent to :meth:`apply`.

        For callers that already checked that ``event`` is a dict whose
        ``seq`` is an exact int (normally :attr:`next_seq`), whose ``type`` is
        a surface type and whose ``surfaceOp`` is the string ``"append"``;
        only the provenance rule is left to check.
        """
        if self._error is not None:
            raise self._error
        seq = self._next_seq
        if event["seq"] != seq:  # not the caller's promise after all: the full rules decide
            self.apply(event)
            return
        try:
            _check_provenance(event, seq, ())
        except SurfaceFoldError as error:
            self._error = error
            raise
        self._commit_append(event, seq)

    def skip_log_only(self, first_seq: int, count: int) -> None:
        """Fold ``count`` log-only events with seqs ``first_seq``, ``first_seq + 1``, …

        For callers that already know the events are log-only with exact,
        contiguous int seqs and no surface keys (e.g. members of a packed chunk
        row); equivalent to applying them one by one.
        """
        if self._error is not None:
            raise self._error
        if not (type(first_seq) is int and first_seq == self._next_seq):
            try:
                _check_seq({"seq": first_seq}, self._next_seq)
            except SurfaceFoldError as error:
                self._error = error
                raise
        if self._surfaces is not None:
            self._surfaces.extend(bytes(count))
        self._next_seq += count

    def extend(self, events: Iterable[Event]) -> SurfaceDelta:
        """Fold a batch of events and report what changed (see :class:`SurfaceDelta`).

        On a failed fold this raises even for an empty batch.  When an event of
        the batch fails, the events before it stay folded (the error carries the
        failing seq) and the delta of that partial batch is not returned.
        """
        self._raise_if_failed()
        first_seq = self._next_seq
        surfaces: list[Surface] = []
        shadowed_earlier: list[int] = []
        replacements: list[SurfaceReplacement] = []
        for event in events:
            replacement = self.apply(event)
            surfaces.append(_own_surface(event))
            if replacement is None:
                continue
            replacements.append(replacement)
            for node in replacement.shadowed_seqs:
                if node >= first_seq:
                    surfaces[node - first_seq] = SHADOWED
                else:
                    shadowed_earlier.append(node)
        return SurfaceDelta(first_seq, surfaces, shadowed_earlier, replacements)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def _apply_valid(self, event: Event, seq: int) -> SurfaceReplacement | None:
        """Validate then commit one event (nothing changes before validation passes)."""
        _check_seq(event, seq)
        op = _surface_op(event, seq)
        if op is None:
            self._commit_log_only()
            return None
        if op == "append":
            _check_provenance(event, seq, ())
            self._commit_append(event, seq)
            return None
        assert isinstance(op, dict)
        start_index, end_index = self._locate_range(op, seq)
        shadowed = tuple(self._nodes[start_index : end_index + 1])
        _check_provenance(event, seq, shadowed)
        if len(shadowed) == 1:
            self._resolve(shadowed[0])
        fingerprint = _check_tool_result_rewrite(event, seq, shadowed, self._tool_results)  # type: ignore[arg-type]
        replacement = SurfaceReplacement(seq, int(op["start"]), int(op["end"]), shadowed)
        self._commit_replace(replacement, start_index, end_index, fingerprint)
        return replacement

    def _locate_range(self, op: dict[str, Any], seq: int) -> tuple[int, int]:
        """Positions of the declared bounds, which must be current nodes in order."""
        positions = self._index()
        start_index = positions.get(op["start"])
        if start_index is None:
            raise SurfaceFoldError(
                f"replacement at seq {seq} starts at {_describe(op['start'])}, which is not a current surface node",
                seq,
            )
        end_index = positions.get(op["end"])
        if end_index is None:
            raise SurfaceFoldError(
                f"replacement at seq {seq} ends at {_describe(op['end'])}, which is not a current surface node",
                seq,
            )
        if start_index > end_index:
            raise SurfaceFoldError(
                f"replacement at seq {seq} starts at node {_describe(op['start'])} (position {start_index}), "
                f"after its end node {_describe(op['end'])} (position {end_index})",
                seq,
            )
        return start_index, end_index

    # -- commits (only reached with a fully validated event) ---------------
    def _commit_log_only(self) -> None:
        if self._surfaces is not None:
            self._surfaces.append(_CODE_LOG_ONLY)
        self._next_seq += 1

    def _commit_append(self, event: Event, seq: int) -> None:
        if self._positions is not None:
            self._positions[seq] = len(self._nodes)
        self._nodes.append(seq)
        if event.get("type") == "tool/result":
            self._defer_fingerprint(seq, event.get("data", UNDEFINED))
        if self._surfaces is not None:
            self._surfaces.append(_CODE_CURRENT)
        self._next_seq += 1

    def _defer_fingerprint(self, seq: int, data: Any) -> None:
        """Record a new tool/result node's fingerprint, hashed only when needed."""
        fingerprint = defer_fingerprint(data, self._remember_digests)
        self._tool_results[seq] = fingerprint
        if type(fingerprint) is not PendingDigest:
            return
        self._pending.append(seq)
        if len(self._pending) > _PENDING_DIGESTS_MAX:
            self._resolve_pending()

    def _resolve(self, seq: int) -> None:
        """Compute the digest of node ``seq`` if it is still pending."""
        entry = self._tool_results.get(seq)
        if type(entry) is PendingDigest:
            self._tool_results[seq] = entry.resolve()

    def _resolve_pending(self) -> None:
        """Compute every pending digest (in place: the mapping's order is kept)."""
        for seq in self._pending:
            self._resolve(seq)
        self._pending.clear()

    def _commit_replace(
        self, replacement: SurfaceReplacement, start_index: int, end_index: int, fingerprint: bytes | None
    ) -> None:
        seq = replacement.seq
        positions = self._index()
        for node in replacement.shadowed_seqs:
            del positions[node]
            self._tool_results.pop(node, None)
        if start_index == end_index:
            self._nodes[start_index] = seq  # one-for-one: no position shifts
        else:
            self._nodes[start_index : end_index + 1] = [seq]
            for index in range(start_index + 1, len(self._nodes)):
                positions[self._nodes[index]] = index
        positions[seq] = start_index
        if fingerprint is not None:
            self._tool_results[seq] = fingerprint
        self._generation += 1
        if self._surfaces is not None and self._replacements is not None:
            for node in replacement.shadowed_seqs:
                self._surfaces[node] = _CODE_SHADOWED
            self._surfaces.append(_CODE_CURRENT)
            self._replacements.append(replacement)
        self._next_seq += 1

    # -- persistence ----------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Serialise the complete state (msgpack; see :data:`_STATE_FORMAT`)."""
        self._materialize()
        self._resolve_pending()
        history = None
        if self._surfaces is not None and self._replacements is not None:
            history = _History(bytes(self._surfaces), list(self._replacements))
        error = None if self._error is None else (self._error.message, self._error.seq)
        snapshot = _Snapshot(
            _STATE_FORMAT, self._next_seq, self._generation, self._nodes, self._tool_results, history, error
        )
        return msgspec.msgpack.encode(snapshot)

    @classmethod
    def from_bytes(cls, data: bytes) -> SurfaceFold:
        """Restore a fold saved by :meth:`to_bytes` (ValueError on foreign data)."""
        try:
            snapshot = msgspec.msgpack.decode(data, type=_Snapshot)
        except msgspec.DecodeError as error:
            raise ValueError(f"not a surface fold state: {error}") from error
        if snapshot.format != _STATE_FORMAT:
            raise ValueError(f"surface fold state format {snapshot.format} is not {_STATE_FORMAT}")
        fold = cls(track_history=snapshot.history is not None)
        fold._next_seq = snapshot.next_seq
        fold._generation = snapshot.generation
        fold._nodes = snapshot.nodes
        fold._positions = None
        fold._tool_results = snapshot.tool_results
        if snapshot.history is not None:
            fold._surfaces = bytearray(snapshot.history.surfaces)
            fold._replacements = snapshot.history.replacements
        if snapshot.error is not None:
            fold._error = SurfaceFoldError(*snapshot.error)
        return fold


def _own_surface(event: Event) -> Surface:
    """Classification of a just-folded (valid) event, before any later replacement."""
    etype = event.get("type")
    return CURRENT if type(etype) is str and etype in SURFACE_EVENT_TYPES else LOG_ONLY


# ---------------------------------------------------------------------------
# Convenience entry points
# ---------------------------------------------------------------------------

def fold_events(events: Iterable[Event]) -> SurfaceFoldResult:
    """Fold a whole log from scratch (the reference's ``foldSurface``).

    Raises :class:`SurfaceFoldError` at the first violation.
    """
    fold = SurfaceFold()
    for event in events:
        fold.apply(event)
    return fold.result()


def surface_base_of(events: Iterable[Event]) -> SurfaceBase:
    """A :data:`SurfaceBase` holding the surface of ``events`` (for in-memory resumes)."""
    fold = SurfaceFold(track_history=False)
    for event in events:
        fold.apply(event)
    state = fold.state()
    return lambda: state


def classify_events(events: Iterable[Event]) -> list[Surface]:
    """Classification of every event of a log, in seq order (§4.4)."""
    return fold_events(events).surfaces


def fold_session_surface(events: Iterable[Event]) -> SurfaceFoldResult:
    """:func:`fold_events` for the query side: failures become
    ``SESSION_QUERY_INVALID_SURFACE`` (message ``invalid session surface: ...``)."""
    try:
        return fold_events(events)
    except SurfaceFoldError as error:
        raise invalid_surface_error(error) from error


def iter_current_events(events: Sequence[Event], result: SurfaceFoldResult) -> Iterator[Event]:
    """The current surface events in model-history order (``readSurface``); not copied."""
    return (events[seq] for seq in result.nodes)


def surface_kind(op: Any) -> Literal["append", "replace"] | None:
    """``"append"``/``"replace"`` for a valid ``surfaceOp`` value, else ``None``.

    Useful to tell append-origin events (the human transcript) from replacement
    copies (format-spec.md §6.6).
    """
    if type(op) is str and op == "append":
        return "append"
    if type(op) is dict and _is_replace_op(op):
        return "replace"
    return None
