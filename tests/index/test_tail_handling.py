"""Torn and open tails: held while the writer is active, indexed as the inspect
view once settled, and replaced exactly when the writer continues or rolls back."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.store.database import open_writer
from readmodel.store.schema import SURFACE_CODES
from tests.index.test_incremental_equals_cold import World
from tests.indexstate import index_state
from tests import indexdb


@pytest.fixture
def world(tmp_path: Path) -> World:
    (tmp_path / "root").mkdir()
    return World(tmp_path / "root")


def build(tmp_path: Path, world: World, name: str) -> str:
    db = str(tmp_path / f"{name}.db")
    engine = open_writer(db)
    Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=0).reconcile()
    engine.dispose()
    return db


def rows(db: str, sql: str, *args: object) -> list[tuple]:
    conn = indexdb.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def test_an_open_tail_is_held_while_changing_then_indexed_with_closers(tmp_path: Path, world: World) -> None:
    for _ in range(6):
        world.append("alpha", torn=0)
    db = str(tmp_path / "live.db")
    engine = open_writer(db)
    Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=3600).reconcile()
    assert rows(db, 'SELECT "tail_state", "event_count", "synthetic_from" FROM "sessions"') == [("held", 31, None)]
    Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=0).reconcile()
    state, count, synthetic_from = rows(db, 'SELECT "tail_state", "event_count", "synthetic_from" FROM "sessions"')[0]
    assert (state, synthetic_from) == ("settled", 31)
    closers = rows(db, 'SELECT "seq", "type", "synthetic" FROM "events" WHERE "seq" >= 31 ORDER BY "seq"')
    assert closers == [(31, "tool/result", 1), (32, "step/end", 1), (33, "turn/end", 1)] and count == 34
    assert rows(db, 'SELECT "text" FROM "documents" WHERE "seq" = 33') == [("interrupted",)]
    assert rows(db, 'SELECT "text" FROM "documents" WHERE "seq" = 31')[0][0].endswith("ToolOutcomeUnknownError\nTOOL_OUTCOME_UNKNOWN")
    engine.dispose()


def test_completing_a_torn_frame_replaces_the_synthetic_view(tmp_path: Path, world: World) -> None:
    for _ in range(3):
        world.append("alpha", torn=0)
    world.append("alpha", torn=2)  # the batch holding two replacements, checksum missing
    db = str(tmp_path / "inc.db")
    engine = open_writer(db)
    settled = Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=0)
    settled.reconcile()
    # The recovered replacement shadowed stored node 12 (a synthetic row did it).
    assert rows(db, 'SELECT "surface", "replaced_by" FROM "events" WHERE "seq" = 12') == [(SURFACE_CODES["shadowed"], 25)]
    assert rows(db, 'SELECT count(*) FROM "events" WHERE "synthetic" = 1')[0][0] > 0
    world.finish_torn()
    settled.reconcile()
    assert rows(db, 'SELECT count(*) FROM "events" WHERE "synthetic" = 1')[0][0] == 0
    engine.dispose()
    assert index_state(db) == index_state(build(tmp_path, world, "cold"))


def test_rolling_back_a_torn_frame_undoes_its_synthetic_replacements(tmp_path: Path, world: World) -> None:
    for _ in range(3):
        world.append("alpha", torn=0)
    world.append("alpha", torn=2)
    db = str(tmp_path / "inc.db")
    engine = open_writer(db)
    settled = Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=0)
    settled.reconcile()
    world.rollback("alpha")
    settled.reconcile()
    assert rows(db, 'SELECT "surface", "replaced_by" FROM "events" WHERE "seq" = 12') == [(SURFACE_CODES["current"], None)]
    engine.dispose()
    assert index_state(db) == index_state(build(tmp_path, world, "cold"))


def test_a_held_tail_is_indexed_once_settled_without_new_writes(tmp_path: Path, world: World) -> None:
    for _ in range(4):
        world.append("beta", torn=0)
    world.append("beta", torn=2)
    db = str(tmp_path / "inc.db")
    engine = open_writer(db)
    now = [0.0]
    clocked = Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=5, clock=lambda: now[0])
    mtime = Path(world._writer("beta").path).stat().st_mtime
    now[0] = mtime + 1
    clocked.reconcile()
    assert rows(db, 'SELECT "tail_state" FROM "sessions"') == [("held",)]
    now[0] = mtime + 10
    report = clocked.reconcile()
    assert report.appended == 1
    assert rows(db, 'SELECT "tail_state" FROM "sessions"') == [("settled",)]
    engine.dispose()
    assert index_state(db) == index_state(build(tmp_path, world, "cold"))


def test_held_tails_are_counted_in_the_report(tmp_path: Path, world: World) -> None:
    for _ in range(6):
        world.append("alpha", torn=0)
    engine = open_writer(str(tmp_path / "held.db"))
    seen: list[tuple[int, int]] = []
    reconciler = Reconciler(engine, world.root, Compression.ZSTD, settle_seconds=3600, progress=lambda done, total, events: seen.append((done, total)))
    report = reconciler.reconcile()
    assert (report.held, report.reloaded) == (1, 1)
    assert seen == [(1, 1)]
    engine.dispose()
