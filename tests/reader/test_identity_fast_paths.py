"""Per-session identity work on one C-level pass equals the character-by-character rules."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from indexer.layout import _SAFE_UNITS, _escape_unit, encode_segment
from readmodel.core.jsvalues import utf16_units
from readmodel.store.rowkeys import _char_key_parts, id_sort_key

_IDS = st.text(min_size=1, max_size=40) | st.text(alphabet="abcXYZ019._-~/ é\u0301", min_size=1, max_size=40)


def _segment_reference(session_id: str) -> str:
    if session_id == ".":
        return "~002E"
    if session_id == "..":
        return "~002E~002E"
    if session_id.isascii() and all(ord(ch) in _SAFE_UNITS for ch in session_id):
        return session_id
    return "".join(chr(unit) if unit in _SAFE_UNITS else _escape_unit(unit) for unit in utf16_units(session_id))


def _sort_key_reference(session_id: str) -> bytes:
    parts = [_char_key_parts(char) for char in unicodedata.normalize("NFD", session_id)]
    return b"".join(b"".join(part[level] for part in parts) + b"\0" for level in range(3))


@given(_IDS)
def test_a_segment_equals_the_unit_by_unit_escape(session_id: str) -> None:
    assert encode_segment(session_id) == _segment_reference(session_id)


def test_a_trailing_newline_is_escaped_not_taken_as_safe() -> None:
    assert encode_segment("abc\n") == "abc~000A"


@given(st.text(max_size=40) | _IDS)
def test_an_id_sort_key_equals_the_per_level_joins(session_id: str) -> None:
    assert id_sort_key(session_id) == _sort_key_reference(session_id)
