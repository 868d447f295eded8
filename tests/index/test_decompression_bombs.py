"""A log holding a decompression bomb fails its own session; the indexer's memory stays bounded.

The bomb is a 35 KB frame a real compressor made of 1.1 GB of zeros (no content
size in its header, as a streaming writer leaves it), appended to an otherwise
healthy log beside healthy ones.  ``sessionq index --once`` runs in a
subprocess, by the writer alone and with preparation workers, under
:mod:`tests.bombs`, which reports the peak resident set of the command and of
every process below it.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from tests.bombs import compressed_bomb, root_with_bomb, run_measured

PEAK_LIMIT_MIB = 300
BOMB_BYTES = 1100 << 20


@pytest.fixture(scope="module")
def bomb_frame() -> bytes:
    return compressed_bomb(BOMB_BYTES)


@pytest.mark.parametrize("workers", [0, 2], ids=["writer-alone", "with-workers"])
def test_a_bomb_fails_its_session_while_the_others_index_in_bounded_memory(tmp_path: Path, bomb_frame: bytes, workers: int) -> None:
    root = tmp_path / "root"
    bomb_log = root_with_bomb(root, bomb_frame)
    db = tmp_path / "index.db"
    # Workers take part in any pass, however small (by default only from 8 MB of new logs on).
    env = {"SESSIONQ_PARALLEL_MIN_BYTES": "0"}
    args = [sys.executable, "-m", "indexer.cli", "index", "--once", "--workers", str(workers), "--root", str(root), "--db", str(db)]
    measured = run_measured(args, env=env)
    assert measured.returncode == 0, measured.stderr
    assert measured.tree_peak_mib < PEAK_LIMIT_MIB, f"peak {measured.tree_peak_mib:.0f} MiB"
    if workers:
        assert "prepared=4" in measured.stderr  # the bomb was read in a worker
    with sqlite3.connect(db) as conn:
        rows = {sid: (status, code, message) for sid, status, code, message in conn.execute('SELECT "id", "status", "error_code", "error_message" FROM "sessions"')}
    bomb_at = bomb_log.stat().st_size - len(bomb_frame)
    assert rows.pop("bomb") == (
        "corrupt",
        "SESSION_QUERY_CORRUPT_SESSION",
        f'stored session "bomb" is corrupt: frame at byte {bomb_at} holds more than {256 << 20} bytes of plaintext',
    )
    assert rows == {f"healthy-{index}": ("ok", None, None) for index in range(3)}
