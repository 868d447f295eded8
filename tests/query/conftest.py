"""Fixtures for the query-engine tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from readmodel.live import InMemoryLiveSource
from tests.query.support import Corpus


@pytest.fixture
def corpus(tmp_path: Path) -> Iterator[Corpus]:
    owner = Corpus(tmp_path)
    try:
        yield owner
    finally:
        owner.close()


@pytest.fixture
def live() -> InMemoryLiveSource:
    return InMemoryLiveSource()
