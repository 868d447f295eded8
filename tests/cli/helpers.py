"""Running the real ``sessionq`` console script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def sessionq(*args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python -m indexer.cli ARGS`` with this interpreter (the installed entry point's target)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "indexer.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=full_env,
        timeout=timeout,
    )


def json_out(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(result.stdout)
