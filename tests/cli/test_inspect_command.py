"""``sessionq inspect``: the inspect view straight from a root, and its error contract."""

from __future__ import annotations

from pathlib import Path

from indexer.layout import Compression
from indexer.reader import inspect_session, inspect_view
from tests.cli.helpers import json_out, sessionq
from tests.corpus import RAW_ROOT, ZSTD_ROOT, golden
from tests.logfactory import header, simple_turn, write_log


def test_inspect_json_equals_the_library_view_for_both_encodings() -> None:
    sid = golden("list-sessions")["sessions"][0]["header"]["id"]
    for root in (ZSTD_ROOT, RAW_ROOT):
        result = sessionq("inspect", sid, "--root", str(root), "--json")
        assert result.returncode == 0, result.stderr
        expected = inspect_view(inspect_session(ZSTD_ROOT, sid, Compression.ZSTD))
        assert json_out(result) == expected


def test_inspect_prints_a_table_for_humans(tmp_path: Path) -> None:
    write_log(tmp_path, header("human"), [simple_turn(0, "explain the frame scanner")])
    result = sessionq("inspect", "human", "--root", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "explain the frame scanner" in result.stdout and "turn/end" in result.stdout


def test_missing_session_exits_2_with_the_error_object(tmp_path: Path) -> None:
    result = sessionq("inspect", "nope", "--root", str(tmp_path), "--json")
    assert result.returncode == 2
    assert json_out(result) == {"error": {"code": "SESSION_QUERY_SESSION_NOT_FOUND", "message": 'session "nope" not found'}}
    assert "Traceback" not in result.stderr


def test_corrupt_log_exits_2_without_a_traceback(tmp_path: Path) -> None:
    path = write_log(tmp_path, header("broken"), [simple_turn()])
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    result = sessionq("inspect", "broken", "--root", str(tmp_path), "--json")
    assert result.returncode == 2
    error = json_out(result)["error"]
    assert error["code"] == "SESSION_QUERY_CORRUPT_SESSION"
    assert error["message"].startswith('stored session "broken" is corrupt: ')
    assert "Traceback" not in result.stderr
