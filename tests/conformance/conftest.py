"""Conformance collection: the golden search suite's accelerator switch is SQLite's alone."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the PostgreSQL runs of the ``pure-sql`` variant: PostgreSQL ranks from stored
    positions, never with the SQLite accelerator, so that variant would repeat the ``ftsaux`` one
    (the tokenizer's two paths are proven equal in tests/search/test_tokens.py)."""
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        backend = params.get("backend")
        if getattr(backend, "name", None) == "postgresql" and params.get("clients") is False:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
