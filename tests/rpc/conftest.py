"""A small real index shared by the JSON-RPC edge tests (read-only use)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from readmodel.query import SessionQuery
from readmodel.rpc import Dispatcher
from tests.rpc.support import two_session_index


@pytest.fixture(scope="module")
def index_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_session_index(tmp_path_factory.mktemp("rpc-edge"))


@pytest.fixture(scope="module")
def dispatcher(index_db: Path) -> Iterator[Dispatcher]:
    engine = SessionQuery.open(str(index_db))
    try:
        yield Dispatcher(engine)
    finally:
        engine.close()
