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
