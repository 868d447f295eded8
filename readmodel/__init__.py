"""sessionq's read model: vocabulary, projection rules and the query engine.

``from readmodel import SessionQuery`` is the public entry point
(interface.md); it is imported lazily so that the indexer, which only needs
the pure rules, does not load the query engine.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "SessionQuery": "readmodel.query",
    "SessionQueryError": "readmodel.core.errors",
    "InMemoryLiveSource": "readmodel.live",
    "LiveSource": "readmodel.live",
    "AbortController": "readmodel.core.cancel",
    "AbortSignal": "readmodel.core.cancel",
    "QueryConfig": "readmodel.core.config",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'readmodel' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
