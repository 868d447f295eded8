"""The package layout: layers import one way, no cycles, modules stay small.

The import graph is read from the source (every ``import`` statement,
including those inside functions), so a lazy import cannot hide a cycle or a
layer violation.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("readmodel", "indexer")
MAX_MODULE_LINES = 800
MAX_TOP_LEVEL_MODULES = 12

# Each layer of readmodel and what it may import (besides itself).  Layers are
# keyed by the first component below ``readmodel``; the engine is the
# top-level modules ``query`` and ``live``.
LAYER_OF = {
    "core": "core",
    "projection": "projection",
    "store": "store",
    "export": "export",
    "search": "search",
    "query": "engine",
    "live": "engine",
    "rpc": "rpc",
    "tools": "tools",
    "http": "http",
    "cli": "cli",
}
MAY_IMPORT = {
    "core": set(),
    "projection": {"core"},
    "store": {"core", "projection"},
    "export": {"core", "projection", "store"},
    "search": {"core", "projection", "store"},
    "engine": {"core", "projection", "store", "search"},
    "rpc": {"core", "projection", "store", "search", "engine"},
    "tools": {"core", "projection", "store", "search", "engine"},
    "http": {"core", "projection", "store", "search", "engine", "export", "rpc"},
    "cli": {"core", "projection", "store", "search", "engine", "export", "rpc", "tools", "http"},
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(module: str, path: Path) -> Iterator[str]:
    """Project modules ``module`` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name


GRAPH = {module: set(_imported(module, path)) for module, path in MODULES.items()}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "readmodel" or len(parts) == 1:
        return None
    return LAYER_OF[parts[1]]


def test_every_readmodel_module_belongs_to_a_layer() -> None:
    unplaced = [m for m in MODULES if m.startswith("readmodel.") and m.split(".")[1] not in LAYER_OF]
    assert unplaced == []


def test_layers_import_only_the_layers_below_them() -> None:
    violations = []
    for module, imports in GRAPH.items():
        layer = _layer(module)
        if layer is None:
            continue
        for target in imports:
            other = _layer(target)
            if target.startswith("indexer"):
                violations.append(f"{module} -> {target} (readmodel never imports indexer)")
            elif other is not None and other != layer and other not in MAY_IMPORT[layer]:
                violations.append(f"{module} ({layer}) -> {target} ({other})")
    assert violations == []


def test_there_is_no_import_cycle() -> None:
    # Tarjan's strongly connected components over the module graph.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_the_size_limit(module: str) -> None:
    lines = MODULES[module].read_text().count("\n")
    assert lines <= MAX_MODULE_LINES, f"{module} has {lines} lines"


def test_readmodel_keeps_few_top_level_modules() -> None:
    top = [p for p in (REPO / "readmodel").glob("*.py")]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, sorted(p.name for p in top)


def test_every_subpackage_says_what_it_owns() -> None:
    for init in (REPO / "readmodel").glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc is not None and "Owns:" in doc and "Imports:" in doc, init
