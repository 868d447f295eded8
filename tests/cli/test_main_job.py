"""The README's main job, as written: `scripts/run`, then a read with `scripts/sessionq` and no --db.

HOME, XDG_DATA_HOME and SESSIONQ_ROOT point into a temporary directory, so
nothing touches the real home; SESSIONQ_DB is unset, so the index is the
documented default one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.cli.helpers import REPO
from tests.logfactory import header, simple_turn, write_log

SESSION = "0d5e1f2a-3b4c-4d5e-8f60-718293a4b5c6"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONQ_", "DSH_"))}
    env.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "data"), SESSIONQ_ROOT=str(tmp_path / "root"))
    return env


def test_scripts_run_then_a_read_without_db_sees_the_same_index(tmp_path: Path) -> None:
    write_log(tmp_path / "root", header(SESSION, 1), [simple_turn(0, "the main job")])
    env = _env(tmp_path)
    daemon = subprocess.Popen(
        [str(REPO / "scripts" / "run"), "--poll", "0.2"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        listed = ""
        while time.monotonic() < deadline:
            read = subprocess.run([str(REPO / "scripts" / "sessionq"), "sessions", "--plain"], cwd=tmp_path, env=env, capture_output=True, text=True)
            listed = read.stdout
            if SESSION in listed:
                break
            time.sleep(0.3)
        assert SESSION in listed, (listed, read.stderr)
        assert (tmp_path / "data" / "sessionq" / "index.db").is_file()  # the documented default
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, err = daemon.communicate(timeout=30)
    assert out.splitlines()[0].startswith("sessionq: indexing root")  # set-up already done: one line
    assert str(tmp_path / "data" / "sessionq" / "index.db") in out
    assert "Warning" not in err and "Traceback" not in err
