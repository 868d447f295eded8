"""Session and event result filters (query-spec §3).

Three layers, mirroring the reference:

* **Materialisation** (§3.4) validates caller-owned JSON filter arrays and
  returns detached copies holding only the known fields.  It runs before any
  I/O; every failure is ``SESSION_QUERY_INVALID_FILTER`` with the reference's
  exact message, and clauses are checked in array order (first failure wins).
* **Predicates** (§3.3) are built eagerly from materialised clauses: range
  bounds, closed value sets, text patterns and kinds are validated before a
  single record is looked at, so errors fire even on empty input.
* **Text clauses** (§3.5) compile to a literal, whitespace-flexible,
  case-insensitive pattern with JS ``iu`` semantics.

Filters are plain JSON values (``dict`` clauses in a ``list``); materialised
clauses are fresh dicts in the reference's key order (``kind`` first, then
``values`` / ``from``, ``to`` / ``text``).

Deliberate divergences (all harmless, documented per the spec's Python notes):

* A clause that is ``null`` is a JS ``TypeError`` in the reference; here it is
  ``SESSION_QUERY_INVALID_FILTER`` with the "kind (missing)" message, the answer
  the reference already gives for every other non-object clause.
* Tuples are accepted wherever a JSON array is (Python callers build them).
* Integers beyond ``2**53`` are turned into the double JS would have parsed
  (``inf`` when out of double range, hence "must be finite").
"""

from __future__ import annotations

import math
import re
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from typing import Any, Final, TypeVar

from readmodel.core.errors import SessionQueryError
from readmodel.core.jsvalues import js_string as _js_string, to_js_number as _js_number
from readmodel.core.jsvalues import JS_WHITESPACE, JS_WHITESPACE_CLASS, MAX_SAFE_INTEGER, js_split_whitespace
from readmodel.core.vocabulary import SessionEventSearchDocument, SessionRecord

Clause = dict[str, Any]
RecordPredicate = Callable[[SessionRecord], bool]
DocumentPredicate = Callable[[SessionEventSearchDocument], bool]
R = TypeVar("R")
D = TypeVar("D")

SESSION_FILTER_KINDS: Final = frozenset(("id", "cwd", "created-at", "parent", "availability", "source"))
SourceIds = Callable[[Sequence[str]], Iterable[str]]
"""Resolves a ``source`` clause: the ids of the stored sessions of these sources."""
EVENT_FILTER_KINDS: Final = frozenset(("seq", "time", "type", "surface", "text"))
EVENT_METADATA_FILTER_KINDS: Final = frozenset(("seq", "time", "type", "surface"))
AVAILABILITY_VALUES: Final = ("live", "persisted")
SURFACE_VALUES: Final = ("current", "shadowed", "log-only")

_ARRAY_TYPES: Final = (list, tuple)
_MISSING: Final = object()


# --------------------------------------------------------------------------- errors


def _invalid(detail: str) -> SessionQueryError:
    """Every filter failure: ``SESSION_QUERY_INVALID_FILTER`` with ``session <detail>``."""
    return SessionQueryError("SESSION_QUERY_INVALID_FILTER", f"session {detail}")


def _unknown_kind(clause: Any) -> SessionQueryError:
    kind = clause.get("kind") if type(clause) is dict else None
    return _invalid(f'unknown filter kind "{kind}"' if type(kind) is str else "unknown filter kind (missing)")


# --------------------------------------------------------------------------- numbers


def _finite_bound(value: Any) -> int | float | None:
    """``Number.isFinite(value) ? value : None`` (no coercion; NaN and ±inf fail)."""
    number = _js_number(value)
    if number is None or (type(number) is float and not math.isfinite(number)):
        return None
    return number


_JS_DECIMAL: Final = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|Infinity)\Z")
_JS_RADIX: Final = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}


def _to_number(value: Any) -> float:
    """JS ``ToNumber`` for the relational comparison of a non-number field.

    Only reached for malformed records (validated headers and events carry
    numbers); restated so a stray string or ``null`` compares as JS would
    instead of raising.  ``_MISSING`` (JS ``undefined``) converts to NaN.
    """
    number = _js_number(value)
    if number is not None:
        return float(number)
    if value is None or value is False:
        return 0.0
    if value is True:
        return 1.0
    if type(value) is str:
        text = value.strip(JS_WHITESPACE)
        if not text:
            return 0.0
        radix = _JS_RADIX.get(text[:2])
        if radix is not None:
            try:
                digits = text[2:]
                return float(int(digits, radix)) if digits.isascii() and digits.isalnum() else math.nan
            except ValueError:
                return math.nan
        if _JS_DECIMAL.match(text) is None:
            return math.nan
        return float(text.replace("Infinity", "inf"))
    if type(value) in _ARRAY_TYPES:
        return _to_number(_js_string(value))
    return math.nan


def _in_range(value: Any, low: int | float | None, high: int | float | None) -> bool:
    """``(from === undefined || value >= from) && (to === undefined || value <= to)``."""
    if _js_number(value) is None:
        value = _to_number(value)  # NaN compares false both ways, as in JS
    elif type(value) is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        value = _js_number(value)
    return (low is None or value >= low) and (high is None or value <= high)


# --------------------------------------------------------------------------- value sets


class _ValueSet:
    """``values.includes(x)`` (SameValueZero) precomputed for repeated probes.

    Materialised values are strings and ``null``; a frozenset serves those.
    Anything else (only possible with unmaterialised clauses) falls back to a
    scan with JS equality: numbers by value (NaN equals NaN, bool is not a
    number), objects by identity.
    """

    __slots__ = ("strings", "has_null", "others")

    def __init__(self, values: Iterable[Any]) -> None:
        strings: set[str] = set()
        others: list[Any] = []
        has_null = False
        for value in values:
            if type(value) is str:
                strings.add(value)
            elif value is None:
                has_null = True
            else:
                others.append(value)
        self.strings = frozenset(strings)
        self.has_null = has_null
        self.others = tuple(others)

    def __contains__(self, probe: Any) -> bool:
        if type(probe) is str:
            return probe in self.strings
        if probe is None:
            return self.has_null
        return any(_same_value_zero(value, probe) for value in self.others)


def _same_value_zero(a: Any, b: Any) -> bool:
    na, nb = _js_number(a), _js_number(b)
    if na is not None and nb is not None:
        return na == nb or (na != na and nb != nb)
    # Booleans are singletons; arrays and objects compare by reference in JS.
    return a is b


# --------------------------------------------------------------------------- materialisation


def _copy_strings(kind: str, values: Any) -> list[str]:
    if type(values) not in _ARRAY_TYPES or any(type(value) is not str for value in values):
        raise _invalid(f"{kind} filter values must be an array of strings")
    return list(values)


def _copy_nullable_strings(kind: str, values: Any) -> list[str | None]:
    if type(values) not in _ARRAY_TYPES or any(
        value is not None and type(value) is not str for value in values
    ):
        raise _invalid(f"{kind} filter values must be an array of strings or null")
    return list(values)


def _assert_allowed(kind: str, values: Iterable[Any], allowed: tuple[str, ...]) -> None:
    for value in values:
        if type(value) is not str or value not in allowed:
            raise _invalid(f'{kind} filter contains unknown value "{_js_string(value)}"')


def _range_bounds(kind: str, clause: Clause) -> tuple[int | float | None, int | float | None]:
    """Validate a range clause: ``from`` finite, ``to`` finite, ``from <= to``.

    "Present" means the key exists (JSON has no ``undefined``), so an explicit
    ``null`` bound is present and fails as not finite.
    """
    low = high = None
    if "from" in clause:
        low = _finite_bound(clause["from"])
        if low is None:
            raise _invalid(f"{kind} filter from must be finite")
    if "to" in clause:
        high = _finite_bound(clause["to"])
        if high is None:
            raise _invalid(f"{kind} filter to must be finite")
    if low is not None and high is not None and low > high:
        raise _invalid(f"{kind} filter from must be less than or equal to to")
    return low, high


def _copy_range(kind: str, clause: Clause) -> Clause:
    low, high = _range_bounds(kind, clause)
    copy: Clause = {"kind": kind}
    if low is not None:
        copy["from"] = low
    if high is not None:
        copy["to"] = high
    return copy


def _require_array(value: Any) -> Sequence[Any]:
    if type(value) not in _ARRAY_TYPES:
        raise _invalid("filters must be an array")
    return value


def _clause_kind(clause: Any) -> Any:
    return clause.get("kind", _MISSING) if type(clause) is dict else _MISSING


def materialize_session_filters(value: Any) -> list[Clause]:
    """``materializeSessionResultFilters``: validate and detach session filters.

    Accepts ``id``, ``cwd``, ``created-at``, ``parent`` and ``availability``
    clauses, and the sessionq extension ``source`` (``values``: an array of
    source names, validated like ``id``); returns fresh clauses holding only
    the known fields.  Raises
    ``SESSION_QUERY_INVALID_FILTER`` with the §3.4 message of the first failure.
    """
    result: list[Clause] = []
    for clause in _require_array(value):
        kind = _clause_kind(clause)
        if kind == "id" or kind == "source":
            result.append({"kind": kind, "values": _copy_strings(kind, clause.get("values"))})
        elif kind == "cwd" or kind == "parent":
            result.append({"kind": kind, "values": _copy_nullable_strings(kind, clause.get("values"))})
        elif kind == "created-at":
            result.append(_copy_range(kind, clause))
        elif kind == "availability":
            values = _copy_strings(kind, clause.get("values"))
            _assert_allowed(kind, values, AVAILABILITY_VALUES)
            result.append({"kind": kind, "values": values})
        else:
            raise _unknown_kind(clause)
    return result


def materialize_event_filters(value: Any) -> list[Clause]:
    """``materializeSessionEventResultFilters``: validate and detach event filters.

    Accepts ``seq``, ``time``, ``type``, ``surface`` and ``text`` clauses.  A
    text clause is only checked to be a string here; blank text is rejected
    later, when the predicate is built (:func:`compile_text_filter`).
    """
    result: list[Clause] = []
    for clause in _require_array(value):
        kind = _clause_kind(clause)
        if kind == "seq" or kind == "time":
            result.append(_copy_range(kind, clause))
        elif kind == "type":
            result.append({"kind": kind, "values": _copy_strings(kind, clause.get("values"))})
        elif kind == "surface":
            values = _copy_strings(kind, clause.get("values"))
            _assert_allowed(kind, values, SURFACE_VALUES)
            result.append({"kind": kind, "values": values})
        elif kind == "text":
            text = clause.get("text")
            if type(text) is not str:
                raise _invalid("text filter text must be a string")
            result.append({"kind": kind, "text": text})
        else:
            raise _unknown_kind(clause)
    return result


def materialize_event_metadata_filters(value: Any) -> list[Clause]:
    """The search providers' event-filter check, then :func:`materialize_event_filters`.

    Search accepts only ``seq``, ``time``, ``type`` and ``surface``
    (search-tools-export-spec §2.1).  Every clause is screened first, in order:
    ``text`` fails with ``session-search metadata filters do not accept text
    clauses``; any other kind with ``session filter contains unknown kind
    "<kind>"`` (or ``(missing)``).  Only then does shared materialisation run.

    The reference iterates the argument before checking it is an array, so a
    non-empty *string* yields the per-clause "(missing)" error (its characters
    have no ``kind``) while an empty string reaches "filters must be an array".
    Other non-arrays are a JS ``TypeError`` there ("not iterable"); here they
    get the "filters must be an array" error.
    """
    if type(value) is str:
        if value:
            raise _invalid("filter contains unknown kind (missing)")
    elif type(value) in _ARRAY_TYPES:
        for clause in value:
            kind = _clause_kind(clause)
            if type(kind) is str and kind in EVENT_METADATA_FILTER_KINDS:
                continue
            if kind == "text":
                raise SessionQueryError(
                    "SESSION_QUERY_INVALID_FILTER",
                    "session-search metadata filters do not accept text clauses",
                )
            raise _invalid(
                f'filter contains unknown kind "{kind}"' if type(kind) is str else "filter contains unknown kind (missing)"
            )
    return materialize_event_filters(value)


# --------------------------------------------------------------------------- text clause


def _simple_fold(char: str) -> str:
    """Unicode simple case folding (CaseFolding.txt statuses C and S) of one code point.

    ``str.casefold`` is *full* folding (C + F).  Where it stays one code point
    it is the C mapping.  Where it expands (an F entry), the S entry, when one
    exists, is the single-code-point lowercase mapping (ẞ → ß, ᾈ → ᾀ); chars
    without an S entry (ß, İ, ŉ, ...) fold to themselves.  The Turkic T entries
    are excluded, as in JS.
    """
    folded = char.casefold()
    if len(folded) == 1:
        return folded
    lower = char.lower()
    if len(lower) == 1 and lower != char:
        return lower
    return char


# Simple-folding equivalences newer than the Unicode 14.0 database of Python
# 3.11: S entries added to CaseFolding.txt after 14.0 (ΐ/ΐ, ΰ/ΰ, ﬅ/ﬆ) and the
# case pairs of Unicode 15.0-17.0 (Cyrillic TJE, Latin Extended-D additions,
# Garay, Beria Erfe).  Each entry is (first code point, partner, run length).
# Verified exhaustively against V8's /iu matching (Node 20, ICU 78, Unicode 17).
_NEWER_FOLD_PAIRS: Final = (
    (0x0390, 0x1FD3, 1),
    (0x03B0, 0x1FE3, 1),
    (0xFB06, 0xFB05, 1),
    (0x1C8A, 0x1C89, 1),
    (0x019B, 0xA7DC, 1),
    (0x0264, 0xA7CB, 1),
    (0xA7CD, 0xA7CC, 1),
    (0xA7CF, 0xA7CE, 1),
    (0xA7D3, 0xA7D2, 1),
    (0xA7D5, 0xA7D4, 1),
    (0xA7DB, 0xA7DA, 1),
    (0x10D70, 0x10D50, 22),
    (0x16EBB, 0x16EA0, 25),
)
# No code point at or above this one has a case mapping (Unicode 17).
_CASED_LIMIT: Final = 0x20000


_FOLD_SPAN: Final = 64


def _folding_chars() -> Iterator[str]:
    """Every code point below :data:`_CASED_LIMIT` whose ``casefold`` is not itself, in order.

    Only those can simple-fold to another code point (:func:`_simple_fold`
    returns the others unchanged).  A span of code points whose joined
    ``casefold`` equals itself holds none (no code point folds to an empty
    string, so equal lengths mean each one folded to one code point, itself):
    most spans are skipped whole, and the code points are made in one decode
    rather than one ``chr`` each, which makes building :func:`fold_classes`
    (once per process, so once per preparation worker too) several times cheaper.
    """
    codes = array("I", range(_CASED_LIMIT)).tobytes()
    every = codes.decode(f"utf-32-{sys.byteorder[0]}e", "surrogatepass")  # "utf-32-le" or "utf-32-be"
    for start in range(0, _CASED_LIMIT, _FOLD_SPAN):
        span = every[start : start + _FOLD_SPAN]
        if span.casefold() != span:
            yield from (char for char in span if char.casefold() != char)


@cache
def fold_classes() -> dict[str, frozenset[str]]:
    """Every simple-fold equivalence class with more than one member, keyed by its
    representative (the members' simple case folding: ``k`` for ``{k, K, K}``).

    The one source of JS ``iu`` case equivalence: text-clause patterns spell each
    class out, and the substring candidate index folds each member to the key.
    Built once, lazily (a few tens of milliseconds): the first caller pays,
    imports do not.
    """
    classes: dict[str, set[str]] = {}
    for char in _folding_chars():
        key = _simple_fold(char)
        if key != char:
            classes.setdefault(key, {key}).add(char)
    for first, partner, length in _NEWER_FOLD_PAIRS:
        for offset in range(length):
            key, other = chr(first + offset), chr(partner + offset)
            members = classes.setdefault(key, {key})
            members.add(other)
            members |= classes.pop(other, set())
    return {key: frozenset(members) for key, members in classes.items() if len(members) > 1}


@cache
def _fold_table() -> dict[int, str]:
    """Translation table for literal query text: escape metacharacters, and turn
    every code point with case variants into a class of its whole simple-fold
    equivalence class (e.g. ``k`` → ``[kKK]``).
    """
    table: dict[int, str] = {}
    for members in fold_classes().values():
        pattern = "[" + "".join(sorted(members)) + "]"
        for member in members:
            table[ord(member)] = pattern
    # JS escapes exactly these; outside a class they are Python's only
    # metacharacters too (no VERBOSE flag), and none of them is cased.
    for char in ".*+?^${}()|[]\\":
        table[ord(char)] = "\\" + char
    return table


_WHITESPACE_RUN: Final = JS_WHITESPACE_CLASS + "+"


def compile_text_filter(text: Any) -> re.Pattern[str]:
    """``compileSessionTextFilter`` (query-spec §3.5): a literal, case-insensitive scan.

    Trims ``text`` with W, splits it on W runs, matches each part literally and
    lets every gap match one or more W characters.  Case-insensitivity is JS
    ``iu``: two code points match iff their Unicode *simple* case foldings are
    equal (so ``i`` ≠ ``İ``, ``k`` = ``K`` (U+212A), ``s`` = ``ſ``, ``ß`` ≠
    ``ss``).  Python's ``re.IGNORECASE`` differs on such points, so the pattern
    spells every cased character as an explicit class of its fold equivalents
    and compiles case-sensitively.

    Returns a compiled pattern; a document matches when
    ``pattern.search(document_text)`` is not ``None`` (unanchored).  Raises
    ``SESSION_QUERY_INVALID_FILTER`` for blank text (and, as an improvement
    over the reference's ``TypeError``, for a non-string).
    """
    if type(text) is not str:
        raise _invalid("text filter text must be a string")
    trimmed = text.strip(JS_WHITESPACE)
    if not trimmed:
        raise _invalid("text filter must contain non-whitespace text")
    table = _fold_table()
    pattern = _WHITESPACE_RUN.join(part.translate(table) for part in js_split_whitespace(trimmed))
    return re.compile(pattern)


# --------------------------------------------------------------------------- predicates


def _list_values(kind: str, clause: Clause, nullable: bool) -> Sequence[Any]:
    values = clause.get("values")
    if type(values) not in _ARRAY_TYPES:
        # The reference assumes materialised input and would misbehave lazily;
        # failing eagerly with the materialisation message is clearer.
        suffix = " or null" if nullable else ""
        raise _invalid(f"{kind} filter values must be an array of strings{suffix}")
    return values


def session_clause_predicate(clause: Clause, source_ids: SourceIds | None = None) -> RecordPredicate:
    """Build the predicate of one materialised session clause (query-spec §3.1).

    Validates eagerly: range bounds, ``availability`` values and the kind.
    ``cwd`` and ``parent`` compare ``null`` for an absent header field.
    A ``source`` clause (a sessionq extension) keeps the sessions whose id
    ``source_ids`` gives for its values — stored sessions of those sources
    (a live session too when it is stored by one); without ``source_ids``
    (no index) no session has a source, so it keeps none.
    """
    kind = _clause_kind(clause)
    if kind == "id":
        ids = _ValueSet(_list_values(kind, clause, False))
        return lambda record: record.header.get("id") in ids
    if kind == "source":
        values = _list_values(kind, clause, False)
        owned = _ValueSet(source_ids(values) if source_ids is not None and values else ())
        return lambda record: record.header.get("id") in owned
    if kind == "cwd":
        cwds = _ValueSet(_list_values(kind, clause, True))
        return lambda record: record.header.get("cwd") in cwds
    if kind == "parent":
        parents = _ValueSet(_list_values(kind, clause, True))
        return lambda record: record.header.get("parentSession") in parents
    if kind == "created-at":
        low, high = _range_bounds(kind, clause)
        # An absent createdAt is JS ``undefined`` (NaN: never in range), unlike
        # ``null`` (0); hence the sentinel rather than ``None``.
        return lambda record: _in_range(record.header.get("createdAt", _MISSING), low, high)
    if kind == "availability":
        values = _list_values(kind, clause, False)
        _assert_allowed(kind, values, AVAILABILITY_VALUES)
        want_live = "live" in values
        want_persisted = "persisted" in values
        return lambda record: bool((want_live and record.live) or (want_persisted and record.persisted))
    raise _unknown_kind(clause)


def event_clause_predicate(clause: Clause) -> DocumentPredicate:
    """Build the predicate of one materialised event clause (query-spec §3.1).

    Validates eagerly: range bounds, ``surface`` values, text compilation
    (blank text fails here) and the kind.
    """
    kind = _clause_kind(clause)
    if kind == "seq":
        low, high = _range_bounds(kind, clause)
        return lambda document: _in_range(document.seq, low, high)
    if kind == "time":
        low, high = _range_bounds(kind, clause)
        return lambda document: _in_range(document.time, low, high)
    if kind == "type":
        types = _ValueSet(_list_values(kind, clause, False))
        return lambda document: document.type in types
    if kind == "surface":
        values = _list_values(kind, clause, False)
        _assert_allowed(kind, values, SURFACE_VALUES)
        surfaces = _ValueSet(values)
        return lambda document: document.surface in surfaces
    if kind == "text":
        search = compile_text_filter(clause.get("text")).search
        return lambda document: search(document.text) is not None
    raise _unknown_kind(clause)


def _all_of(predicates: list[Callable[[Any], bool]]) -> Callable[[Any], bool]:
    """AND of ``predicates``, specialised for the common small counts."""
    if not predicates:
        return lambda item: True
    if len(predicates) == 1:
        return predicates[0]
    return lambda item: all(predicate(item) for predicate in predicates)


def session_predicate(filters: Sequence[Clause] = (), source_ids: SourceIds | None = None) -> RecordPredicate:
    """The AND of every materialised session clause, built eagerly.

    Every clause is validated (ranges, closed value sets, kinds) before this
    returns, so invalid filters fail even if no record is ever tested.  List
    values are ORed within a clause; ``values: []`` matches nothing; no clauses
    match everything.
    """
    return _all_of([session_clause_predicate(clause, source_ids) for clause in filters])


def event_predicate(filters: Sequence[Clause] = ()) -> DocumentPredicate:
    """The AND of every materialised event clause, built eagerly.

    Same contract as :func:`session_predicate`; a text clause is compiled here,
    so blank text fails with ``SESSION_QUERY_INVALID_FILTER`` at build time.
    """
    return _all_of([event_clause_predicate(clause) for clause in filters])


def filter_session_records(records: Iterable[R], filters: Sequence[Clause] = ()) -> list[R]:
    """``filterSessionResults``: the records passing every clause, in input order.

    All predicates are built before any record is examined, so invalid filters
    fail even when ``records`` is empty.  The same record objects are returned
    (no cloning); no filters keeps everything.
    """
    predicate = session_predicate(filters)
    return [record for record in records if predicate(record)]


def filter_event_documents(documents: Iterable[D], filters: Sequence[Clause] = ()) -> list[D]:
    """``filterSessionEventDocuments``: the documents passing every clause, in order.

    Same eager validation and identity-preserving contract as
    :func:`filter_session_records`.
    """
    predicate = event_predicate(filters)
    return [document for document in documents if predicate(document)]
