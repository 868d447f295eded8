"""How the reader's fast path cuts the events it hands its sink into batches.

A batch runs on across appended surface events (their fold replaces nothing),
for about :data:`~indexer.pipeline.BATCH_EVENTS` events, and ends before any
surface event whose fold may replace: the sink has then taken every row the
replacement shadows before the replacement's callback, as the projector's
contract asks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from indexer.layout import Compression
from indexer.packedrows import PackedRow
from indexer.pipeline import BATCH_EVENTS
from indexer.reader import LogReader
from readmodel.projection.surface import SURFACE_EVENT_TYPES
from tests.index.test_incremental_equals_cold import session_events
from tests.logfactory import header, simple_turn, write_log


def _calls(path: Path) -> list[tuple[Any, ...]]:
    """The sink's and the replacement hook's calls, in order: ("add", seqs, surface seqs) and ("replace", seq, shadowed)."""
    calls: list[tuple[Any, ...]] = []

    def add(items: list[Any], lines: bytes | None = None) -> None:
        seqs: list[int] = []
        surface: list[int] = []
        for item in items:
            if type(item) is PackedRow:
                seqs += range(item.first_seq, item.first_seq + len(item.times))
            else:
                seqs.append(item["seq"])
                if item["type"] in SURFACE_EVENT_TYPES:
                    surface.append(item["seq"])
        calls.append(("add", seqs, surface))

    def replace(seq: int, shadowed: tuple[int, ...]) -> None:
        calls.append(("replace", seq, shadowed))

    LogReader(path, Compression.ZSTD, sink=add, on_replacement=replace, packed_rows=True, raw_lines=True).read()
    return calls


def test_a_batch_runs_on_across_appended_surface_events_for_a_bounded_number_of_events(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    for n in range(40):
        events += simple_turn(len(events), f"turn {n}")  # two appended surface events in nine
    path = write_log(tmp_path / "root", header("runs-on"), [events])
    adds = [call for call in _calls(path) if call[0] == "add"]
    assert [seq for _, seqs, _ in adds for seq in seqs] == list(range(len(events)))
    surface = sum(len(found) for _, _, found in adds)
    assert surface == 80 and len(adds) < surface / 4  # one batch per several surface events, not one each
    for _, seqs, found in adds:
        # A surface event joins the open batch only while it is under the bound.
        assert all(seq < seqs[0] + BATCH_EVENTS for seq in found[1:])
        assert len(seqs) <= BATCH_EVENTS + len(simple_turn())


def test_every_row_a_replacement_shadows_reaches_the_sink_before_the_replacement_does(tmp_path: Path) -> None:
    events = session_events(1)
    path = write_log(tmp_path / "root", header("replaced"), [events])
    calls = _calls(path)
    replacements = [call for call in calls if call[0] == "replace"]
    assert len(replacements) == 2  # the pruned tool result and the compaction summary
    for at, call in enumerate(calls):
        if call[0] != "replace":
            continue
        _, seq, shadowed = call
        before = {s for c in calls[:at] if c[0] == "add" for s in c[1]}
        after = {s for c in calls[at:] if c[0] == "add" for s in c[1]}
        assert set(shadowed) <= before
        assert seq in after and seq not in before
    assert [seq for call in calls if call[0] == "add" for seq in call[1]] == list(range(len(events)))
