"""The PostgreSQL test fixture itself: a throwaway cluster (or $SESSIONQ_TEST_PG) and per-test databases."""

from __future__ import annotations

import psycopg


def test_each_test_gets_a_fresh_database_on_a_running_server(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
        assert conn.execute("SHOW server_encoding").fetchone() == ("UTF8",)
