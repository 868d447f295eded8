"""``sessionq inspect`` of a log holding a decompression bomb: a corrupt-session error, in bounded memory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.bombs import compressed_bomb, root_with_bomb, run_measured


def test_inspecting_a_bomb_is_a_corrupt_session_error_within_bounded_memory(tmp_path: Path) -> None:
    bomb = compressed_bomb(1100 << 20, b"\n")  # 1.1 GB of line feeds: empty lines, if it were read
    path = root_with_bomb(tmp_path, bomb, healthy=0)
    measured = run_measured([sys.executable, "-m", "indexer.cli", "inspect", "bomb", "--root", str(tmp_path), "--json"])
    assert measured.tree_peak_mib < 300, f"peak {measured.tree_peak_mib:.0f} MiB"
    assert measured.returncode == 2
    bomb_at = path.stat().st_size - len(bomb)
    assert json.loads(measured.stdout) == {
        "error": {
            "code": "SESSION_QUERY_CORRUPT_SESSION",
            "message": f'stored session "bomb" is corrupt: frame at byte {bomb_at} holds more than {256 << 20} bytes of plaintext',
        }
    }
    assert "Traceback" not in measured.stderr
