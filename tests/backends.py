"""The index backends the contract and conformance suites run against.

Each backend knows how to make a fresh, empty index and how to build one from
a log root with the real indexer.  Suites take the ``backend`` fixture
(tests/conftest.py), parameterised over :data:`BACKENDS`, so every backend
answers the same tests, as a recorder test case runs against every recorder.
PostgreSQL's entry (:data:`POSTGRES`) builds with the real indexer into a
database of a throwaway cluster (:mod:`indexer.pgwriter`); one database per
log root is built once per test session and shared, since these suites only
read.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
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


@dataclass(frozen=True)
class PostgresBackend(Backend):
    """PostgreSQL on the tests' shared server (tests/postgres.py)."""

    def database(self, directory: Path, name: str) -> str:
        from tests.postgres import shared_server

        return shared_server().database()

    def build(self, root: Path, db: str) -> str:
        """The index of ``root``: built once per session (``db`` is then dropped unused)."""
        from readmodel.store.postgres import open_writer as open_postgres_writer
        from tests.postgres import shared_server

        from indexer import repair

        # Keyed by what the indexer writes: some suites build with the reference's closer texts patched in.
        key = (root, repair.OUTCOME_UNKNOWN_TEXT, repair.NOT_STARTED_TEXT)
        built = _BUILT.get(key)
        if built is None:
            # The real indexer writing into PostgreSQL (indexer.pgwriter), as SQLITE.build does into
            # SQLite; its SQLite twin (the same root into SQLite) is what the read side is compared with.
            engine = open_postgres_writer(db)
            try:
                Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
            finally:
                engine.dispose()
            scratch = Path(tempfile.mkdtemp(prefix="sessionq-twin-"))
            atexit.register(shutil.rmtree, scratch, True)  # the twin lives as long as the test session
            built = _BUILT[key] = db
            _TWINS[built] = SQLITE.build(root, str(scratch / "index.db"))
        elif built != db:
            shared_server().drop(db)
        return built

    @staticmethod
    def sqlite_twin(db: str) -> str:
        """The SQLite index the real indexer built from the root of the PostgreSQL index ``db``."""
        return _TWINS[db]

    def open_source(self, db: str) -> IndexSource:
        from readmodel.store.pgreader import PostgresIndexStore

        return PostgresIndexStore.open(db)


_BUILT: dict[tuple[Path, str, str], str] = {}
_TWINS: dict[str, str] = {}
POSTGRES = PostgresBackend("postgresql")
BACKENDS: tuple[Backend, ...] = (SQLITE, POSTGRES)
