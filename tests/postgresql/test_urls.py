"""``--db postgresql://…``: recognised everywhere, the password never printed, clear refusals.

No server is needed here: an unreachable one is the point of some of these.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from indexer.cli import main
from readmodel import SessionQuery
from readmodel.core.errors import SessionQueryError
from readmodel.store.postgres import is_postgres, mask_url, parse, target

SECRET = "s3cr3t-Pa55"
UNREACHABLE = f"postgresql://alice:{SECRET}@127.0.0.1:1/history"  # nothing listens on port 1


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (f"postgresql://alice:{SECRET}@db.example:5433/history", "postgresql://alice:***@db.example:5433/history"),
        (f"postgresql+psycopg://alice:{SECRET}@db/history?sslmode=require", "postgresql+psycopg://alice:***@db/history?sslmode=require"),
        (f"postgresql://alice@/history?host=/run/pg&password={SECRET}", "postgresql://alice@/history?host=/run/pg&password=***"),
        ("postgresql://alice@db/history", "postgresql://alice@db/history"),
        (f"postgresql://alice:{SECRET}@db", "postgresql://alice:***@db"),
        ("/var/lib/index.db", "/var/lib/index.db"),
    ],
)
def test_a_url_is_masked_wherever_it_is_shown(url: str, masked: str) -> None:
    assert mask_url(url) == masked
    assert SECRET not in mask_url(url)


def test_both_spellings_are_postgresql_urls_for_the_psycopg_driver() -> None:
    for url in ("postgresql://u@h/d", "postgresql+psycopg://u@h/d", "postgres://u@h/d"):
        assert is_postgres(url)
        assert parse(url).drivername == "postgresql+psycopg"
    for other in ("index.db", "sqlite:///index.db", ":memory:", "postgresql-notes.db"):
        assert not is_postgres(other)
    assert target("postgresql://u@db.example:5433/history") == "host db.example:5433, database history"
    assert target("postgresql://u@/history?host=/run/pg") == "host /run/pg, database history"


def test_an_unreachable_server_is_one_line_naming_host_database_and_cause(tmp_path) -> None:
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", UNREACHABLE])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert "cannot connect to PostgreSQL (host 127.0.0.1:1, database history)" in line
    assert "refused" in line.lower() or "connect" in line.lower()
    assert SECRET not in result.output and "Traceback" not in result.output


def test_browse_reports_an_unreachable_server_in_one_line_before_taking_the_screen() -> None:
    """``browse`` takes a PostgreSQL ``--db`` (every command does now); an unreachable one is
    one line, exit 1, before the app would start."""
    result = CliRunner().invoke(main, ["browse", "--db", UNREACHABLE])
    assert result.exit_code == 1, result.output
    (line,) = result.output.strip().splitlines()
    assert "cannot connect to PostgreSQL (host 127.0.0.1:1, database history)" in line
    assert SECRET not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args", [["index", "--once", "--root", "ROOT"], ["prune", "--source", "x", "--yes"]])
def test_index_and_prune_report_an_unreachable_server_in_one_line_without_the_password(args: list[str], tmp_path) -> None:
    args = [str(tmp_path) if arg == "ROOT" else arg for arg in args]
    result = CliRunner().invoke(main, [*args, "--db", UNREACHABLE])
    assert result.exit_code == 1, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: cannot connect to PostgreSQL (host 127.0.0.1:1")
    assert SECRET not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    "args", [["sessions"], ["show", "some-id"], ["search", "needle"], ["title", "some-id"], ["serve"], ["export", "some-id"]]
)
def test_reads_of_an_unreachable_server_are_one_line_naming_host_and_database(args: list[str]) -> None:
    result = CliRunner().invoke(main, [*args, "--db", UNREACHABLE])
    assert result.exit_code == 1, result.output
    (line,) = result.output.strip().splitlines()
    assert "cannot connect to PostgreSQL (host 127.0.0.1:1, database history)" in line, line
    assert SECRET not in result.output and "Traceback" not in result.output


def test_the_python_api_reports_an_unreachable_server_as_an_unusable_index() -> None:
    with pytest.raises(SessionQueryError) as caught:
        SessionQuery.open(UNREACHABLE)
    assert caught.value.code == "SESSION_QUERY_INDEX_FAILED"
    assert "cannot connect to PostgreSQL" in caught.value.message and SECRET not in caught.value.message


def test_a_malformed_url_is_one_line_without_its_password() -> None:
    result = CliRunner().invoke(main, ["db", "current", "--db", f"postgresql://alice:{SECRET}@db:notaport/history"])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert "is not a valid PostgreSQL URL" in line and SECRET not in line


def test_an_unexpected_failure_never_shows_the_password() -> None:
    from readmodel.cli.support import uncoded_message
    from sqlalchemy.exc import OperationalError

    url = f"postgresql://alice:{SECRET}@db/history"
    for exc in (OperationalError("SELECT 1", {}, Exception("boom")), ValueError(f"bad value in {url}")):
        line = uncoded_message(exc, url)
        assert SECRET not in line and "alice:***@db/history" in line or "boom" in line
