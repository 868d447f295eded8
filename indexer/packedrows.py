"""Packed chunk rows: one stored line standing for a run of ``assistant/chunk`` events.

The harness stores streamed text, reasoning and tool-call deltas as one row per
run (``text-chunks``, ``reasoning-chunks``, ``tool-call-chunks``: ``seq0``,
``time0`` and the members' fragments and time gaps); the reader validates a
row (:func:`check_row`) and expands it into its members (:func:`expand_row`,
:func:`row_members`), or hands it whole to a consumer that needs no member
dicts (:class:`PackedRow`, whose :meth:`~PackedRow.encode` writes the members'
JSON lines from the row).
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any, Final

import msgspec

from readmodel.core.accelerators import LINESCAN, accelerated
from readmodel.core.jsvalues import MAX_SAFE_INTEGER, is_non_negative_safe_integer, is_safe_integer
from readmodel.store.blocks import encode_events

from .logerrors import RecordError

_encode: Final = msgspec.json.Encoder().encode


ROW_TAGS: Final = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})


_ROW_ENVELOPE_KEYS: Final = frozenset({"type", "seq0", "time0", "data"})


_TEXT_ROW_KEYS: Final = frozenset({"turn", "step", "index", "dt", "texts"})


_TOOL_ROW_KEYS: Final = frozenset({"turn", "step", "index", "id", "dt", "args"})


_TOOL_ROW_KEYS_NAMED: Final = _TOOL_ROW_KEYS | {"name"}


# Exact types (bool is not a number here, a str subclass is not str); the set
# of an array's item types is one C-level pass.
_STR_ONLY: Final = frozenset({str})


_INT_ONLY: Final = frozenset({int})


_NUMBER_TYPES: Final = frozenset({int, float})


def _malformed_row(tag: str) -> RecordError:
    return RecordError(f"malformed {tag} storage row")


def expand_row(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Validate a packed chunk row and expand it into its ``assistant/chunk`` events.

    Raises :class:`RecordError` for any malformed row.  Each member is a fresh
    ``{type, seq, time, data: {turn, step, chunk}}`` dict (key order as the
    harness builds it); members share no mutable objects.
    """
    seq0, times = check_row(row)
    return row_members(row, seq0, times)


def check_row(row: dict[str, Any]) -> tuple[int, list[Any]]:
    """Validate a packed chunk row: its first member's seq and every member's time.

    Raises :class:`RecordError` for any malformed row (exactly when
    :func:`expand_row` does).  The times are exact ints whenever ``time0`` and
    every gap are.  A row in its common spelling (exact ints, strs and keys)
    is checked by ``indexer._linescan.check_row`` when built, the rest by
    :func:`check_row_python` (a property test holds them equal).
    """
    if _check_row_c is not None:
        checked = _check_row_c(row)
        if checked is not None:
            return checked  # type: ignore[no-any-return]
    return check_row_python(row)


def check_row_python(row: dict[str, Any]) -> tuple[int, list[Any]]:
    """:func:`check_row` in Python, whatever the row's spelling."""
    tag = row["type"]
    if row.keys() != _ROW_ENVELOPE_KEYS:
        raise _malformed_row(tag)
    seq0, time0, data = row["seq0"], row["time0"], row["data"]
    # Each check tries the common exact-int case inline before the general predicate.
    if not (type(seq0) is int and 0 <= seq0 <= MAX_SAFE_INTEGER or is_non_negative_safe_integer(seq0)):
        raise _malformed_row(tag)
    if not (type(time0) is int and -MAX_SAFE_INTEGER <= time0 <= MAX_SAFE_INTEGER or is_safe_integer(time0)):
        raise _malformed_row(tag)
    if type(data) is not dict:
        raise _malformed_row(tag)
    keys = data.keys()
    if tag == "tool-call-chunks":
        if not (keys == _TOOL_ROW_KEYS or keys == _TOOL_ROW_KEYS_NAMED):
            raise _malformed_row(tag)
        if type(data["id"]) is not str or ("name" in data and type(data["name"]) is not str):
            raise _malformed_row(tag)
        fragments = data["args"]
    else:
        if keys != _TEXT_ROW_KEYS:
            raise _malformed_row(tag)
        fragments = data["texts"]
    if not (type(data["turn"]) in _NUMBER_TYPES and type(data["step"]) in _NUMBER_TYPES and type(data["index"]) in _NUMBER_TYPES):
        raise _malformed_row(tag)
    if not (type(fragments) is list and fragments and set(map(type, fragments)) == _STR_ONLY):
        raise _malformed_row(tag)
    count = len(fragments)
    gaps = data["dt"]
    if type(gaps) is not list or len(gaps) != count - 1:
        raise _malformed_row(tag)
    last_seq = seq0 + count - 1
    if not (type(last_seq) is int and last_seq <= MAX_SAFE_INTEGER or is_safe_integer(last_seq)):
        raise _malformed_row(tag)
    return int(seq0), _row_times(tag, time0, gaps)


def row_members(row: dict[str, Any], seq0: int, times: list[Any]) -> list[dict[str, Any]]:
    """The members of a row :func:`check_row` accepted (``seq0`` and ``times`` its answer)."""
    tag, data = row["type"], row["data"]
    turn, step, index = data["turn"], data["step"], data["index"]
    if tag != "tool-call-chunks":
        kind = "text-delta" if tag == "text-chunks" else "reasoning-delta"
        return [
            {"type": "assistant/chunk", "seq": seq, "time": time, "data": {"turn": turn, "step": step, "chunk": {"type": kind, "index": index, "text": text}}}
            for seq, time, text in zip(range(seq0, seq0 + len(times)), times, data["texts"])
        ]
    seqs = range(seq0, seq0 + len(times))
    fragments = data["args"]
    call_id = data["id"]
    if "name" in data:
        name = data["name"]
        return [
            {
                "type": "assistant/chunk",
                "seq": seq,
                "time": time,
                "data": {"turn": turn, "step": step, "chunk": {"type": "tool-call-delta", "index": index, "id": call_id, "name": name, "argumentsDelta": args}},
            }
            for seq, time, args in zip(seqs, times, fragments)
        ]
    return [
        {
            "type": "assistant/chunk",
            "seq": seq,
            "time": time,
            "data": {"turn": turn, "step": step, "chunk": {"type": "tool-call-delta", "index": index, "id": call_id, "argumentsDelta": args}},
        }
        for seq, time, args in zip(seqs, times, fragments)
    ]


CHUNK_TYPE: Final = "assistant/chunk"
"""The type of every member of a packed row."""


_ROW_CHUNK_KINDS: Final = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta"}


_MEMBER_START: Final = b'{"type":"assistant/chunk","seq":'


_MEMBER_END: Final = b"}}}\n"


_encode_member_lines: Final = msgspec.json.Encoder().encode_lines


class PackedRow:
    """A packed chunk row accepted whole, its members not built (see :attr:`Pipeline.packed_rows`).

    ``first_seq`` and ``times`` are :func:`check_row`'s answer, the times
    exact ints (a row with other times is expanded instead).  A consumer
    that only counts the members, keeps their times and stores their JSON
    lines (the indexer's projector) needs no member dicts: :meth:`encode`
    writes the lines from the row.  :meth:`members` builds them when needed.
    """

    __slots__ = ("row", "first_seq", "times")

    def __init__(self, row: dict[str, Any], first_seq: int, times: list[int]) -> None:
        self.row = row
        self.first_seq = first_seq
        self.times = times

    def members(self) -> list[dict[str, Any]]:
        """The members, as :func:`expand_row` returns them."""
        return row_members(self.row, self.first_seq, self.times)

    def encode(self) -> bytes | None:
        """The members' compact JSON, one LF-terminated line each: exactly msgspec's encoding of
        :meth:`members` (``readmodel.store.blocks.encode_events``), in a few C-level passes;
        ``None`` when msgspec cannot encode them (a lone surrogate, which the caller's
        fallback encodes member by member).

        Every line is the same but for its seq, its time and its fragment: the
        seqs and times are encoded together as ``[seq,time]`` lines and spliced
        into the members' common prefix by byte replacements (those lines hold
        only digits, ``-``, ``,`` and brackets), the fragments as JSON strings
        by one encoder call (a JSON string holds no raw LF), and the pieces
        joined by one interleaving slice assignment per kind.
        """
        row = self.row
        data = row["data"]
        tag = row["type"]
        if tag == "tool-call-chunks":
            fragments = data["args"]
            chunk = {"type": "tool-call-delta", "index": data["index"], "id": data["id"]}
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = ""
        else:
            fragments = data["texts"]
            chunk = {"type": _ROW_CHUNK_KINDS[tag], "index": data["index"], "text": ""}
        try:
            # ',"data":{"turn":…,"step":…,"chunk":{…,"text":' without the empty fragment's '""}}'.
            head = b',"data":' + _encode({"turn": data["turn"], "step": data["step"], "chunk": chunk})[:-4]
            text_lines = _encode_member_lines(fragments)
        except UnicodeEncodeError:
            return None
        if _member_lines is not None:
            # The same bytes written member by member in C (indexer/_linescan.c), when it takes them.
            lines: bytes | None = _member_lines(head, text_lines, self.first_seq, self.times)
            if lines is not None:
                return lines
        return self._interleaved(head, text_lines)

    def lines(self) -> bytes:
        """The members' LF-terminated raw lines: :meth:`encode`, or (a lone surrogate)
        ``encode_events`` of the members one by one."""
        lines = self.encode()
        return lines if lines is not None else encode_events(self.members())

    def _interleaved(self, head: bytes, text_lines: bytes) -> bytes:
        """:meth:`encode`'s lines from ``head`` and the fragments' JSON lines, in Python."""
        count = len(self.times)
        texts = text_lines.split(b"\n")
        first = self.first_seq
        keys = _encode_member_lines(list(zip(range(first, first + count), self.times)))
        starts = keys.replace(b",", b',"time":').replace(b"[", _MEMBER_START).replace(b"]", head).split(b"\n")
        starts.pop()  # the empty piece after each final LF
        texts.pop()
        pieces = [_MEMBER_END] * (3 * count)
        pieces[0::3] = starts
        pieces[1::3] = texts
        return b"".join(pieces)


_member_lines: Final = accelerated(LINESCAN, "member_lines")
_check_row_c: Final = accelerated(LINESCAN, "check_row")


def _row_times(tag: str, time0: Any, gaps: list[Any]) -> list[Any]:
    """Member times: ``time0`` plus each running sum of the gaps, all safe integers (the gaps too)."""
    if type(time0) is int and (not gaps or set(map(type, gaps)) == _INT_ONLY):
        times = list(accumulate(gaps, initial=time0))
        if -MAX_SAFE_INTEGER <= min(times) and max(times) <= MAX_SAFE_INTEGER:
            # Safe sums do not make safe gaps: 1 + -2**53 is safe, -2**53 is not.
            if not gaps or (-MAX_SAFE_INTEGER <= min(gaps) and max(gaps) <= MAX_SAFE_INTEGER):
                return times
    # Rare: float-typed integral values (1.0), an unsafe gap, or a sum leaving the safe range.
    if not all(is_safe_integer(gap) for gap in gaps):
        raise _malformed_row(tag)
    times = [time0]
    now = time0
    for gap in gaps:
        now = now + gap
        if not is_safe_integer(now):
            raise _malformed_row(tag)
        times.append(now)
    return times
