"""Property-based API run from the OpenAPI document (Schemathesis)."""

from __future__ import annotations

from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from readmodel.http.app import create_app
from readmodel.http.events import FeedLimits
from tests.logfactory import header, simple_turn, write_log
from tests.query.support import build_index


def _app():  # type: ignore[no-untyped-def]
    import atexit
    import shutil
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="sessionq-st-"))
    atexit.register(shutil.rmtree, work, True)
    root = work / "root"
    write_log(root, header("root", 1), [simple_turn(0, "alpha beta")])
    write_log(root, header("kid", 2, parentSession="root", origin="subagent", delegationDepth=1), [simple_turn(0, "beta")])
    build_index(root, work / "index.db")
    (work / "attachments").mkdir()
    return create_app(
        str(work / "index.db"),
        feed_limits=FeedLimits(max_age=0.5),  # GET /api/events ends soon: each call reads a short stream
        root=str(root),
        attachments=str(work / "attachments"),
        allowed_hosts=["localhost", "127.0.0.1", "testserver"],
    )


schema = schemathesis.openapi.from_asgi("/api/openapi.json", _app())


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_api_conforms(case) -> None:  # type: ignore[no-untyped-def]
    # Schema-valid params can still break engine rules JSON Schema cannot state
    # (filter kinds and ranges, cursor validity, limit bounds): those answer a
    # documented 400, so "positive data acceptance" is not checked.  A convenience
    # GET reads only the method's documented names and ignores any other (README,
    # readmodel.http.openapi.query_params), which "negative data rejection" would
    # flag for every method whose parameters are all optional.
    case.call_and_validate(excluded_checks=[positive_data_acceptance, negative_data_rejection])
