"""Locations of the shared reference corpus and loaders for its golden answers.

The corpus lives beside the checkout (``../shared/corpus``) and is read in
place; it is never copied into the project.  ``SESSIONQ_SHARED`` overrides the
location.  A missing corpus is a hard failure, never a skip: the conformance
suite must run everywhere CI runs.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SESSIONQ_SHARED", REPO.parent / "shared")).resolve()
CORPUS = SHARED / "corpus"
ZSTD_ROOT = CORPUS / "zstd-root"
RAW_ROOT = CORPUS / "raw-root"
GOLDEN = CORPUS / "golden"
SYNTHETIC = CORPUS / "synthetic"
SYNTHETIC_ROOT = SYNTHETIC / "zstd-root"
SYNTHETIC_GOLDEN = SYNTHETIC / "golden"


def require_corpus() -> None:
    """Fail (not skip) when the shared corpus is not where it must be."""
    if not ZSTD_ROOT.is_dir():
        raise RuntimeError(f"shared corpus not found at {CORPUS}; set SESSIONQ_SHARED")


@cache
def golden(name: str, synthetic: bool = False) -> Any:
    """Parse one golden answer file, e.g. ``golden("list-events")``."""
    require_corpus()
    base = SYNTHETIC_GOLDEN if synthetic else GOLDEN
    with open(base / f"{name}.json", encoding="utf-8") as fh:
        return json.load(fh)


def golden_by_session(name: str, synthetic: bool = False) -> dict[str, Any]:
    """Index a per-session golden file by session id."""
    return {entry["sessionId"]: entry for entry in golden(name, synthetic)["sessions"]}
