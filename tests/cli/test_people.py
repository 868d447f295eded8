"""The CLI for people, through the real console script on a real index (piped: no terminal)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests.cli.helpers import json_out, sessionq
from tests.logfactory import assistant, header, simple_turn, step_end, step_start, tool_result, turn_end, turn_start, user, write_log
from tests.projection.builders import title as title_event
from tests.query.support import build_index

UUID_A = "6f31f323-b7af-465b-a778-4f0f3c9014ac"
UUID_B = "6f31f999-0000-4000-8000-000000000001"
UUID_C = "d8684170-1111-4222-8333-444455556666"
LONG_TITLE = "Investigate why the frame scanner drops the last frame of a torn log on slow disks"
LONG_CWD = "/home/dev/projects/a-rather-long-workspace-name/with/nested/directories"
DAY = 86_400_000
AUG_1 = 1_785_542_400_000  # 2026-08-01T00:00:00Z


def _tool_turn() -> list[dict]:
    output = "\n".join(f"line {n}" for n in range(60))
    return [
        turn_start(0),
        user(1, "Please **list** the files"),
        step_start(2),
        assistant(3, "Looking.", calls=[("c1", "bash", '{"cmd": "ls"}')]),
        tool_result(4, "c1", output),
        assistant(5, "Done: 60 lines."),
        step_end(6),
        turn_end(7),
        title_event(8, LONG_TITLE, time=5, message_seqs=[1]),
    ]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("people")
    root = base / "root"
    write_log(root, header(UUID_A, AUG_1 + 2 * DAY, cwd=LONG_CWD), [_tool_turn()])
    write_log(root, header(UUID_B, AUG_1 + DAY), [simple_turn(0, "frame scanner notes")])
    write_log(root, header(UUID_C, AUG_1 - 40 * DAY, cwd=None), [simple_turn(0, "older frame work")])
    return str(build_index(root, base / "index.db"))


def run(db: str, *args: str, columns: int = 80) -> tuple[int, str, str]:
    result = sessionq(*args, "--db", db, env={"COLUMNS": str(columns), "TERM": "dumb"})
    return result.returncode, result.stdout, result.stderr


def test_sessions_table_keeps_every_id_whole_at_80_columns_when_piped(db: str) -> None:
    code, out, _ = run(db, "sessions")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["id", "created", "active", "events"]
    for session_id in (UUID_A, UUID_B, UUID_C):
        assert sum(session_id in line for line in lines) == 1, out
    assert all(len(line) <= 80 for line in lines), out
    row = next(line for line in lines if UUID_A in line)
    assert row.split()[3] == "9" and "Investigate" in row  # event count and the (shortened) title


def test_sessions_plain_is_tab_separated_and_uncut(db: str) -> None:
    code, out, _ = run(db, "sessions", "--plain", columns=40)
    assert code == 0
    rows = [line.split("\t") for line in out.splitlines()]
    assert [row[0] for row in rows] == [UUID_A, UUID_B, UUID_C]
    first = rows[0]
    assert len(first) == 8 and first[4] == LONG_CWD and first[5] == LONG_TITLE and first[3] == "9"
    assert first[1].startswith("2026-08-0") and first[7] == "ok"


def test_sessions_filter_by_workspace_and_by_dates_as_people_type_them(db: str) -> None:
    plain = lambda *args: [line.split("\t")[0] for line in run(db, "sessions", "--plain", *args)[1].splitlines()]  # noqa: E731
    assert plain("--cwd", LONG_CWD) == [UUID_A]
    assert plain("--created-from", "2026-07-31") == [UUID_A, UUID_B]
    assert plain("--created-to", "2026-08-02T00:00:00Z") == [UUID_B, UUID_C]
    assert plain("--created-from", str(AUG_1 + DAY), "--created-to", str(AUG_1 + DAY)) == [UUID_B]
    assert plain("--created-from", "100000w") == [UUID_A, UUID_B, UUID_C]  # an age: that long before now
    code, _, err = run(db, "sessions", "--created-from", "next tuesday")
    assert code == 2 and "is not a time" in err and "2026-08-01" in err


def test_a_unique_id_prefix_works_wherever_an_id_is_taken(db: str) -> None:
    full = json_out(sessionq("read", UUID_C, "--db", db, "--json"))
    assert json_out(sessionq("read", "d868", "--db", db, "--json")) == full
    for args in (("surface", "d86"), ("event", "d86", "1"), ("trace", "d86"), ("trace-event", "d86", "1"), ("show", "d86")):
        code, out, err = run(db, *args)
        assert code == 0, (args, err)
        assert UUID_C in out, args
    assert "turn/end" in run(db, "events", "d86")[1]
    assert json_out(sessionq("search", "frame", "--session", "d86", "--db", db, "--json"))["session"]["id"] == UUID_C


def test_an_ambiguous_prefix_lists_the_candidates_and_exits_2(db: str) -> None:
    code, _, err = run(db, "read", "6f31f")
    assert code == 2
    assert "SESSION_QUERY_SESSION_NOT_FOUND" in err and "ambiguous" in err
    assert UUID_A in err and UUID_B in err
    code, _, err = run(db, "read", "zzz")
    assert code == 2 and 'session "zzz" not found' in err


def test_show_renders_the_conversation_and_cuts_long_results(db: str) -> None:
    code, out, _ = run(db, "show", "6f31f3", columns=100)
    assert code == 0
    assert "Please list the files" in out  # markdown rendered: no asterisks
    assert "→ bash" in out and "line 19" in out and "line 20" not in out
    assert "40 more line(s) of 60 (--full shows all)" in out
    assert "turn/end" not in out  # log-only events are hidden
    code, full, _ = run(db, "show", "6f31f3", "--full", "--all", columns=100)
    assert "line 59" in full and "turn/end" in full and "more line(s)" not in full


def test_show_seq_starts_there_and_marks_it(db: str) -> None:
    code, out, _ = run(db, "show", UUID_A, "--seq", "5", columns=100)
    assert code == 0
    assert "▶ assistant · seq 5" in out and "Please list the files" not in out
    code, _, err = run(db, "show", UUID_A, "--seq", "99")
    assert code == 2 and "SESSION_QUERY_EVENT_NOT_FOUND" in err


def test_negative_numbers_are_values_and_unknown_options_still_fail(db: str) -> None:
    code, _, err = run(db, "event", UUID_A, "-1")
    assert code == 2 and "SESSION_QUERY_EVENT_NOT_FOUND" in err and "No such option" not in err
    code, _, err = run(db, "event", UUID_A, "1", "--bogus")
    assert code == 2 and "No such option" in err


def test_an_unknown_event_type_is_an_invalid_filter_listing_the_types(db: str) -> None:
    code, _, err = run(db, "docs", UUID_A, "--type", "bogus")
    assert code == 2
    assert "SESSION_QUERY_INVALID_FILTER" in err and "user/message" in err and "tool/result" in err
    result = sessionq("docs", UUID_A, "--type", "bogus", "--db", db, "--json")
    assert result.returncode == 2 and json_out(result)["error"]["code"] == "SESSION_QUERY_INVALID_FILTER"


def test_search_pages_by_number_as_the_cursors_do(db: str) -> None:
    first = json_out(sessionq("search", "frame", "--limit", "1", "--db", db, "--json"))
    second = json_out(sessionq("search", "frame", "--limit", "1", "--cursor", first["nextCursor"], "--db", db, "--json"))
    by_page = json_out(sessionq("search", "frame", "--limit", "1", "--page", "2", "--db", db, "--json"))
    assert by_page == second
    code, out, _ = run(db, "search", "frame", "--limit", "1", columns=120)
    assert code == 0 and "more: --page 2" in out
    code, out, _ = run(db, "search", "frame", "--limit", "1", "--page", "2", columns=120)
    assert code == 0 and out.splitlines()[0].split()[0] == "2"  # ranks continue across pages
    code, out, _ = run(db, "search", "frame", "--limit", "1", "--page", "2", columns=200)
    assert code == 0 and out.splitlines()[2].split()[0] == "2"  # the same in the wide table
    code, _, err = run(db, "search", "frame", "--page", "9")
    assert code == 1 and "no page 9" in err


def test_help_has_examples_and_rpc_lists_its_methods() -> None:
    for command in ("sessions", "show", "search", "event", "docs"):
        out = sessionq(command, "--help").stdout
        assert "Examples:" in out and f"sessionq {command} " in out, command
    # Every command, in-process (the same click objects the console script runs).
    from click.testing import CliRunner

    from indexer.cli import main

    runner = CliRunner()
    missing = [name for name in main.commands if "Examples:" not in runner.invoke(main, [name, "--help"]).output]
    assert missing == [], missing
    rpc = sessionq("rpc", "--help").stdout
    assert "listSessionSummaries" in rpc and "readEvent" in rpc and "searchSessions" in rpc


def test_index_once_on_a_misplaced_root_says_what_layout_it_expects(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "loose").mkdir(parents=True)
    (root / "loose" / "session.jsonl.zstd").write_bytes(b"")
    result = sessionq("index", "--once", "--root", str(root), "--db", str(tmp_path / "i.db"))
    assert result.returncode == 0
    assert "no session logs found under" in result.stdout
    assert "<root>/<project>/<session-id>/session.jsonl.zstd" in result.stdout


def test_inspect_names_the_root_it_looked_in(tmp_path: Path) -> None:
    result = sessionq("inspect", "nope", env={"SESSIONQ_ROOT": str(tmp_path)})
    assert result.returncode == 2 and f"under the root {tmp_path}" in result.stderr


def test_status_shows_the_path_of_each_corrupt_log(tmp_path: Path) -> None:
    root = tmp_path / "root"
    path = write_log(root, header("broken"), [simple_turn()])
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    db = str(build_index(root, tmp_path / "i.db"))
    status = json.loads(sessionq("status", "--db", db, "--json").stdout)
    assert [row["sessionId"] for row in status["sessionsInError"]] == ["broken"]
    out = sessionq("status", "--db", db).stdout
    assert f"log: {status['sessionsInError'][0]['path']}" in out and "session.jsonl.zstd" in out


def test_export_takes_a_unique_id_prefix(db: str, tmp_path: Path) -> None:
    target = tmp_path / "out.zip"
    result = sessionq("export", UUID_B[:8], "-o", str(target), "--db", db)
    assert result.returncode == 0, result.stderr
    with zipfile.ZipFile(target) as archive:
        assert "session.jsonl" in archive.namelist()
        assert UUID_B in archive.read("session.jsonl").decode()


def test_search_matches_words_for_people_and_a_quoted_query_as_a_phrase(db: str) -> None:
    def sessions(*args: str) -> set[str]:
        return {hit["header"]["id"] for hit in json_out(sessionq("search", *args, "--db", db, "--json"))["items"]}

    assert sessions("fram") == sessions("frame") != set()  # words: the last word is a prefix
    assert sessions('"fram"') == set()  # wholly quoted: the exact phrase
    assert sessions("fram", "--match", "phrase") == set()
    assert sessions("RAM", "--match", "substring") == sessions("frame")
    result = sessionq("search", "x", "--match", "substring", "--db", db, "--json")
    assert result.returncode == 2 and json_out(result)["error"]["code"] == "SESSION_QUERY_INVALID_QUERY"
def test_title_with_an_ambiguous_prefix_lists_the_candidates_and_exits_2(db: str) -> None:
    code, out, err = run(db, "title", "d86", "6f31f")
    assert code == 2 and out == ""
    assert "ambiguous" in err and UUID_A in err and UUID_B in err
    code, out, _ = run(db, "title", "6f31f3", "zzz", columns=200)
    assert code == 0 and LONG_TITLE in out and "zzz" in out  # an unknown id is answered in its row


def _snippet_lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.startswith("   ")]


def test_search_at_80_piped_columns_gives_the_snippet_whole_lines_and_keeps_ids_whole(db: str) -> None:
    code, out, _ = run(db, "search", "frame")
    assert code == 0
    lines = out.splitlines()
    for session_id in (UUID_B, UUID_C):
        assert sum(session_id in line for line in lines) == 1, out
    assert all(len(line) <= 80 for line in lines if not line.startswith("more:")), out
    # Each hit's snippet is on lines of its own, nearly as wide as the terminal (not a 7-column
    # strip beside the other columns): the hit in UUID_B reads in one piece.
    assert "frame scanner notes" in _snippet_lines(out)
    code, wide, _ = run(db, "search", "frame", columns=200)
    assert code == 0 and wide.splitlines()[0].split("┃")[-1].strip() == "snippet"


def test_a_long_cursor_is_printed_on_one_line_to_copy(db: str) -> None:
    code, out, _ = run(db, "search", "frame", "--limit", "1", columns=60)
    more = [line for line in out.splitlines() if line.startswith("more:")]
    assert code == 0 and len(more) == 1
    cursor = more[0].split("--cursor ")[1]
    assert json_out(sessionq("search", "frame", "--limit", "1", "--cursor", cursor, "--db", db, "--json"))["items"]


def test_inspect_takes_a_unique_id_prefix_of_the_logs_in_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for session_id in (UUID_A, UUID_B, UUID_C):
        write_log(root, header(session_id), [simple_turn()])
    env = {"SESSIONQ_ROOT": str(root), "COLUMNS": "100"}
    whole = sessionq("inspect", UUID_C, "--json", env=env)
    by_prefix = sessionq("inspect", "d868", "--json", env=env)
    assert by_prefix.returncode == 0 and json_out(by_prefix) == json_out(whole)
    result = sessionq("inspect", "6f31f", env=env)
    assert result.returncode == 2 and "ambiguous" in result.stderr
    assert UUID_A in result.stderr and UUID_B in result.stderr and UUID_C not in result.stderr
    result = sessionq("inspect", "abc", env=env)
    assert result.returncode == 2 and "not found under the root" in result.stderr
