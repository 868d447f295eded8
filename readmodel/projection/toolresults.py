"""The tool-result rewrite rule's fingerprint (format-spec §6.4), with JS semantics.

A ``tool/result`` replacement may change only its result content.  The surface
fold compares a replacement with the node it shadows by a digest of each one's
``data`` with the result content blanked, taken over a canonical JSON text, so
two results count as "the same but for the content" exactly when the
reference's comparison says so.  An appended result's digest is deferred
(:class:`PendingDigest`) until a replacement, a state snapshot or
serialisation needs it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from typing import Any, Final

import msgspec

from readmodel.core.jsvalues import js_spread, utf16_units

UNBLANKABLE: Final = b""
"""The fingerprint of a result that has no ``message.content`` to blank."""


class Undefined:
    """JavaScript ``undefined`` (a missing property)."""


UNDEFINED: Final = Undefined()


class NullishRead(Exception):
    """Reading a property of ``null``/``undefined`` (a JS TypeError)."""


def _js_get(value: Any, key: str) -> Any:
    """JS ``value[key]`` for JSON values; raises :class:`NullishRead` on null/undefined."""
    if value is None or value is UNDEFINED:
        raise NullishRead(key)
    if type(value) is dict:
        return value.get(key, UNDEFINED)
    if type(value) is list and key.isdigit() and int(key) < len(value):
        return value[int(key)]
    if type(value) is str and key.isdigit():
        units = utf16_units(value)
        return chr(units[int(key)]) if int(key) < len(units) else UNDEFINED
    return UNDEFINED


def blanked_tool_result(data: Any) -> dict[str, Any]:
    """``data`` with ``message.content`` reduced to its first block, whose own
    ``content`` is set to null — what the reference compares (§6.4).

    Raises :class:`NullishRead` where the reference's property reads would.
    """
    if type(data) is dict:
        # Common case: objects all the way down, where JS spreads are plain copies.
        message = data.get("message")
        if type(message) is dict:
            content = message.get("content")
            if type(content) is list and content and type(content[0]) is dict:
                return {**data, "message": {**message, "content": [{**content[0], "content": None}]}}
    message = _js_get(data, "message")
    first_block = _js_get(_js_get(message, "content"), "0")
    rest = js_spread(data)
    rest["message"] = {**js_spread(message), "content": [{**js_spread(first_block), "content": None}]}
    return rest


# Canonical JSON text: sorted keys (msgspec's order, by code point), numbers
# rewritten to one spelling per double.  Number tokens that may need a rewrite
# are rare (JS writers never emit "1.0"); _MAYBE_ODD_NUMBER finds every such
# token right after a structural character, possibly with false positives
# inside strings, which only cost the full tokenising pass.
_MAYBE_ODD_NUMBER: Final = re.compile(rb"[:,\[]-?\d+(?:\.|[eE]|\d{15})")
_JSON_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?')


_encode_sorted: Final = msgspec.json.Encoder(order="sorted").encode
_DIGITS_TO_ZERO: Final = bytes.maketrans(b"123456789", b"000000000")


def _may_hold_odd_number(text: bytes) -> bool:
    """Whether :data:`_MAYBE_ODD_NUMBER` finds a token in ``text``.

    Every match holds a digit followed by ``.``, ``e``/``E`` or 15 more
    digits; with all digits mapped to ``0`` those are plain substring tests
    (C speed), so the regex only runs on the rare texts that pass them.
    """
    zeroed = text.translate(_DIGITS_TO_ZERO)
    if b"0." not in zeroed and b"0e" not in zeroed and b"0E" not in zeroed and b"0000000000000000" not in zeroed:
        return False
    return _MAYBE_ODD_NUMBER.search(text) is not None


class _Literal(str):
    """Already-rendered JSON text waiting on the emitter's stack."""


def _number_token(match: re.Match[bytes]) -> bytes:
    """One spelling per double: ``1``, ``1.0``, ``1e0`` -> ``1``; ``-0`` -> ``0``;
    integers beyond 2**53 collapse onto the double JS would read."""
    token = match.group()
    if token[:1] == b'"':
        return token
    try:
        number = float(token)
    except OverflowError:  # pragma: no cover - float() of a decimal string saturates to inf
        return token
    if number != number or number in (float("inf"), float("-inf")):
        return token
    if number.is_integer():
        return str(int(number)).encode()
    return repr(number).encode()


def _json_text_iteratively(value: Any) -> bytes:
    """Compact JSON with sorted keys: the text of ``msgspec.json.encode(value,
    order="sorted")`` up to the spelling of floats (``1e+16`` for ``1e16``, which
    the number pass unifies), without nesting limits and accepting lone
    surrogates (written raw, as WTF-8)."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is _Literal:
            out.append(item)
        elif item is None:
            out.append("null")
        elif kind is bool:
            out.append("true" if item else "false")
        elif kind is int or kind is float:
            out.append(repr(item))
        elif kind is str:
            out.append(json.dumps(item, ensure_ascii=False))
        elif kind is list:
            out.append("[")
            stack.append(_Literal("]"))
            for index in range(len(item) - 1, -1, -1):
                stack.append(item[index])
                if index:
                    stack.append(_Literal(","))
        elif kind is dict:
            out.append("{")
            stack.append(_Literal("}"))
            keys = sorted(item)
            for index in range(len(keys) - 1, -1, -1):
                stack.append(item[keys[index]])
                stack.append(_Literal(json.dumps(keys[index], ensure_ascii=False) + ":"))
                if index:
                    stack.append(_Literal(","))
        else:  # not a JSON value: equal only to itself
            out.append(json.dumps(f"\x00{kind.__name__}:{item!r}", ensure_ascii=False))
    return "".join(out).encode("utf-8", "surrogatepass")


def canonical_json(value: Any) -> bytes:
    """Canonical JSON text of a value: equal bytes iff the reference's
    ``isDeepEqualJson`` deems the values equal.

    Numbers compare as doubles (``1`` and ``1.0`` equal; ``true`` is not ``1``),
    object key order is irrelevant, arrays compare element-wise.  The fast path
    is msgspec (C); values msgspec refuses (nesting deeper than the recursion
    limit allows, lone surrogates) take an iterative emitter whose text is the
    same after the number pass, so the result never depends on the path taken
    or on the caller's stack depth.
    """
    try:
        text = _encode_sorted(value)
    except (RecursionError, UnicodeEncodeError, TypeError):
        text = _json_text_iteratively(value)
    if text[:1] not in b"-0123456789" and not _may_hold_odd_number(text):
        return text
    return _JSON_TOKEN.sub(_number_token, text)


def tool_result_fingerprint(data: Any) -> bytes:
    """Digest of a tool/result's blanked ``data`` (32 bytes), or ``b""`` when the
    reference could not even blank it.

    Two tool results satisfy the rewrite rule iff their fingerprints are equal
    and non-empty (up to a BLAKE2b-256 collision, which we accept).  When ``data``
    is one of the objects :func:`defer_fingerprint` was recently given, its pending
    digest is resolved instead (computed once for both: see there).
    """
    entry = _recent.pop(id(data), None)
    if entry is not None and entry[0] is data:
        return entry[1].resolve()
    try:
        blanked = blanked_tool_result(data)
    except NullishRead:
        return UNBLANKABLE
    return digest_of(blanked)


def digest_of(blanked: dict[str, Any]) -> bytes:
    """The fingerprint of an already blanked tool result."""
    return hashlib.blake2b(canonical_json(blanked), digest_size=32).digest()


class PendingDigest:
    """A current tool result's blanked data whose digest nobody has needed yet.

    The fold only compares digests when a replacement targets a tool result,
    which few do; hashing every appended one up front was most of the cost of
    folding a tool result.  The blanked copy (the result content dropped) is
    taken at append time, so the digest computed later is the one computed then.
    :meth:`resolve` computes it once, whoever asks first.
    """

    __slots__ = ("blanked", "digest")

    def __init__(self, blanked: dict[str, Any]) -> None:
        self.blanked = blanked
        self.digest: bytes | None = None

    def resolve(self) -> bytes:
        """The digest (computed on the first call)."""
        digest = self.digest
        if digest is None:
            digest = self.digest = digest_of(self.blanked)
        return digest


def defer_fingerprint(data: Any, remember: bool = False) -> bytes | PendingDigest:
    """:func:`tool_result_fingerprint` of ``data``, the digest deferred: ``UNBLANKABLE``, or
    a :class:`PendingDigest` of the blanked copy taken now.

    With ``remember``, the latest :data:`RECENT_DIGESTS` are remembered with ``data`` itself (by
    identity, for the process): an indexer folds a batch of events and then stores the same events'
    digests, and :func:`tool_result_fingerprint` of one of those objects takes its entry and
    resolves it instead of hashing again, so the fold's deferred digest and the stored one
    are computed once.  The events a log decodes to are never mutated, so the identity
    stands for the value (the entry holds the object, so its id is not reused while it is
    remembered); any other object (or one forgotten) is computed as usual.
    """
    try:
        blanked = blanked_tool_result(data)
    except NullishRead:
        return UNBLANKABLE
    pending = PendingDigest(blanked)
    if not remember:
        return pending  # no one in this process will ask for it by the object (a query's fold)
    recent = _recent
    recent[id(data)] = (data, pending)
    if len(recent) > RECENT_DIGESTS:
        try:
            recent.popitem(last=False)  # the oldest (each OrderedDict step is atomic under the GIL)
        except KeyError:
            pass  # another thread emptied it
    return pending


RECENT_DIGESTS: Final = 64
"""Deferred digests remembered by their data's identity: as many as a reader's batch has surface
events (it runs on across appended ones for :data:`indexer.pipeline.BATCH_EVENTS` events)."""
_recent: OrderedDict[int, tuple[Any, PendingDigest]] = OrderedDict()
