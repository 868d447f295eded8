"""``sessionq inspect``: the inspect view straight from a root, and its error contract."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from indexer.cli import main
from indexer.layout import Compression
from indexer.reader import inspect_session, inspect_view
from tests.cli.helpers import json_out, sessionq
from tests.corpus import RAW_ROOT, ZSTD_ROOT, golden
from tests.logfactory import events_bytes, header, header_bytes, simple_turn, write_frames, write_log


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


def test_errors_quote_a_huge_header_id_briefly_and_an_ordinary_one_whole(tmp_path: Path) -> None:
    """A hostile header's id is clipped in messages; ids up to 256 characters stay verbatim."""
    huge, long_but_fine = "x" * (1 << 20), "y" * 256
    project = write_log(tmp_path, header("plain"), [simple_turn(0)]).parent.parent
    write_frames(project / "impostor" / "session.jsonl.zstd", [header_bytes(header(huge)), events_bytes(simple_turn(0))])
    write_frames(project / "future" / "session.jsonl.zstd", [header_bytes({**header(huge), "version": 1})])
    write_frames(project / "fine" / "session.jsonl.zstd", [header_bytes(header(long_but_fine)), events_bytes(simple_turn(0))])

    def message(session_id: str) -> str:
        result = CliRunner().invoke(main, ["inspect", session_id, "--root", str(tmp_path), "--json"])
        assert result.exit_code == 2, result.output
        return str(json.loads(result.stdout)["error"]["message"])

    assert message("impostor") == (
        f"stored session \"impostor\" is corrupt: header id '{'x' * 64}…({1 << 20} chars)' does not match requested session \"impostor\""
    )
    assert f'session "{"x" * 64}…({1 << 20} chars)" (' in message("future") and len(message("future")) < 1024
    assert message("fine") == f"stored session \"fine\" is corrupt: header id '{long_but_fine}' does not match requested session \"fine\""
