"""JS ``localeCompare`` order (query-spec §1.5) and the record orders built on it."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from readmodel.projection.collation import (
    locale_compare,
    locale_compare_key,
    sort_records_newest_first,
    sort_records_oldest_first,
)
from readmodel.store.schema import id_sort_key
from readmodel.core.vocabulary import SessionRecord
from tests.corpus import golden
from tests.projection.surface_builders import record

#: Strings in the order Node 20's ``a.localeCompare(b)`` (ICU, en-US) sorts them;
#: no two of them compare equal there.  Captured once from Node and frozen here.
ICU_ORDER: list[str] = [
    "_x", "-x", ".", "..", "~tilde~id", "1", "\u2460", "\xb9", "10", "1\uff10", "\uff110",
    "11111111-1111-1111-1111-111111111111", "6f31f323-b7af-465b-a778-4f0f3c9014ac",
    "6F31F323-B7AF-465B-A778-4F0F3C9014AC", "6f31f323b7af465ba7784f0f3c9014ac", "a", "A", "\xe1",
    "\xe0", "\xe2", "\xe5", "\xe4", "\xe3", "\u0101", "a 1", "a_1", "a-1", "a1", "A1", "aaaa",
    "aaaA", "AAAA", "ab", "aB", "Ab", "AB", "a\u0300b", "\xc0B", "aether", "Aether", "\xe6ther",
    "b", "B", "d", "\u0111", "\xf0", "e", "emoji", "emoji-\U0001f98a", "emoji-\U0001f600",
    "emoji-x", "fi", "\ufb01", "FI", "i", "I", "\u0130", "\u0131", "j", "l", "\u0142", "m", "n",
    "naive", "na\xefve", "\u014b", "o", "oe", "OE", "\u0153", "\u0152", "of", "ore", "\xf4re",
    "\xf8re", "resume", "r\xe9sum\xe9", "R\xe9sum\xe9", "r\xe8sum\xe9", "sess/with/slash",
    "session 1", "session_1", "session-1", "Session-1", "session-10", "session-2", "session.1",
    "space id", "space-id", "spaceid", "strasse", "STRASSE", "stra\xdfe", "Stra\xdfe", "tm", "TM",
    "\u2122", "unicode", "\xfcn\xefc\xf6d\xe9-\u4f1a\u8bdd", "upper-lower", "UPPER-lower",
    "x\x09y", "x y", "x\xa0y", "x_y", "x-y", "x\u2013y", "x\u2014y", "x,y", "x;y", "x:y", "x!y",
    "x?y", "x\u2026y", "x.y", "x'y", "x\u2019y", "x\x22y", "x(y", "x)y", "x[y", "x]y", "x{y",
    "x}y", "x@y", "x*y", "x/y", "x\x5cy", "x&y", "x#y", "x%y", "x`y", "x^y", "x\xa9y", "x\u2192y",
    "x+y", "x\xd7y", "x<y", "x=y", "x>y", "x|y", "x~y", "x$y", "x\xa3y", "x\u20acy", "x0y", "z",
    "zebra", "Zebra", "\xfe", "\u03b6", "\u0436", "\u0416", "\ud55c\uad6d", "\u3041", "\u3042",
    "\u30a2", "\uff71", "\u4f1a", "\u4f1a\u8bdd", "\u8bdd",
]


class TestLocaleCompare:
    def test_the_spec_example(self) -> None:
        assert sorted(["b", "B", "a", "A", "1", "-x", "_x"], key=locale_compare_key) == [
            "_x", "-x", "1", "a", "A", "b", "B"
        ]

    def test_printable_ascii_in_icu_root_order(self) -> None:
        expected = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789" + "".join(
            c + c.upper() for c in "abcdefghijklmnopqrstuvwxyz"
        )
        assert "".join(sorted(map(chr, range(0x20, 0x7F)), key=locale_compare_key)) == expected

    @pytest.mark.parametrize("seed", range(5))
    def test_matches_icu_on_the_frozen_sample(self, seed: int) -> None:
        shuffled = list(ICU_ORDER)
        random.Random(seed).shuffle(shuffled)
        assert sorted(shuffled, key=locale_compare_key) == ICU_ORDER

    def test_pairwise_signs(self) -> None:
        for left, right in zip(ICU_ORDER, ICU_ORDER[1:]):
            assert locale_compare(left, right) == -1
            assert locale_compare(right, left) == 1

    @pytest.mark.parametrize(
        ("left", "right"),
        [
            ("a", "a\u0000"),  # controls are ignorable
            ("ab", "a\u200bb"),  # zero width space
            ("\u00e9", "e\u0301"),  # canonical equivalents
            ("2", "\u0662"),  # digits of any script with the same value
            ("\u263a", "\u263a\ufe0f"),  # variation selector
        ],
    )
    def test_icu_equal_strings_compare_equal(self, left: str, right: str) -> None:
        assert locale_compare(left, right) == 0
        assert locale_compare_key(left) == locale_compare_key(right)

    def test_levels_case_after_accent_after_letter(self) -> None:
        # a primary difference anywhere beats an accent difference earlier in the string
        assert locale_compare("\u00e1b", "ac") == -1
        # an accent difference anywhere beats a case difference earlier in the string
        assert locale_compare("Ab", "ab\u0301") == -1
        assert locale_compare("ab", "Ab") == -1

    def test_lone_surrogates_and_astral_text_are_total(self) -> None:
        values = ["\ud800", "\udc00", "a\ud83e", "\U0001f98a", ""]
        assert sorted(values, key=locale_compare_key) == ["", "\U0001f98a", "a\ud83e", "\ud800", "\udc00"]  # as ICU
        for value in values:
            assert locale_compare(value, value) == 0


class TestRecordOrders:
    def test_newest_first_with_locale_compare_ties(self) -> None:
        records = [record("b", 5), record("older", 1), record("B", 5), record("_x", 5), record("newest", 9),
                   record("a", 5)]
        assert [r.header["id"] for r in sort_records_newest_first(records)] == [
            "newest", "_x", "a", "b", "B", "older"
        ]

    def test_t_ex_12_listing_order(self) -> None:
        records = [record("older", 1), record("z", 2), record("a", 2)]
        assert [r.header["id"] for r in sort_records_newest_first(records)] == ["a", "z", "older"]

    def test_stable_for_collation_equal_ids(self) -> None:
        first, second = record("a\u200b", 3, live=False, persisted=True), record("a", 3)
        assert sort_records_newest_first([first, second]) == [first, second]
        assert sort_records_newest_first([second, first]) == [second, first]

    def test_oldest_first_for_lineage_children(self) -> None:
        records = [record("b", 4), record("a", 4), record("older", 3)]
        assert [r.header["id"] for r in sort_records_oldest_first(records)] == ["older", "a", "b"]

    def test_sorting_returns_the_same_objects(self) -> None:
        records = [record("x", 1), record("y", 2)]
        assert {id(r) for r in sort_records_newest_first(records)} == {id(r) for r in records}

    def test_non_numeric_created_at_is_refused(self) -> None:
        with pytest.raises(TypeError):
            sort_records_newest_first([record("x", "1"), record("y", 2)])

    @pytest.mark.parametrize("synthetic", [False, True], ids=["corpus", "synthetic"])
    def test_reproduces_the_reference_listing_order(self, synthetic: bool) -> None:
        listed: list[dict[str, Any]] = golden("list-sessions", synthetic)["sessions"]
        records = [SessionRecord(header=s["header"], live=s["live"], persisted=s["persisted"]) for s in listed]
        expected = [r.header["id"] for r in records]
        for seed in range(3):
            shuffled = list(records)
            random.Random(seed).shuffle(shuffled)
            assert [r.header["id"] for r in sort_records_newest_first(shuffled)] == expected


@given(st.text(max_size=40), st.text(max_size=40))
def test_the_index_sort_key_orders_and_equates_ids_as_the_collation_key_does(left: str, right: str) -> None:
    # id_sort_key concatenates cached per-character weights in an order-preserving
    # variable-length encoding (schema 0016); byte order must be the collation order.
    keys, collated = (id_sort_key(left), id_sort_key(right)), (locale_compare_key(left), locale_compare_key(right))
    assert (keys[0] > keys[1]) - (keys[0] < keys[1]) == (collated[0] > collated[1]) - (collated[0] < collated[1])


@given(st.text(max_size=12), st.text(alphabet="0123456789abcdef-", max_size=12))
def test_a_prefix_level_sorts_first_in_the_index_sort_key(text: str, suffix: str) -> None:
    longer = text + suffix
    assert (id_sort_key(text) <= id_sort_key(longer)) == (locale_compare_key(text) <= locale_compare_key(longer))


def test_a_uuid_session_id_has_a_compact_index_sort_key() -> None:
    # Kept twice per session (the sessions table and its covering listing index).
    assert len(id_sort_key("250e7b34-a4aa-47b4-9e63-97d4b96245d3")) <= 160
