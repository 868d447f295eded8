"""The rows a PostgreSQL index stores per document: term hashes, postings and gram keys."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from readmodel.projection.grams import LONG_CHARS, LONG_MARK_KEY, document_grams, document_gram_keys, document_trigrams, gram_key
from readmodel.search.serverterms import document_rows
from readmodel.search.tokens import Tokenizer, term_hash


def test_term_hash_is_a_pinned_signed_64_bit_value() -> None:
    # Pinned: a PostgreSQL index written by one release is read by the next.
    assert term_hash(b"hello") == 9022087748821825191
    assert term_hash(b"") == -5426141060434712860
    assert term_hash("é".encode()[:1]) != term_hash("é".encode())  # a cut UTF-8 sequence is its own term


@given(st.text(max_size=300))
def test_postings_rows_hold_every_position_of_every_term(text: str) -> None:
    tokenizer = Tokenizer()
    try:
        tokens = tokenizer.tokens(text)
        entries, rows = document_rows(tokenizer, 7, text)
    finally:
        tokenizer.close()
    assert {entries[key] for key, *_ in rows} == set(tokens)
    for key, docid, tf, positions in rows:
        assert docid == 7 and tf == len(positions) and [tokens[p] for p in positions] == [entries[key]] * tf
    assert sum(tf for _key, _doc, tf, _pos in rows) == len(tokens)


@given(st.text(max_size=200))
def test_gram_keys_are_the_keys_of_the_document_grams(text: str) -> None:
    assert set(document_gram_keys(text)) == {gram_key(gram) for gram in document_grams(text)}


def test_a_long_document_has_its_trigrams_and_the_long_mark() -> None:
    text = "Réunion du comité " * (LONG_CHARS // 10)
    keys = set(document_gram_keys(text))
    assert LONG_MARK_KEY in keys and all(key < 2**63 for key in keys)
    assert keys == {gram_key(g) for g in document_grams(text)} | {gram_key(g) for g in document_trigrams(text)} | {LONG_MARK_KEY}
