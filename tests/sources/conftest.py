"""Fixtures for the sources tests: the daemon tests' ``processes`` (daemons that are always cleaned up)."""

from tests.daemon.conftest import processes  # noqa: F401  - re-exported as this directory's fixture
