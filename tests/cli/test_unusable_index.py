"""Every command facing an index it cannot use says so in one line (no driver noise).

The read commands (and ``status``) answer the coded ``SESSION_QUERY_INDEX_FAILED``
with exit status 2, as for a missing index; the indexer, ``db`` and the
long-running servers (``rpc``, ``serve``, ``mcp``) exit 1 with the reason.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from indexer.cli import main
from tests.logfactory import header, simple_turn, write_log
from tests.query.support import build_index
from tests import indexdb

READS: list[list[str]] = [
    ["sessions"],
    ["read", "s1"],
    ["events", "s1"],
    ["docs", "s1"],
    ["surface", "s1"],
    ["event", "s1", "1"],
    ["trace", "s1"],
    ["trace-event", "s1", "1"],
    ["title", "s1"],
    ["search", "hello"],
    ["search", "hello", "--session", "s1"],
    ["status"],
]
ADMIN: list[list[str]] = [["index", "--once"], ["db", "current"], ["db", "check"], ["db", "upgrade"]]
SERVERS: list[list[str]] = [["rpc"], ["serve", "--port", "1"], ["mcp", "--cwd", "/work/project"]]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False, input="")


def assert_one_clean_line(result: Result, needle: str) -> None:
    """The error is one line holding ``needle``: no traceback, no SQL, no SQLAlchemy help link."""
    text = result.stderr + result.stdout
    assert needle in text, text
    assert "sqlalche.me" not in text and "Traceback" not in text and "[SQL:" not in text, text
    assert len(result.stderr.strip().splitlines()) <= 1, result.stderr


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A healthy index whose FTS5 table (and with it its shadow tables) was dropped."""
    base = tmp_path_factory.mktemp("damaged")
    write_log(base / "root", header("s1", 1), [simple_turn(0, "hello there")])
    db = build_index(base / "root", base / "index.db")
    conn = indexdb.connect(db)
    conn.execute("DROP TABLE texts_fts")
    conn.commit()
    conn.close()
    return db


def _targets(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    directory = tmp_path / "a-directory.db"
    directory.mkdir()
    text = tmp_path / "notes.db"
    text.write_text("plain text, not a database\n" * 50)
    return {"directory": (directory, f"index database {directory} is a directory"), "text": (text, f"{text} is not a sessionq index")}


@pytest.mark.parametrize("kind", ["directory", "text"])
def test_reads_answer_index_failed_in_one_line(tmp_path: Path, kind: str) -> None:
    target, needle = _targets(tmp_path)[kind]
    for args in READS:
        human = invoke(*args, "--db", str(target))
        assert human.exit_code == 1, (args, human.output)
        assert_one_clean_line(human, needle)
        as_json = invoke(*args, "--db", str(target), "--json")
        assert as_json.exit_code == 1, (args, as_json.output)
        error = json.loads(as_json.stdout)["error"]
        assert error["code"] == "SESSION_QUERY_INDEX_FAILED" and needle in error["message"], error
        assert "sqlalche.me" not in error["message"]


@pytest.mark.parametrize("kind", ["directory", "text"])
def test_writers_and_servers_exit_1_in_one_line(tmp_path: Path, kind: str) -> None:
    target, needle = _targets(tmp_path)[kind]
    before = b"" if target.is_dir() else target.read_bytes()
    root = tmp_path / "root"
    write_log(root, header("s1", 1), [simple_turn(0)])
    commands = [*ADMIN, *(SERVERS if kind == "directory" else [])]
    for args in commands:
        extra = ["--root", str(root)] if args[0] == "index" else []
        result = invoke(*args, *extra, "--db", str(target))
        assert result.exit_code == 1, (args, result.output)
        assert_one_clean_line(result, needle)
    if kind == "text":
        assert target.read_bytes() == before
    assert not Path(str(target) + ".lock").exists()


def test_a_missing_index_is_a_coded_error_with_exit_1_and_is_not_created(tmp_path: Path) -> None:
    absent = tmp_path / "absent.db"
    result = invoke("sessions", "--db", str(absent), "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"] == {
        "code": "SESSION_QUERY_INDEX_FAILED",
        "message": f"no index database at {absent}; run `sessionq index` to build it",
    }
    assert invoke("db", "check", "--db", str(absent)).exit_code == 1
    assert not absent.exists()


def test_every_read_names_the_damage_and_the_repair(damaged: Path) -> None:
    for args in READS[:-1]:  # status reports the damage instead (tests/daemon/test_status_and_db.py)
        result = invoke(*args, "--db", str(damaged), "--json")
        assert result.exit_code == 1, (args, result.output)
        error = json.loads(result.stdout)["error"]
        assert error["code"] == "SESSION_QUERY_INDEX_FAILED", (args, error)
        assert f"the index {damaged} is damaged (missing FTS5 table texts_fts)" in error["message"]
        assert f"run `sessionq index --once --db {damaged}`" in error["message"]
        assert "no such table" not in error["message"]


def test_the_indexer_refuses_a_damaged_index_with_the_repair(damaged: Path) -> None:
    before = damaged.read_bytes()
    result = invoke("index", "--once", "--root", str(damaged.parent / "root"), "--db", str(damaged))
    assert result.exit_code == 1
    assert_one_clean_line(result, "is damaged (missing FTS5 table texts_fts); rebuild it from the session logs")
    assert damaged.read_bytes() == before


def test_rpc_answers_a_damaged_index_with_a_code_not_an_internal_error(damaged: Path) -> None:
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "searchSessions", "params": {"query": "hello"}})
    result = CliRunner().invoke(main, ["rpc", "--db", str(damaged)], input=request + "\n")
    assert result.exit_code == 0
    error = json.loads(result.stdout)["error"]
    assert error["code"] == -32000 and error["data"] == {"code": "SESSION_QUERY_INDEX_FAILED"}
    assert "missing FTS5 table texts_fts" in error["message"]


def test_an_unexpected_database_error_is_one_line_without_sqlalchemy_noise() -> None:
    from sqlalchemy.exc import OperationalError

    from readmodel.cli.support import uncoded_message

    error = OperationalError('SELECT * FROM "texts_fts"', {}, sqlite3.OperationalError("no such table: texts_fts"))
    assert "sqlalche.me" in str(error) and "[SQL:" in str(error)  # what used to be printed
    assert uncoded_message(error, "x.db") == (
        "the index x.db cannot be used: no such table: texts_fts; `sessionq status` and `sessionq db check` diagnose it"
    )
    assert uncoded_message(ValueError("plain")) == "ValueError: plain"
