"""Fixtures for the PostgreSQL tests: the daemon tests' subprocess owner."""

from tests.daemon.conftest import processes  # noqa: F401  - re-exported as this directory's fixture
