"""The PostgreSQL test fixture itself: a throwaway cluster (or $SESSIONQ_TEST_PG) and per-test databases."""

from __future__ import annotations

import psycopg
import pytest


def test_each_test_gets_a_fresh_database_on_a_running_server(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
        assert conn.execute("SHOW server_encoding").fetchone() == ("UTF8",)



@pytest.mark.parametrize(("ci", "outcome"), [(None, pytest.skip.Exception), ("true", pytest.fail.Exception)])
def test_without_a_server_the_tests_skip_locally_and_fail_under_ci(monkeypatch: pytest.MonkeyPatch, ci, outcome) -> None:  # type: ignore[no-untyped-def]
    from tests.postgres import require_server

    monkeypatch.setenv("SESSIONQ_TEST_PG", "postgresql://nobody@127.0.0.1:1/none")  # nothing listens there
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="PostgreSQL is required under CI" if ci else "no PostgreSQL server"):
        require_server()
