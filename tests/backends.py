"""The index backends the contract and conformance suites run against.

Each backend knows how to make a fresh, empty index and how to build one from
a log root with the real indexer.  Suites take the ``backend`` fixture
(tests/conftest.py), parameterised over :data:`BACKENDS`, so every backend
answers the same tests, as a recorder test case runs against every recorder.
SQLite is the only backend today; a server backend adds an entry here (and the
services its fixture starts).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.store.database import open_writer
from readmodel.store.interface import IndexSource
from readmodel.store.sqlite import IndexStore


@dataclass(frozen=True)
class Backend:
    """One index backend under test."""

    name: str

    def database(self, directory: Path, name: str) -> str:
        """The ``--db`` value of a fresh index called ``name`` (nothing is created yet)."""
        return str(directory / f"{name}.db")

    def build(self, root: Path, db: str) -> str:
        """Reconcile ``root`` into the index ``db`` with the real indexer; returns ``db``."""
        engine = open_writer(db)
        try:
            Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
        finally:
            engine.dispose()
        return db

    def open_source(self, db: str) -> IndexSource:
        """The index ``db`` opened for reading through the backend's read interface."""
        return IndexStore.open(db)


SQLITE = Backend("sqlite")
BACKENDS: tuple[Backend, ...] = (SQLITE,)
