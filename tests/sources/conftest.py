"""Fixtures for the sources tests (daemon processes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon.support import Processes


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    owner = Processes(tmp_path)
    try:
        yield owner
    finally:
        owner.cleanup()
