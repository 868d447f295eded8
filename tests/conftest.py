"""Shared pytest configuration."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


import pytest  # noqa: E402

from tests import machinelock  # noqa: E402
from tests.backends import BACKENDS, Backend  # noqa: E402


@pytest.fixture(scope="session", params=BACKENDS, ids=[backend.name for backend in BACKENDS])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each index backend in turn (tests/backends.py): contract and conformance suites take it."""
    return request.param


@pytest.fixture
def reference_wording(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make synthetic closers carry the reference's texts (read from its golden output)."""
    from indexer import repair
    from tests.corpus import reference_closer_texts

    texts = reference_closer_texts()
    monkeypatch.setattr(repair, "OUTCOME_UNKNOWN_TEXT", texts["TOOL_OUTCOME_UNKNOWN"])
    monkeypatch.setattr(repair, "NOT_STARTED_TEXT", texts["TOOL_NOT_STARTED"])


# -- PostgreSQL (tests/postgres.py) ------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server():  # type: ignore[no-untyped-def]
    """A PostgreSQL server for the session: skipped locally without one, a failure under CI."""
    from tests.postgres import shared_server

    return shared_server()  # stopped when the test process exits


@pytest.fixture
def postgres_url(postgres_server):  # type: ignore[no-untyped-def]
    """A fresh, empty PostgreSQL database for one test: its ``postgresql://`` URL (dropped afterwards)."""
    url = postgres_server.database()
    try:
        yield url
    finally:
        postgres_server.drop(url)


# -- running on several cores (pytest-xdist, scripts/test) -------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """Under pytest-xdist, run a test marked ``exclusive`` while no other worker runs a test.

    Such tests bound a wall time tightly (a query refused within half a second, say); the
    other worker's test would share the machine's cores with it. Every other test holds
    the run's machine lock shared, an exclusive one holds it alone (tests/machinelock.py).
    Serial runs take no lock."""
    lock = machinelock.for_worker(item.config)
    if lock is None:
        return (yield)
    with lock.held(exclusive=item.get_closest_marker("exclusive") is not None):
        return (yield)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each test a node id of its own: Schemathesis names every API operation's test
    ``test_api_conforms`` (tests/http/test_schemathesis.py), and pytest-xdist's ``loadscope``
    schedules by node id, so it would run one of them and silently drop the rest. Such tests
    take their item name (``test_api_conforms[GET /api/events]``) as the last part of the id."""
    seen: dict[str, int] = {}
    for item in items:
        seen[item.nodeid] = seen.get(item.nodeid, 0) + 1
    for item in items:
        if seen[item.nodeid] > 1:
            _rename(item, item.nodeid.rsplit("::", 1)[0] + "::" + item.name)
    ids = [item.nodeid for item in items]
    assert len(ids) == len(set(ids)), "tests sharing a node id would be dropped by pytest-xdist"


def _rename(item: pytest.Item, nodeid: str) -> None:
    """Set ``item``'s node id (pytest has no public way: 9.1+ keeps a structured ``_id``, 8 a ``_nodeid``)."""
    if hasattr(item, "_id"):
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(nodeid)  # noqa: SLF001
    else:
        item._nodeid = nodeid  # noqa: SLF001
    assert item.nodeid == nodeid
