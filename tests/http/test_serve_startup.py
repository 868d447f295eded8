"""``sessionq serve`` refuses to start, in one line with exit 1, before uvicorn
says "startup complete": no index, a foreign database, a taken port."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.http.conftest import Site
from tests.http.test_uvicorn import free_port
from tests.logfactory import header, user, write_log

REPO = Path(__file__).resolve().parents[2]


def serve(db: Path, port: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "indexer.cli", "serve", "--db", str(db), "--port", str(port)]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=REPO)


def assert_refused(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode == 1, result
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
    assert "startup complete" not in result.stderr and "Traceback" not in result.stderr


def test_a_missing_database_is_refused(tmp_path: Path) -> None:
    assert_refused(serve(tmp_path / "nowhere.db", free_port()), "no index database at")


def test_a_foreign_database_is_refused_untouched(tmp_path: Path) -> None:
    foreign = tmp_path / "app.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    before = foreign.read_bytes()
    assert_refused(serve(foreign, free_port()), "is not a sessionq index")
    assert foreign.read_bytes() == before


@pytest.fixture
def indexed(site: Site) -> Site:
    write_log(site.root, header("s1", 1_790_000_000_000), [[user(0, "hello")]])
    site.index()
    return site


def test_a_taken_port_is_refused_before_startup(indexed: Site) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_refused(serve(indexed.db, port), f"cannot listen on 127.0.0.1:{port}: the port is already in use")
