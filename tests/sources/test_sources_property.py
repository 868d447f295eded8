"""Property: whatever two sources' roots go through, and in whatever order their daemons
reconcile, the shared index equals a cold build of both final roots."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.daemon.support import append_turn, new_session
from tests.indexstate import index_state
from tests.sources.test_many_sources import PROBES, reconcile

SOURCES = ("host-a", "host-b")
operation = st.tuples(st.sampled_from(["new", "append", "delete", "reconcile"]), st.sampled_from(SOURCES), st.integers(0, 3))


@settings(max_examples=12)
@given(st.lists(operation, max_size=14))
def test_any_history_of_two_sources_equals_a_cold_build(operations: list[tuple[str, str, int]]) -> None:
    base = Path(tempfile.mkdtemp(prefix="sources-property-"))
    try:
        roots = {source: base / source for source in SOURCES}
        for root in roots.values():
            root.mkdir()
        live: dict[tuple[str, int], tuple[Path, int]] = {}
        db = base / "index.db"
        for kind, source, n in operations:
            key = (source, n)
            if kind == "new" and key not in live:
                live[key] = new_session(roots[source], f"{source}-{n}", f"alpha {source} {n}", created_at=1_700_000_000_000 + n)
            elif kind == "append" and key in live:
                path, seq = live[key]
                live[key] = (path, append_turn(path, seq, f"omega {source} {n} {seq}"))
            elif kind == "delete" and key in live:
                shutil.rmtree(live.pop(key)[0].parent)
            elif kind == "reconcile":
                reconcile(db, roots[source], source)
        for source in SOURCES:
            reconcile(db, roots[source], source)
        cold = base / "cold.db"
        for source in reversed(SOURCES):
            reconcile(cold, roots[source], source)
        assert index_state(str(db), PROBES) == index_state(str(cold), PROBES)
    finally:
        shutil.rmtree(base, ignore_errors=True)
