"""The index's row keys and codes, without SQLAlchemy.

What rows are keyed and coded by — surface codes, document rowids, the
collation key of session ids, the longest link span — is needed by whoever
shapes rows (the indexer, its preparation workers) and by whoever reads them.
The schema itself (:mod:`readmodel.store.schema`) re-exports these; workers import
this module alone, which keeps SQLAlchemy out of their start-up.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Final

from readmodel.projection.collation import locale_compare_key

SURFACE_CODES: Final = {"log-only": 0, "current": 1, "shadowed": 2}
SURFACE_NAMES: Final = ("log-only", "current", "shadowed")

MAX_LINK_SPAN: Final = 1024
"""The longest run of consecutive sources one ``event_links`` row covers."""

_SPLIT_BITS: Final = 24
"""Where :func:`id_sort_key` splits a primary weight in two numbers."""


def docid(sid: int, seq: int) -> int:
    """The document rowid of an event: session and seq packed into one integer."""
    return (sid << 32) | seq


def id_sort_key(session_id: str) -> bytes:
    """Bytes that sort like the reference's ``localeCompare`` on session ids.

    The three collation levels are concatenated, each ended by a zero byte;
    each weight is stored as numbers + 1 in :func:`_ordered_varint`, whose
    encodings sort as the numbers do and never start with zero, so a shorter
    level that is a prefix of a longer one sorts first, as tuples do.  A
    primary weight is stored as the pair (high bits, low :data:`_SPLIT_BITS`
    bits), which sorts as the weight does and takes two bytes for most
    characters (primaries are a slot in the high bits and a rank in it).
    (Schema 0016: before it each weight took five bytes, and a 36-character id
    555 bytes, kept twice — in ``sessions`` and its listing index.)
    """
    parts = list(map(_char_key_parts, unicodedata.normalize("NFD", session_id)))
    if not parts:
        return b"\0\0\0"
    # The levels' weights, regrouped per level by one zip (every session row computes this key).
    primary, secondary, tertiary = zip(*parts)
    return b"".join(primary) + b"\0" + b"".join(secondary) + b"\0" + b"".join(tertiary) + b"\0"


def _ordered_varint(value: int) -> bytes:
    """An order-preserving, prefix-free encoding of ``value >= 1``.

    Below 0xF0 one byte; otherwise a byte ``0xF0 + n`` then the ``n`` big-endian
    bytes of the value (no leading zero byte).  A longer encoding has a larger
    first byte and a larger value, and equal lengths compare byte by byte.
    """
    if value < 0xF0:
        return bytes((value,))
    width = (value.bit_length() + 7) // 8
    return bytes((0xF0 + width,)) + value.to_bytes(width, "big")


@lru_cache(maxsize=65536)
def _char_key_parts(char: str) -> tuple[bytes, bytes, bytes]:
    """One (NFD) character's encoded weights per level: the key is their per-level concatenation."""
    primaries, secondaries, tertiaries = locale_compare_key(char)
    mask = (1 << _SPLIT_BITS) - 1
    return (
        b"".join(_ordered_varint((weight >> _SPLIT_BITS) + 1) + _ordered_varint((weight & mask) + 1) for weight in primaries),
        b"".join(_ordered_varint(weight + 1) for weight in secondaries),
        b"".join(_ordered_varint(weight + 1) for weight in tertiaries),
    )
