"""Credentials for ``--db postgresql://…``: from the URL, ``PGPASSWORD`` or a password file; never printed.

The throwaway cluster (tests/postgres.py) authenticates with scram-sha-256, so
these are real logins.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from indexer.cli import main


@pytest.fixture
def no_libpq_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("PGPASSWORD", "PGPASSFILE", "PGSERVICE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-such-pgpass"))  # never the real ~/.pgpass


def without_password(url: str) -> str:
    password = make_url(url).password
    return url.replace(f":{password}@", "@", 1) if password else url


def test_a_password_in_the_url_logs_in_and_is_never_printed(postgres_server, postgres_url: str, no_libpq_env: None) -> None:  # type: ignore[no-untyped-def]
    if not postgres_server.password:
        pytest.skip("the test server takes no password")
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", postgres_url])
    assert result.exit_code == 0, result.output
    assert postgres_server.password not in result.output and ":***@" in result.output


def test_pgpassword_and_a_password_file_supply_what_the_url_leaves_out(  # type: ignore[no-untyped-def]
    postgres_server, postgres_url: str, no_libpq_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if not postgres_server.password:
        pytest.skip("the test server takes no password")
    bare = without_password(postgres_url)
    refused = CliRunner().invoke(main, ["db", "upgrade", "--db", bare])
    assert refused.exit_code == 1 and "cannot connect to PostgreSQL" in refused.output, refused.output
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)
    assert CliRunner().invoke(main, ["db", "upgrade", "--db", bare]).exit_code == 0
    monkeypatch.delenv("PGPASSWORD")
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"*:*:*:postgres:{postgres_server.password}\n")
    os.chmod(pgpass, 0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    current = CliRunner().invoke(main, ["db", "current", "--db", bare])
    assert current.exit_code == 0 and "(head)" in current.output, current.output


def test_a_wrong_password_is_one_line_naming_host_database_and_cause(postgres_url: str, no_libpq_env: None) -> None:
    wrong = without_password(postgres_url).replace("postgresql://postgres@", "postgresql://postgres:Wr0ng-Secret@", 1)
    assert "Wr0ng-Secret" in wrong
    result = CliRunner().invoke(main, ["db", "check", "--db", wrong])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    database = make_url(postgres_url).database
    assert f"cannot connect to PostgreSQL (host " in line and f"database {database})" in line
    assert "password authentication failed" in line
    assert "Wr0ng-Secret" not in result.output
