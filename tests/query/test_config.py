"""Engine configuration (query-spec §7; T-EX-22 config half)."""

from __future__ import annotations

from pathlib import Path

import pytest

from readmodel.core.config import QueryConfig, validate_config
from readmodel.core.errors import SessionQueryError
from readmodel.query import SessionQuery


def test_defaults_and_null_values() -> None:
    assert validate_config(None) == QueryConfig(50, 4)
    assert validate_config({}) == QueryConfig(50, 4)
    assert validate_config({"readWindowMax": None, "persistedInspectConcurrency": None}) == QueryConfig(50, 4)
    assert SessionQuery(None, None).config == QueryConfig(50, 4)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"readWindowMax": 0}, QueryConfig(0, 4)),
        ({"readWindowMax": 2**60}, QueryConfig(2**60, 4)),
        ({"readWindowMax": 3.0}, QueryConfig(3, 4)),
        ({"persistedInspectConcurrency": 1}, QueryConfig(50, 1)),
        ({"persistedInspectConcurrency": 2**53 - 1}, QueryConfig(50, 2**53 - 1)),
        ({"read_window_max": 7, "persisted_inspect_concurrency": 2}, QueryConfig(7, 2)),
    ],
)
def test_accepted_values(config: dict, expected: QueryConfig) -> None:  # type: ignore[type-arg]
    assert validate_config(config) == expected


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"readWindowMax": -1}, "session-query: readWindowMax must be a non-negative integer"),
        ({"readWindowMax": 1.5}, "session-query: readWindowMax must be a non-negative integer"),
        ({"readWindowMax": float("inf")}, "session-query: readWindowMax must be a non-negative integer"),
        ({"readWindowMax": float("nan")}, "session-query: readWindowMax must be a non-negative integer"),
        ({"readWindowMax": True}, "session-query: readWindowMax must be a non-negative integer"),
        ({"readWindowMax": "5"}, "session-query: readWindowMax must be a non-negative integer"),
        ({"persistedInspectConcurrency": 0}, "session-query: persistedInspectConcurrency must be a positive safe integer"),
        ({"persistedInspectConcurrency": 2**53}, "session-query: persistedInspectConcurrency must be a positive safe integer"),
        ({"persistedInspectConcurrency": 1.5}, "session-query: persistedInspectConcurrency must be a positive safe integer"),
        # readWindowMax is validated first
        ({"readWindowMax": -1, "persistedInspectConcurrency": 0}, "session-query: readWindowMax must be a non-negative integer"),
    ],
)
def test_rejected_values_fail_the_constructor(config: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SessionQueryError) as info:
        SessionQuery(None, None, config)
    assert (info.value.code, info.value.message) == ("SESSION_QUERY_INVALID_CONFIG", message)


def test_open_validates_the_config_before_the_database(tmp_path: Path) -> None:
    with pytest.raises(SessionQueryError) as info:
        SessionQuery.open(str(tmp_path / "missing.db"), config={"readWindowMax": -1})
    assert info.value.code == "SESSION_QUERY_INVALID_CONFIG"
    with pytest.raises(SessionQueryError) as info:
        SessionQuery.open(str(tmp_path / "missing.db"))
    assert info.value.code == "SESSION_QUERY_INDEX_FAILED"


def test_read_window_max_bounds_before_and_after() -> None:
    from readmodel.live import InMemoryLiveSource

    live = InMemoryLiveSource()
    live.create({"version": 0, "id": "s", "createdAt": 0}, [])
    query = SessionQuery(None, live, {"readWindowMax": 0})
    with pytest.raises(SessionQueryError, match="^before must be an integer between 0 and 0$"):
        query.read_event({"sessionId": "s", "seq": 0, "before": 1})
    with pytest.raises(SessionQueryError) as info:
        query.read_event({"sessionId": "s", "seq": 0, "before": 0})
    assert info.value.code == "SESSION_QUERY_EVENT_NOT_FOUND"


def test_engine_lifecycle(tmp_path: Path) -> None:
    # T-EX-23 / T-EX-24 concern the reference's plugin context (``ctx.sessionQuery``
    # registration and scope disposal), which has no Python counterpart; what
    # remains is that an engine needs no persistence and that closing it
    # releases the index synchronously.
    from tests.logfactory import header, simple_turn, write_log
    from tests.query.support import build_index

    assert SessionQuery(None, None).list_sessions() == []
    write_log(tmp_path / "root", header("s"), [simple_turn()])
    db = build_index(tmp_path / "root", tmp_path / "index.db")
    with SessionQuery.open(str(db)) as query:
        assert len(query.list_sessions()) == 1
    with pytest.raises(SessionQueryError) as info:
        query.list_sessions()
    assert info.value.code == "SESSION_QUERY_PERSISTENCE_FAILED"
    assert info.value.message == "session persistence listing failed: the index store is closed"
