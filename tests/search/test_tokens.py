"""Tokens computed on the indexing host equal what FTS5's own index holds.

A PostgreSQL index stores terms the indexer computed (readmodel.search.tokens);
they must be exactly the SQLite index's: the same tokenizer and options, the
same order (positions), the same 32,768-byte cut.  The oracle is FTS5 itself:
the ``fts5vocab`` instance table over an index the real indexer built (every
document of the shared and synthetic corpora), and over the index's own FTS5
DDL for generated text.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from readmodel.search import accelerator
from readmodel.search.tokens import MAX_TOKEN_BYTES, TOKENIZE, Tokenizer
from readmodel.store.schema import FTS_DDL
from tests.backends import SQLITE
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT, require_corpus
from tests import indexdb


def held_by_fts5(conn: sqlite3.Connection) -> dict[int, list[bytes]]:
    """Every text's terms in position order, by text id, read from FTS5's index (``texts_fts``)."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.held USING fts5vocab(main, texts_fts, instance)")
    instances: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for doc, column, offset, term in conn.execute('SELECT "doc", "col", "offset", CAST("term" AS BLOB) FROM temp.held'):
        assert column == "text"
        instances[doc].append((offset, term))
    held = {}
    for doc, found in instances.items():
        found.sort()
        assert [offset for offset, _ in found] == list(range(len(found)))  # one term per position
        held[doc] = [term for _, term in found]
    return held


@pytest.fixture(scope="module", params=["real", "synthetic"])
def corpus_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    require_corpus()
    root = ZSTD_ROOT if request.param == "real" else SYNTHETIC_ROOT
    return SQLITE.build(root, SQLITE.database(tmp_path_factory.mktemp("tokens"), "index"))


def tokenizers() -> list[Tokenizer]:
    found = [Tokenizer(accelerated=False)]
    if accelerator.available():
        found.append(Tokenizer(accelerated=True))
    return found


def test_the_tokenizer_is_the_index_ddls() -> None:
    assert f"tokenize='{TOKENIZE}'" in FTS_DDL and TOKENIZE == "unicode61"


def test_tokens_equal_fts5s_index_on_every_corpus_document(corpus_index: str) -> None:
    conn = indexdb.connect(corpus_index)
    held = held_by_fts5(conn)
    sql = 'SELECT d."docid", d."text", r."text_id" FROM "documents" d JOIN "document_rows" r ON r."docid" = d."docid" ORDER BY d."docid"'
    documents = conn.execute(sql).fetchall()
    assert len(documents) > 500
    fast, *_ = reversed(tokenizers())
    for docid, text, text_id in documents:
        assert fast.tokens(text) == held.get(text_id, []), docid
    # The scratch-table path (no accelerator) on a sample: the same answers.
    slow = Tokenizer(accelerated=False)
    for docid, text, text_id in documents[::25]:
        assert slow.tokens(text) == held.get(text_id, []), docid


def fts5_oracle(text: str) -> list[bytes]:
    """The terms the index's own FTS5 DDL stores for one document."""
    conn = indexdb.connect(":memory:")
    conn.execute('CREATE TABLE "text_contents" ("id" INTEGER PRIMARY KEY, "text" TEXT NOT NULL)')
    conn.execute(FTS_DDL)
    conn.execute('INSERT INTO "text_contents" VALUES (7, ?)', (text,))
    conn.execute('INSERT INTO "texts_fts" ("rowid", "text") VALUES (7, ?)', (text,))
    return held_by_fts5(conn).get(7, [])


FRAGMENTS = [
    "foo-bar", "3.14", "v1.2.3", "https://example.com/a/b?c=d&e=f#g", "user@example.org", "Ünïcödé façade naïve",
    "ÅNGSTRÖM", "日本語のテキスト", "中文分词", "한국어", "🙂 👍🏽 🇫🇷", "emoji🙂inside", "tab\tand\nnewline",
    "under_score", "CamelCase", "ǅ ǆ ﬁ", "Ωmega", "x\u0301y", "\u200bzero\u200bwidth", "NUL\x00byte", "İstanbul ß",
]


@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=24)), max_size=12).map(" ".join))
def test_tokens_of_any_text_equal_fts5s_own(text: str) -> None:
    expected = fts5_oracle(text)
    for tokenizer in tokenizers():
        assert tokenizer.tokens(text) == expected


@pytest.mark.parametrize("text", ["a" * 40_000, "a" + "é" * 20_000, "x " + "日" * 12_000 + " y", ""])
def test_long_tokens_are_cut_where_fts5_cuts_them(text: str) -> None:
    expected = fts5_oracle(text)
    assert all(len(term) <= MAX_TOKEN_BYTES for term in expected)
    for tokenizer in tokenizers():
        assert tokenizer.tokens(text) == expected
    if text.startswith("a" * 100):
        assert len(expected[0]) == MAX_TOKEN_BYTES


def test_the_accelerated_path_is_there_when_the_accelerator_is(tmp_path: Path) -> None:
    assert Tokenizer().accelerated == accelerator.available()


WORDS = ["alpha", "beta", "Alpha", "ALPHA-beta", "gamma", "3.14", "日本", "naïve", "naive"]


def fts5_spans(document: str, query: str) -> int:
    """highlight()'s span count for the query as a phrase (sessionq's match expression), 0 without a match."""
    from readmodel.search.requests import match_expression

    conn = indexdb.connect(":memory:")
    conn.execute('CREATE TABLE "text_contents" ("id" INTEGER PRIMARY KEY, "text" TEXT NOT NULL)')
    conn.execute(FTS_DDL)
    conn.execute('INSERT INTO "text_contents" VALUES (1, ?)', (document,))
    conn.execute('INSERT INTO "texts_fts" ("rowid", "text") VALUES (1, ?)', (document,))
    row = conn.execute(
        'SELECT highlight("texts_fts", 0, char(1), char(2)) FROM "texts_fts" WHERE "texts_fts" MATCH ?', (match_expression(query),)
    ).fetchone()
    return 0 if row is None else row[0].count("\x01")


@given(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=30).map(" ".join),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
)
def test_spans_from_host_tokens_equal_highlights_and_never_exceed_the_smallest_tf(document: str, query: str) -> None:
    from readmodel.search.tokens import phrase_spans, postings

    tokenizer = tokenizers()[-1]
    positions = postings(tokenizer.tokens(document))
    phrase = tokenizer.tokens(query)
    spans = phrase_spans(phrase, positions)
    assert spans == fts5_spans(document, query)
    assert spans <= min(len(positions.get(term, ())) for term in phrase)  # the top-k pruning bound
