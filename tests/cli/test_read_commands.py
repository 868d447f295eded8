"""The read commands of the ``sessionq`` CLI (interface.md "Commands")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from indexer.cli import main
from readmodel.query import SessionQuery
from readmodel.core.vocabulary import to_builtins
from tests.cli.helpers import json_out, sessionq
from tests.logfactory import header, simple_turn, write_log
from tests.projection.builders import title as title_event
from tests.query.support import build_index


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("cli-reads")
    root = base / "root"
    write_log(root, header("parent", 1), [simple_turn(0, "explain the frame scanner"), [title_event(9, "Frame scanner", time=5, message_seqs=[1])]])
    write_log(root, header("child", 2, parentSession="parent", cwd=None), [simple_turn(0, "child work")])
    return str(build_index(root, base / "index.db"))


def invoke(*args: str) -> Result:
    """Run a command in-process (the subprocess tests below cover the real entry point)."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def run_json(db: str, *args: str) -> object:
    result = invoke(*args, "--db", db, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_output_is_the_library_answer(db: str) -> None:
    query = SessionQuery.open(db)
    assert run_json(db, "sessions") == to_builtins(query.list_sessions())
    assert run_json(db, "read", "parent") == to_builtins(query.read_session("parent"))
    assert run_json(db, "events", "parent") == to_builtins(query.list_events("parent"))
    assert run_json(db, "docs", "parent") == to_builtins(query.filter_events("parent", []))
    assert run_json(db, "surface", "parent") == to_builtins(query.read_surface("parent"))
    assert run_json(db, "event", "parent", "3", "--before", "2", "--after", "1") == to_builtins(
        query.read_event({"sessionId": "parent", "seq": 3, "before": 2, "after": 1})
    )
    assert run_json(db, "trace", "child") == to_builtins(query.trace_session("child"))
    assert run_json(db, "trace-event", "parent", "6") == to_builtins(query.trace_event({"sessionId": "parent", "seq": 6}))
    titles = run_json(db, "title", "parent", "nope")
    assert titles[0]["value"]["title"]["title"] == "Frame scanner"  # type: ignore[index]
    assert titles[1]["reason"]["code"] == "SESSION_QUERY_SESSION_NOT_FOUND"  # type: ignore[index]
    query.close()


def test_filters_as_flags_and_as_json(db: str) -> None:
    ids = lambda records: [r["header"]["id"] for r in records]  # noqa: E731
    assert ids(run_json(db, "sessions", "--no-cwd")) == ["child"]
    assert ids(run_json(db, "sessions", "--parent", "parent")) == ["child"]
    assert ids(run_json(db, "sessions", "--persisted", "--created-to", "1")) == ["parent"]
    assert run_json(db, "sessions", "--live") == []
    assert ids(run_json(db, "sessions", "--filters", '[{"kind":"id","values":["parent","child"]}]', "--cwd", "/work/project")) == ["parent"]
    docs = run_json(db, "docs", "parent", "--text", "FRAME   scanner", "--type", "user/message")
    assert [d["seq"] for d in docs] == [1]  # type: ignore[union-attr]
    assert run_json(db, "docs", "parent", "--seq-from", "2", "--surface", "current") == run_json(
        db, "docs", "parent", "--filters", '[{"kind":"seq","from":2},{"kind":"surface","values":["current"]}]'
    )


def test_human_output(db: str) -> None:
    listing = invoke("sessions", "--db", db)
    assert listing.exit_code == 0 and "parent" in listing.stdout and "2 session(s)" in listing.stdout
    for args, needle in [
        (("read", "parent"), "explain the frame scanner"),
        (("events", "parent"), "turn/start"),
        (("docs", "parent"), "explain the frame scanner"),
        (("surface", "parent"), "captured through seq 9"),
        (("event", "parent", "1"), "explain the frame scanner"),
        (("trace", "child"), "child"),
        (("trace-event", "parent", "6"), "source events"),
        (("title", "parent"), "Frame scanner"),
    ]:
        result = invoke(*args, "--db", db)
        assert result.exit_code == 0, (args, result.output)
        assert needle in result.stdout, (args, result.stdout)


def test_query_errors_exit_2(db: str, tmp_path: Path) -> None:
    result = sessionq("read", "nope", "--db", db, "--json")
    assert result.returncode == 2
    assert json_out(result) == {"error": {"code": "SESSION_QUERY_SESSION_NOT_FOUND", "message": 'session "nope" not found'}}
    human = sessionq("event", "parent", "0", "--before", "51", "--db", db)
    assert human.returncode == 2 and "SESSION_QUERY_INVALID_WINDOW" in human.stderr and "Traceback" not in human.stderr
    bad = sessionq("docs", "parent", "--filters", '[{"kind":"bogus"}]', "--db", db, "--json")
    assert bad.returncode == 2 and json_out(bad)["error"]["code"] == "SESSION_QUERY_INVALID_FILTER"
    missing = sessionq("sessions", "--db", str(tmp_path / "none.db"), "--json")
    assert missing.returncode == 1 and json_out(missing)["error"]["code"] == "SESSION_QUERY_INDEX_FAILED"


def test_db_defaults_to_the_environment(db: str) -> None:
    result = sessionq("sessions", "--json", env={"SESSIONQ_DB": db})
    assert result.returncode == 0 and len(json_out(result)) == 2


def test_rpc_command_answers_until_end_of_input(db: str) -> None:
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "listSessions"}),
        "[",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "readTitle", "params": {"sessionId": "parent"}}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "noSuchMethod", "params": {"sessionId": "parent", "query": "x"}}),
    ]
    result = sessionq("rpc", "--db", db, stdin="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    responses = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in responses] == [1, None, 2, 3]
    assert len(responses[0]["result"]) == 2 and responses[1]["error"]["code"] == -32700
    assert responses[2]["result"]["title"]["title"] == "Frame scanner"
    assert responses[3]["error"]["code"] == -32601
