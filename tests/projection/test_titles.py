"""The title fold (format-spec §8, query-spec §2.10; T-EX-3, T-EX-10, T-EX-11)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from readmodel.projection.titles import (
    advance_title,
    fold_title,
    latest_title_event,
    title_observation,
    title_snapshot,
)
from readmodel.core.vocabulary import SessionTitleObservation, SessionTitleSnapshot, to_builtins
from tests.projection.builders import event, text, title, user

HEADER: dict[str, Any] = {"version": 0, "id": "persisted", "createdAt": 2, "cwd": "/same", "origin": {"kind": "fork", "from": ["x"]}}


class TestFold:
    def test_t_ex_3_title_parts(self) -> None:
        snapshot = fold_title([title(0, "Persisted title", time=20)])
        assert snapshot is not None
        assert (snapshot.title, snapshot.event_seq, snapshot.updated_at) == ("Persisted title", 0, 20)

    def test_snapshot_shape_and_key_order(self) -> None:
        snapshot = fold_title([
            user(0, [text("hi")]),
            title(1, "First words", time=7, message_seqs=[0], source={"kind": "fallback"}),
        ])
        encoded = to_builtins(snapshot)
        assert list(encoded) == ["title", "messageSeqs", "source", "eventSeq", "updatedAt"]
        assert encoded == {"title": "First words", "messageSeqs": [0], "source": {"kind": "fallback"}, "eventSeq": 1, "updatedAt": 7}

    def test_no_title_event(self) -> None:
        assert fold_title([]) is None
        assert fold_title([user(0, [text("hi")]), event("session/title-llm-request", 1, {"messageSeqs": [0]})]) is None

    def test_last_by_log_position_wins_not_latest_time(self) -> None:
        snapshot = fold_title([title(0, "old", time=99), title(1, "new", time=1), user(2, [text("later")])])
        assert snapshot is not None and (snapshot.title, snapshot.event_seq, snapshot.updated_at) == ("new", 1, 1)

    def test_only_the_last_title_event_is_read(self) -> None:
        malformed = event("session/title", 0, {"title": "broken"})
        snapshot = fold_title([malformed, title(1, "fine")])
        assert snapshot is not None and snapshot.title == "fine"

    def test_snapshot_is_detached_from_the_log(self) -> None:
        log = [title(0, "t", message_seqs=[1, 2], source={"kind": "provider", "provider": "p", "model": {"provider": "a", "model": "b"}})]
        snapshot = fold_title(log)
        assert snapshot is not None
        snapshot.message_seqs.append(99)
        snapshot.source["model"]["model"] = "changed"
        assert log[0]["data"]["messageSeqs"] == [1, 2]
        assert log[0]["data"]["source"]["model"] == {"provider": "a", "model": "b"}


class TestSources:
    @pytest.mark.parametrize(
        ("source", "copied"),
        [
            ({"kind": "fallback"}, {"kind": "fallback"}),
            ({"kind": "fallback", "extra": 1}, {"kind": "fallback"}),
            ({"kind": "user", "by": "me"}, {"kind": "user"}),
            ({"kind": "provider", "provider": "deepseek-official"}, {"kind": "provider", "provider": "deepseek-official"}),
            (
                {"kind": "provider", "provider": "p", "model": {"provider": "a", "model": "b"}, "note": "x"},
                {"kind": "provider", "provider": "p", "model": {"provider": "a", "model": "b"}},
            ),
            ({"model": {"model": "m"}, "kind": "provider", "provider": "p"}, {"kind": "provider", "provider": "p", "model": {"model": "m"}}),
            ({"kind": "provider"}, {"kind": "provider"}),
            ({"kind": "provider", "provider": None}, {"kind": "provider", "provider": None}),
            ({"kind": "provider", "provider": "p", "model": None}, {"kind": "provider", "provider": "p", "model": {}}),
            ({"kind": "provider", "provider": "p", "model": "ab"}, {"kind": "provider", "provider": "p", "model": {"0": "a", "1": "b"}}),
            ({"kind": "provider", "provider": "p", "model": ["x"]}, {"kind": "provider", "provider": "p", "model": {"0": "x"}}),
            ({"kind": "provider", "provider": "p", "model": 3}, {"kind": "provider", "provider": "p", "model": {}}),
        ],
    )
    def test_source_copy_keeps_only_known_fields(self, source: dict[str, Any], copied: dict[str, Any]) -> None:
        snapshot = fold_title([title(0, source=source)])
        assert snapshot is not None
        assert snapshot.source == copied
        assert list(snapshot.source) == list(copied)

    @pytest.mark.parametrize("source", [{"kind": "robot"}, {}, "fallback", ["fallback"]])
    def test_unknown_source_kind_raises(self, source: Any) -> None:
        log = [event("session/title", 0, {"title": "t", "messageSeqs": [], "source": source})]
        with pytest.raises(TypeError):
            fold_title(log)

    def test_missing_source_raises(self) -> None:
        with pytest.raises(TypeError):
            fold_title([event("session/title", 0, {"title": "t", "messageSeqs": []})])


class TestMalformed:
    def test_t_ex_10_missing_message_seqs_is_a_type_error(self) -> None:
        with pytest.raises(TypeError):
            fold_title([event("session/title", 0, {"title": "t", "source": {"kind": "user"}})])

    @pytest.mark.parametrize("seqs", [None, 3, True, {"0": 1}])
    def test_non_iterable_message_seqs(self, seqs: Any) -> None:
        with pytest.raises(TypeError):
            fold_title([event("session/title", 0, {"title": "t", "messageSeqs": seqs, "source": {"kind": "user"}})])

    def test_string_message_seqs_spread_into_characters(self) -> None:
        snapshot = fold_title([event("session/title", 0, {"title": "t", "messageSeqs": "1😀", "source": {"kind": "user"}})])
        assert snapshot is not None and snapshot.message_seqs == ["1", "😀"]

    @pytest.mark.parametrize("data", [None, "title", [1], 5])
    def test_non_object_data(self, data: Any) -> None:
        with pytest.raises(TypeError):
            fold_title([event("session/title", 0, data)])

    def test_absent_title_is_omitted_like_undefined(self) -> None:
        snapshot = fold_title([event("session/title", 4, {"messageSeqs": [], "source": {"kind": "user"}}, time=5)])
        assert to_builtins(snapshot) == {"messageSeqs": [], "source": {"kind": "user"}, "eventSeq": 4, "updatedAt": 5}

    def test_odd_title_values_are_returned_verbatim(self) -> None:
        snapshot = fold_title([title(0, None), title(1, {"rich": True})])
        assert snapshot is not None and snapshot.title == {"rich": True}


class TestObservation:
    def test_t_ex_11_no_title_key(self) -> None:
        observation = title_observation(HEADER, [user(0, [text("hi")])])
        assert isinstance(observation, SessionTitleObservation)
        assert to_builtins(observation) == {"session": HEADER}
        assert b'"title"' not in msgspec.json.encode(observation)

    def test_with_title(self) -> None:
        observation = title_observation(HEADER, [title(0, "Named", time=3, source={"kind": "user"})])
        assert to_builtins(observation) == {
            "session": HEADER,
            "title": {"title": "Named", "messageSeqs": [], "source": {"kind": "user"}, "eventSeq": 0, "updatedAt": 3},
        }

    def test_header_is_cloned(self) -> None:
        header = {"version": 0, "id": "h", "createdAt": 1, "origin": {"kind": "fork", "path": [1]}}
        observation = title_observation(header, [])
        observation.session["origin"]["path"].append(2)
        observation.session["cwd"] = "/x"
        assert header == {"version": 0, "id": "h", "createdAt": 1, "origin": {"kind": "fork", "path": [1]}}

    def test_malformed_title_raises(self) -> None:
        with pytest.raises(TypeError):
            title_observation(HEADER, [event("session/title", 0, {"title": "t", "source": {"kind": "user"}})])


class TestIncremental:
    def test_latest_title_event_with_previous(self) -> None:
        first = title(0, "a")
        assert latest_title_event([user(1, [text("x")])], first) is first
        second = title(2, "b")
        assert latest_title_event([user(1, [text("x")]), second], first) is second
        assert latest_title_event([]) is None

    def test_advance_keeps_previous_without_new_titles(self) -> None:
        previous = title_snapshot(title(0, "a"))
        assert advance_title(previous, [user(1, [text("x")])]) is previous
        assert advance_title(None, []) is None

    def test_advance_replaces_with_the_last_new_title(self) -> None:
        previous = title_snapshot(title(0, "a"))
        snapshot = advance_title(previous, [title(1, "b"), title(2, "c"), user(3, [text("x")])])
        assert isinstance(snapshot, SessionTitleSnapshot) and (snapshot.title, snapshot.event_seq) == ("c", 2)

    def test_advance_raises_for_a_malformed_new_last_title(self) -> None:
        with pytest.raises(TypeError):
            advance_title(None, [title(1, "ok"), event("session/title", 2, {"title": "bad"})])

    @settings(deadline=None)
    @given(kinds=st.lists(st.sampled_from(["title", "user", "other"]), max_size=30), cuts=st.lists(st.integers(0, 30), max_size=4))
    def test_batches_fold_like_the_whole_log(self, kinds: list[str], cuts: list[int]) -> None:
        log: list[dict[str, Any]] = []
        for seq, kind in enumerate(kinds):
            if kind == "title":
                log.append(title(seq, f"t{seq}", time=100 - seq))
            elif kind == "user":
                log.append(user(seq, [text(f"u{seq}")]))
            else:
                log.append(event("turn/start", seq, {"turn": 1}))
        bounds = sorted({0, len(log), *(min(cut, len(log)) for cut in cuts)})
        state = None
        for start, end in zip(bounds, bounds[1:]):
            state = advance_title(state, log[start:end])
        assert to_builtins(state) == to_builtins(fold_title(log))
