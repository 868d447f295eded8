"""Property: a fold resumed from serialised state equals the fold from scratch.

Random valid logs mix log-only events, appends of the three surface types,
range replacements (nested: replacement nodes get replaced again) and
tool-result prunes.  An independent list model predicts the final surface.
For every split point, folding the prefix, serialising, restoring and feeding
the rest must give the same state, the same classifications, and a delta that
names exactly the earlier events whose classification changed.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from readmodel.projection.surface import SurfaceFold, SurfaceFoldError, SurfaceReplacement, fold_events
from tests.projection.surface_builders import (
    ABSENT,
    assistant,
    event,
    log_only,
    replace,
    tool_data,
    tool_result,
    user,
)

LOG_ONLY_TYPES = ("assistant/chunk", "turn/start", "step/start", "tool/call", "compaction/summary")


class LogModel:
    """A deliberately naive model of the surface: a Python list and splices."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.nodes: list[int] = []
        self.tool_params: dict[int, dict[str, Any]] = {}  # current tool/result node -> its data params
        self.shadowed: set[int] = set()
        self.replacements: list[SurfaceReplacement] = []

    @property
    def next_seq(self) -> int:
        return len(self.events)

    def surfaces(self) -> list[str]:
        current = set(self.nodes)
        return ["current" if s in current else "shadowed" if s in self.shadowed else "log-only"
                for s in range(self.next_seq)]

    def add_log_only(self, type_: str) -> None:
        self.events.append(log_only(self.next_seq, type_))

    def add_append(self, kind: str, sources: Any, params: dict[str, Any]) -> None:
        seq = self.next_seq
        if kind == "user":
            self.events.append(user(seq, sources=sources))
        elif kind == "assistant":
            self.events.append(assistant(seq, sources=sources))
        else:
            self.events.append(tool_result(seq, tool_data(**params), sources=sources))
            self.tool_params[seq] = params
        self.nodes.append(seq)

    def add_replacement(self, i: int, j: int, kind: str, sources: list[int], params: dict[str, Any] | None) -> None:
        seq = self.next_seq
        start, end = self.nodes[i], self.nodes[j]
        shadowed = self.nodes[i : j + 1]
        op = replace(start, end)
        if kind == "user":
            self.events.append(user(seq, op=op, sources=sources))
        elif kind == "assistant":
            self.events.append(assistant(seq, op=op, sources=sources))
        else:
            assert params is not None
            self.events.append(tool_result(seq, tool_data(**params), op=op, sources=sources))
        for node in shadowed:
            self.tool_params.pop(node, None)
        if params is not None:
            self.tool_params[seq] = params
        self.shadowed.update(shadowed)
        self.replacements.append(SurfaceReplacement(seq, start, end, tuple(shadowed)))
        self.nodes[i : j + 1] = [seq]


@st.composite
def extra_sources(draw: st.DrawFn, model: LogModel, required: list[int], allow_empty: bool) -> Any:
    """A valid sourceEventSeqs: the required seqs plus distinct earlier ones, shuffled."""
    pool = [s for s in range(model.next_seq) if s not in required]
    extra = draw(st.lists(st.sampled_from(pool), unique=True, max_size=3)) if pool else []
    chosen = draw(st.permutations(required + extra))
    if not chosen and not allow_empty:
        return ABSENT  # an empty list is only legal on assistant/message: leave the key out
    return list(chosen)


@st.composite
def valid_logs(draw: st.DrawFn, max_steps: int = 36) -> LogModel:
    model = LogModel()
    for _ in range(draw(st.integers(0, max_steps))):
        actions = ["log", "append"]
        if model.nodes:
            actions.append("replace")
        if model.tool_params:
            actions.append("prune")
        action = draw(st.sampled_from(actions))
        if action == "log":
            model.add_log_only(draw(st.sampled_from(LOG_ONLY_TYPES)))
        elif action == "append":
            kind = draw(st.sampled_from(["user", "assistant", "tool"]))
            sources = draw(extra_sources(model, [], allow_empty=kind == "assistant"))
            if kind == "assistant" and draw(st.booleans()):
                sources = []  # an assistant message may cite nothing at all
            params = {"call_id": f"call-{model.next_seq}", "message_id": f"t{model.next_seq}",
                      "output": draw(st.sampled_from(["out", "long output " * 5])),
                      "turn": draw(st.sampled_from([1, 2])), "is_error": draw(st.booleans())}
            model.add_append(kind, sources, params)
        elif action == "replace":
            i = draw(st.integers(0, len(model.nodes) - 1))
            j = draw(st.integers(i, len(model.nodes) - 1))
            kind = draw(st.sampled_from(["user", "assistant"]))
            sources = draw(extra_sources(model, model.nodes[i : j + 1], allow_empty=False))
            model.add_replacement(i, j, kind, sources, None)
        else:
            target = draw(st.sampled_from(sorted(model.tool_params)))
            params = dict(model.tool_params[target])
            params["output"] = draw(st.sampled_from(["[pruned]", "", "kept head"]))
            if draw(st.booleans()):
                params["turn"] = float(params["turn"])  # 1 and 1.0 are the same JS number
            index = model.nodes.index(target)
            sources = draw(extra_sources(model, [target], allow_empty=False))
            model.add_replacement(index, index, "tool", sources, params)
    return model


def prefix_surfaces(events: list[dict[str, Any]]) -> list[str]:
    fold = SurfaceFold()
    fold.extend(events)
    return fold.result().surfaces


@given(valid_logs())
def test_fold_matches_the_list_model(model: LogModel) -> None:
    result = fold_events(model.events)
    assert result.nodes == model.nodes
    assert result.surfaces == model.surfaces()
    assert result.replacements == model.replacements
    fold = SurfaceFold()
    assert [fold.apply(e) for e in model.events] == [
        next((r for r in model.replacements if r.seq == s), None) for s in range(model.next_seq)
    ]


@given(valid_logs(), st.booleans())
def test_resuming_at_every_split_equals_folding_from_scratch(model: LogModel, track_history: bool) -> None:
    events = model.events
    whole = SurfaceFold(track_history=track_history)
    whole.extend(events)
    final_state = whole.to_bytes()
    full = fold_events(events)
    for split in range(len(events) + 1):
        prefix = SurfaceFold(track_history=track_history)
        prefix.extend(events[:split])
        resumed = SurfaceFold.from_bytes(prefix.to_bytes())
        delta = resumed.extend(events[split:])

        assert resumed.to_bytes() == final_state
        assert resumed.nodes() == full.nodes
        if track_history:
            assert resumed.result() == full
        assert delta.first_seq == split
        assert delta.surfaces == full.surfaces[split:]
        assert delta.replacements == [r for r in full.replacements if r.seq >= split]

        before = prefix_surfaces(events[:split])
        changed = {s for s in range(split) if before[s] != full.surfaces[s]}
        assert set(delta.shadowed_earlier) == changed
        assert len(delta.shadowed_earlier) == len(changed)  # each reported once
        assert all(before[s] == "current" and full.surfaces[s] == "shadowed" for s in changed)


def invalid_event(kind: str, model: LogModel) -> dict[str, Any]:
    """An event that breaks the surface contract at position ``model.next_seq``."""
    seq = model.next_seq
    if kind == "gap":
        return user(seq + 1)
    if kind == "stale-start":
        return user(seq, op=replace(seq + 5, seq + 5), sources=[0] if seq else [])
    if kind == "uncited":  # the range holds >= 2 nodes; citing only the last leaves the others uncovered
        return user(seq, op=replace(model.nodes[0], model.nodes[-1]), sources=[model.nodes[-1]])
    if kind == "marker":
        return event("turn/start", seq, {"turn": 1}, op="append")
    return user(seq, sources=[seq])


@given(valid_logs(max_steps=20), st.sampled_from(["gap", "stale-start", "uncited", "marker", "future-source"]),
       valid_logs(max_steps=5))
def test_a_failure_is_part_of_the_resumable_state(model: LogModel, kind: str, tail: LogModel) -> None:
    if kind == "uncited" and len(model.nodes) < 2:
        kind = "marker"
    bad = invalid_event(kind, model)
    events = [*model.events, bad, *({**e, "seq": e["seq"] + model.next_seq + 1} for e in tail.events)]
    with_error = SurfaceFold()
    try:
        with_error.extend(events)
    except SurfaceFoldError as error:
        expected = (error.message, error.seq)
    else:  # pragma: no cover - the generator always produces an invalid event
        raise AssertionError("the log should not fold")
    assert expected[1] == model.next_seq
    for split in range(len(events) + 1):
        prefix = SurfaceFold()
        try:
            prefix.extend(events[:split])
        except SurfaceFoldError:
            pass
        resumed = SurfaceFold.from_bytes(prefix.to_bytes())
        try:
            resumed.extend(events[split:])
        except SurfaceFoldError as error:
            assert (error.message, error.seq) == expected
        else:
            raise AssertionError(f"resuming at {split} lost the failure")
        assert resumed.next_seq == model.next_seq  # nothing after the bad event was folded
