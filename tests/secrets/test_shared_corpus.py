"""The shared reference corpus holds no detected secret, so the default policy leaves
every golden answer unchanged (tests/conformance runs under it) and ``off`` derives
the same documents."""

from __future__ import annotations

import pytest

from readmodel.projection.secrets import find_secrets
from tests.corpus import GOLDEN, RAW_ROOT


def test_no_rule_fires_anywhere_in_the_shared_corpus() -> None:
    files = [path for base in (RAW_ROOT, GOLDEN) if base.is_dir() for path in sorted(base.rglob("*")) if path.is_file()]
    if not files:
        pytest.skip("the shared corpus is not beside this checkout")
    found = {}
    for path in files:
        spans = find_secrets(path.read_bytes().decode("utf-8", "surrogateescape"))
        if spans:
            found[str(path)] = [span.kind for span in spans]
    assert found == {}


def test_redacting_every_shared_log_line_by_line_and_by_chunk_run_changes_nothing() -> None:
    from readmodel.projection.redaction import redacted_log_lines

    logs = sorted(RAW_ROOT.rglob("*.jsonl")) if RAW_ROOT.is_dir() else []
    if not logs:
        pytest.skip("the shared corpus is not beside this checkout")
    changed = []
    for path in logs:
        text = path.read_bytes().decode("utf-8", "surrogateescape")
        lines = text.split("\n")
        pieces = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        if "".join(redacted_log_lines(iter(pieces))) != text:
            changed.append(str(path))
    assert changed == []  # so `--redact all` exports of the corpus are its logs byte for byte
