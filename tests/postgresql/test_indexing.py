"""`sessionq index --db postgresql://…`: the indexer writes a PostgreSQL index equal to a SQLite one.

Every table row for row (sessions keyed by id, documents and events by
(session id, seq): sids may differ), raw lines decoded, and the search rows:
each (term, document)'s positions equal FTS5's own ``fts5vocab`` instance
rows of the SQLite index built from the same root, and each document's gram
keys equal its ``document_grams`` words.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from indexer.cli import main
from tests.corpus import SYNTHETIC_ROOT, ZSTD_ROOT
from tests.indexstate import diff_states, index_state
from tests.postgresql.state import pg_state, sqlite_columns, sqlite_search_rows

COMMON = ("sessions", "events", "raw_events", "event_links", "documents", "layout_problems", "document_hashes", "consistency")


def index(root: Path, db: str, source: str = "host-a", *extra: str) -> str:
    result = CliRunner().invoke(main, ["index", "--once", "--root", str(root), "--db", db, "--source", source, "--workers", "0", *extra])
    assert result.exit_code == 0, result.output
    return result.output


def assert_same_index(sqlite_db: Path, url: str) -> None:
    want = index_state(str(sqlite_db))
    want.update(sqlite_search_rows(str(sqlite_db)))
    have = pg_state(url, sqlite_columns(str(sqlite_db)))
    assert want["consistency"] == [] and have["consistency"] == []
    sections = (*COMMON, "postings", "gram_keys")
    differences = diff_states({k: want[k] for k in sections}, {k: have[k] for k in sections})
    assert differences == []
    assert want["sessions"], "the corpus indexed something"


@pytest.mark.parametrize("root", [ZSTD_ROOT, SYNTHETIC_ROOT], ids=["shared", "synthetic"])
def test_a_postgresql_index_equals_the_sqlite_index_of_the_same_root_row_for_row(root: Path, postgres_url: str, tmp_path: Path) -> None:
    sqlite_db = tmp_path / "index.db"
    index(root, str(sqlite_db))
    output = index(root, postgres_url)
    assert make_url(postgres_url).password not in output and "***" in output  # the summary masks the password
    assert_same_index(sqlite_db, postgres_url)
