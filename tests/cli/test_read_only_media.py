"""An index on a read-only mount: readers read it, the indexer says it cannot write there.

A real read-only file system (a tmpfs remounted ``ro``), not ``chmod``: the
tests run as root, whom permission bits do not stop.  Skipped, with the
reason, where mounting is not permitted.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from indexer.cli import main
from tests.logfactory import header, simple_turn, write_log
from tests.query.support import build_index


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False, input="")


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


class ReadOnlyMount:
    """A small tmpfs filled while writable, then remounted read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def freeze(self) -> None:
        done = _mount("-o", "remount,ro", str(self.path))
        assert done.returncode == 0, done.stderr


@pytest.fixture
def media(tmp_path: Path) -> Iterator[ReadOnlyMount]:
    point = tmp_path / "media"
    point.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount(8) here: cannot build a read-only file system")
    mounted = _mount("-t", "tmpfs", "-o", "size=8m", "tmpfs", str(point))
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.strip()}")
    try:
        yield ReadOnlyMount(point)
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


@pytest.fixture(scope="module")
def clean_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cleanly closed index: no -wal, no -shm beside it."""
    base = tmp_path_factory.mktemp("ro-source")
    write_log(base / "root", header("s1", 1), [simple_turn(0, "hello from the archive")])
    db = build_index(base / "root", base / "index.db")
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    return db


def test_a_clean_index_on_read_only_media_is_readable(media: ReadOnlyMount, clean_index: Path) -> None:
    db = media.path / "index.db"
    shutil.copy(clean_index, db)
    media.freeze()
    sessions = invoke("sessions", "--db", str(db), "--json")
    assert sessions.exit_code == 0, sessions.output
    assert [record["header"]["id"] for record in json.loads(sessions.stdout)] == ["s1"]
    search = invoke("search", "archive", "--db", str(db), "--json")
    assert search.exit_code == 0, search.output
    assert [hit["header"]["id"] for hit in json.loads(search.stdout)["items"]] == ["s1"]
    status = invoke("status", "--db", str(db), "--json")
    assert status.exit_code == 0 and json.loads(status.stdout)["sessions"] == 1
    assert invoke("db", "check", "--db", str(db)).exit_code == 0
    assert sorted(p.name for p in media.path.iterdir()) == ["index.db"]  # nothing created beside it


def test_the_indexer_says_the_media_is_read_only(media: ReadOnlyMount, clean_index: Path) -> None:
    db = media.path / "index.db"
    shutil.copy(clean_index, db)
    media.freeze()
    for args in (["index", "--once", "--root", str(clean_index.parent / "root")], ["db", "upgrade"]):
        result = invoke(*args, "--db", str(db))
        assert result.exit_code == 1, (args, result.output)
        assert f"cannot write index {db}: {media.path} is on a read-only file system" in result.stderr, result.stderr
        assert "not a sessionq index" not in result.stderr
    fresh = media.path / "sub" / "new.db"
    result = invoke("index", "--once", "--root", str(clean_index.parent / "root"), "--db", str(fresh))
    assert result.exit_code == 1 and "is on a read-only file system" in result.stderr


def copy_with_a_commit_in_its_wal(clean_index: Path, work: Path, target: Path, suffixes: tuple[str, ...]) -> None:
    """Copy ``clean_index`` to ``target`` (with the given sidecars) while a commit sits in its -wal."""
    shutil.copy(clean_index, work)
    conn = sqlite3.connect(work, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("""UPDATE "index_meta" SET "root" = '/changed'""")
        for suffix in suffixes:
            shutil.copy(f"{work}{suffix}", f"{target}{suffix}")
    finally:
        conn.close()


def test_unmerged_changes_on_read_only_media_are_not_silently_skipped(media: ReadOnlyMount, clean_index: Path, tmp_path: Path) -> None:
    """A -wal with commits but no -shm: immutable mode would read the stale file, so refuse."""
    copy_with_a_commit_in_its_wal(clean_index, tmp_path / "work.db", media.path / "index.db", ("", "-wal"))
    media.freeze()
    result = invoke("sessions", "--db", str(media.path / "index.db"))
    assert result.exit_code == 1
    assert "is on a read-only file system and its write-ahead log" in result.stderr, result.stderr


def test_a_wal_with_its_shm_on_read_only_media_is_read_with_its_changes(media: ReadOnlyMount, clean_index: Path, tmp_path: Path) -> None:
    copy_with_a_commit_in_its_wal(clean_index, tmp_path / "work.db", media.path / "index.db", ("", "-wal", "-shm"))
    media.freeze()
    status = invoke("status", "--db", str(media.path / "index.db"), "--json")
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["root"] == "/changed"
