"""The substring gram scheme: every document a query matches holds every gram of the query."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from readmodel.core.jsvalues import JS_WHITESPACE
from readmodel.projection import grams
from readmodel.projection.filters import compile_text_filter, fold_classes

# Code points where case folding is subtle (JS iu: simple folding only), CJK,
# emoji (astral), combining marks, punctuation and every JS whitespace.
TRICKY = "kKKsSſσςΣİiIıßẞǅǄǆΐΐﬅﬆµΜμ" + "数据库索引日本語検索한국어" + "🎉✅😀" + "é\u0301" + "->:+/._()[]{}\\*?$^|"
ALPHABET = st.sampled_from(list(TRICKY + "abcdexyzABCXYZ0129 " + JS_WHITESPACE))
TEXTS = st.text(alphabet=ALPHABET, max_size=60)


def typed_variant(piece: str, rng: random.Random) -> str:
    """``piece`` as a user might type it: other case-fold class members, other whitespace runs."""
    classes = {member: sorted(members) for members in fold_classes().values() for member in members}
    out = []
    for char in piece:
        if char in JS_WHITESPACE:
            out.append(rng.choice([" ", "\t", "\u3000", "  ", "\n "]))
        elif char in classes and rng.random() < 0.6:
            out.append(rng.choice(classes[char]))
        else:
            out.append(char)
    return "".join(out)


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, start=st.integers(0, 60), length=st.integers(1, 12), seed=st.integers(0, 2**32))
def test_a_matching_document_holds_every_gram_of_the_query(text: str, start: int, length: int, seed: int) -> None:
    query = typed_variant(text[start : start + length], random.Random(seed))
    if not query.strip(JS_WHITESPACE):
        return
    if compile_text_filter(query).search(text) is None:
        return  # a variant may fold differently (e.g. "ß" is not "ss"): only matches matter
    assert set(grams.query_grams(query)) <= grams.document_grams(text)


@settings(max_examples=100, deadline=None)
@given(text=TEXTS, query=st.text(alphabet=ALPHABET, min_size=1, max_size=6))
def test_any_matching_query_has_its_grams_in_the_document(text: str, query: str) -> None:
    if query.strip(JS_WHITESPACE) and compile_text_filter(query).search(text) is not None:
        assert set(grams.query_grams(query)) <= grams.document_grams(text)


def test_fold_maps_each_simple_fold_class_to_one_member_and_keeps_length() -> None:
    for key, members in fold_classes().items():
        assert {grams.fold(member) for member in members} == {key}
    assert grams.fold("Straße ſ K İ Σας") == "straße s k İ σασ"
    assert grams.fold("a\u3000b\u2028c\ufeffd\te") == "a b c d e"


def test_the_span_skipping_walk_finds_every_code_point_that_folds() -> None:
    """``fold_classes`` visits only code points whose casefold differs (found span by span): the same
    ones an exhaustive walk of every code point below the cased limit finds, in the same order."""
    from readmodel.projection import filters

    exhaustive = [chr(code) for code in range(filters._CASED_LIMIT) if chr(code).casefold() != chr(code)]
    assert list(filters._folding_chars()) == exhaustive
    assert {chr(code) for code in range(filters._CASED_LIMIT) if filters._simple_fold(chr(code)) != chr(code)} <= set(exhaustive)


def test_the_ascii_shortcut_folds_as_the_table_does() -> None:
    table = grams._fold_map()
    for code in range(128):
        char = chr(code)
        assert grams.fold(char) == char.translate(table), repr(char)


def test_query_grams_of_short_and_spaced_queries() -> None:
    assert grams.query_grams("a") == [] and grams.query_grams(" 7 ") == [] and grams.query_grams("-") == []
    assert grams.query_grams("库") == ["库"] and grams.query_grams("🎉") == ["🎉"] and grams.query_grams("É") == ["é"]
    assert grams.query_grams("->") == ["->"]
    assert grams.query_grams(" Tear\t\u3000Down ") == ["te", "ea", "ar", "r ", " d", "do", "ow", "wn"]
    assert grams.query_grams("aaaa") == ["aa"]


def test_gram_keys_are_stable_and_unigrams_never_collide_with_bigrams() -> None:
    assert grams.gram_key("库") == 0x5E93 and grams.gram_key("🎉") == 0x1F389
    assert grams.gram_key("ab") == 0x61 << 21 | 0x62 and grams.gram_token("ab") == "c200062"
    assert min(grams.gram_key(" !"), grams.gram_key("\x01\x00")) > 0x10FFFF


def test_document_grams_leave_out_the_double_space_and_keep_non_ascii_code_points() -> None:
    assert grams.document_grams("") == set() and grams.document_grams(" \t ") == set()
    assert grams.document_grams("ab  c") == {" a", "ab", "b ", " c", "c "}
    assert grams.document_grams("数据") == {" 数", "数据", "据 ", "数", "据"}


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(TEXTS, st.text(max_size=80)))
def test_document_words_are_the_grams_rendered(text: str) -> None:
    text = text.encode("utf-8", "replace").decode("utf-8")  # stored documents hold no lone surrogates
    expected = {grams.gram_token(gram) for gram in grams.document_grams(text)}
    assert set(grams.python_document_tokens(text).split()) == expected
    assert set(grams.document_tokens(text).split()) == expected


_accelerator = grams._accelerator()


@pytest.mark.skipif(_accelerator is None, reason="the C gram extractor is not built")
@settings(max_examples=150, deadline=None)
@given(text=st.one_of(TEXTS, st.text(max_size=200)))
def test_the_c_extractor_gives_the_python_words(text: str) -> None:
    assert _accelerator is not None
    text = text.encode("utf-8", "replace").decode("utf-8")
    assert set(_accelerator.document_tokens(text).split()) == set(grams._python_bigram_tokens(text).split())
    assert set(_accelerator.trigram_tokens(text).split()) == {grams.gram_token(gram) for gram in grams.document_trigrams(text)}
    long = text * (grams.LONG_CHARS // max(len(text), 1) + 1)  # a long document: trigrams and the mark too
    assert set(grams.document_tokens(long).split()) == set(grams.python_document_tokens(long).split())


@pytest.mark.skipif(_accelerator is None, reason="the C gram extractor is not built")
@settings(max_examples=40, deadline=None)
@given(pieces=st.lists(st.one_of(TEXTS, st.text(max_size=60), st.sampled_from(["  ", "\t\n", "库", "É", "🎉", "\x7f\x80"])), min_size=1, max_size=12), seed=st.integers(0, 2**32))
def test_the_c_trigrams_of_very_long_documents_are_the_python_ones(pieces: list[str], seed: int) -> None:
    """Over 16,384 code points the C side keeps ASCII trigrams in a bit map: the same words, twice in a row."""
    assert _accelerator is not None
    rng = random.Random(seed)
    text = "".join(rng.choice(pieces) for _ in range(4000)).encode("utf-8", "replace").decode("utf-8")
    text = (text * (17_000 // max(len(text), 1) + 1))[: 17_000 + rng.randrange(3)]
    expected = {grams.gram_token(gram) for gram in grams.document_trigrams(text)}
    first = _accelerator.trigram_tokens(text).split()
    assert len(first) == len(set(first)) and set(first) == expected
    assert set(_accelerator.trigram_tokens(text).split()) == expected  # the map was left empty
    assert set(_accelerator.trigram_tokens(text[:100]).split()) == {grams.gram_token(gram) for gram in grams.document_trigrams(text[:100])}


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, start=st.integers(0, 60), length=st.integers(3, 12), seed=st.integers(0, 2**32))
def test_a_matching_long_document_holds_every_trigram_of_the_query(text: str, start: int, length: int, seed: int) -> None:
    query = typed_variant(text[start : start + length], random.Random(seed))
    if not query.strip(JS_WHITESPACE) or compile_text_filter(query).search(text) is None:
        return
    assert set(grams.query_trigrams(query)) <= grams.document_trigrams(text)


def test_long_documents_carry_trigrams_and_the_mark() -> None:
    short, long = "tearDown " * 10, "tearDown  \t " * (grams.LONG_CHARS // 10)
    assert grams.LONG_MARK not in grams.document_tokens(short).split()
    words = set(grams.document_tokens(long).split())
    assert grams.LONG_MARK in words and grams.gram_token("ard") in words and grams.gram_token("n t") in words
    assert grams.gram_key("ard") == 0x61 << 42 | 0x72 << 21 | 0x64
    assert grams.query_trigrams("Tear\t Down") == ["tea", "ear", "ar ", "r d", " do", "dow", "own"]
    assert grams.query_trigrams("ab") == []
