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


def replicated_root(directory: Path, megabytes: float) -> Path:
    """``directory/root``: the shared corpus replicated to ``megabytes`` of logs, as the benchmarks' roots are."""
    require_corpus()
    from bench.corpus import build_root

    root = directory / "root"
    build_root(root, megabytes, source=ZSTD_ROOT)
    return root


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


# SHA-256 of the reference's two crash-closer result texts (format-spec §7.4).
_CLOSER_TEXT_SHA256 = {
    "TOOL_OUTCOME_UNKNOWN": "5655d1cb75343f7b6f034300ccd4cea6f70c07d430825b4575fa03890344bf52",
    "TOOL_NOT_STARTED": "613f8e88c4324029a758e388a77c9082e93d36d39ad23d5f76c5529fe7b0b42f",
}


@cache
def reference_closer_texts() -> dict[str, str]:
    """The reference's closer texts, read at test time from its own golden documents.

    sessionq writes its own wording; conformance tests that must reproduce the
    reference byte for byte (event hashes, search ranking over closer text) swap
    these in.  They are taken from the synthetic golden ``filter-events.json``
    and verified against the hashes the format spec publishes, never stored in
    the project.
    """
    import hashlib

    found: dict[str, str] = {}
    for session in golden("filter-events", synthetic=True)["sessions"]:
        for document in session["documents"]:
            for code, digest in _CLOSER_TEXT_SHA256.items():
                name = "ToolOutcomeUnknownError" if code == "TOOL_OUTCOME_UNKNOWN" else "ToolNotStartedError"
                suffix = f"\n{name}\n{code}"
                text = document["text"]
                if document["type"] == "tool/result" and text.endswith(suffix):
                    candidate = text[: -len(suffix)]
                    if hashlib.sha256(candidate.encode()).hexdigest() == digest:
                        found[code] = candidate
    if set(found) != set(_CLOSER_TEXT_SHA256):
        raise RuntimeError("the reference closer texts were not found in the synthetic golden documents")
    return found
