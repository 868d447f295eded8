"""The filter extension ``{kind: "source", values: [...]}``: listing and search cover every source.

Absent, every answer is the reference's (the golden suites); present, it keeps
the sessions the named sources indexed, in listings and in both searches, and
it is validated like the other session filter kinds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from readmodel import SessionQuery
from readmodel.core.errors import SessionQueryError
from readmodel.live import InMemoryLiveSource
from tests.daemon.support import new_session
from tests.query.support import live_header
from tests.sources.test_many_sources import reconcile


@pytest.fixture
def index(tmp_path: Path) -> Path:
    db = tmp_path / "index.db"
    for source, ids in (("host-a", ("a1", "a2")), ("host-b", ("b1",))):
        root = tmp_path / source
        for n, session_id in enumerate(ids):
            new_session(root, session_id, f"needle in {session_id}", created_at=1_700_000_000_000 + n)
        reconcile(db, root, source)
    return db


def ids(records) -> list[str]:
    return sorted(record.header["id"] for record in records)


def test_listing_filters_by_source_and_covers_every_source_without_it(index: Path) -> None:
    q = SessionQuery.open(str(index))
    assert ids(q.list_sessions()) == ["a1", "a2", "b1"]
    assert ids(q.filter_sessions([{"kind": "source", "values": ["host-a"]}])) == ["a1", "a2"]
    assert ids(q.filter_sessions([{"kind": "source", "values": ["host-b", "nobody"]}])) == ["b1"]
    assert ids(q.filter_sessions([{"kind": "source", "values": []}])) == []
    both = [{"kind": "source", "values": ["host-a", "host-b"]}, {"kind": "id", "values": ["a2", "b1"]}]
    assert ids(q.filter_sessions(both)) == ["a2", "b1"]


def test_search_filters_by_source(index: Path) -> None:
    q = SessionQuery.open(str(index))

    def found(*filters) -> list[str]:
        page = q.search_sessions({"query": "needle", "limit": 10, "sessionFilters": list(filters)})
        return sorted(hit.header["id"] for hit in page.items)

    assert found() == ["a1", "a2", "b1"]
    assert found({"kind": "source", "values": ["host-b"]}) == ["b1"]
    assert found({"kind": "source", "values": []}) == []
    assert found({"kind": "source", "values": ["host-a"]}, {"kind": "cwd", "values": ["/work/demo"]}) == ["a1", "a2"]


@pytest.mark.parametrize("values", [None, "host-a", [1], ["host-a", None]])
def test_a_source_filter_is_validated_like_the_other_kinds(index: Path, values) -> None:
    q = SessionQuery.open(str(index))
    clause = {"kind": "source"} if values is None else {"kind": "source", "values": values}
    for call in (lambda: q.filter_sessions([clause]), lambda: q.search_sessions({"query": "needle", "sessionFilters": [clause]})):
        with pytest.raises(SessionQueryError) as caught:
            call()
        assert caught.value.code == "SESSION_QUERY_INVALID_FILTER"
        assert caught.value.message == "session source filter values must be an array of strings"


def test_a_live_session_has_the_source_of_its_stored_row_and_live_only_ones_none(index: Path) -> None:
    live = InMemoryLiveSource()
    live.create(live_header("a1", created_at=1_700_000_000_000, cwd="/work/demo"))
    live.create(live_header("live-only", created_at=5))
    q = SessionQuery.open(str(index), live=live)
    assert ids(q.filter_sessions([{"kind": "source", "values": ["host-a"]}])) == ["a1", "a2"]
    assert "live-only" in ids(q.list_sessions())


def test_the_cli_filters_listing_and_search_by_source(index: Path) -> None:
    from click.testing import CliRunner

    from indexer.cli import main

    listed = CliRunner().invoke(main, ["sessions", "--db", str(index), "--plain", "--source", "host-a"])
    assert listed.exit_code == 0, listed.output
    assert sorted(line.split("\t")[0] for line in listed.output.splitlines()) == ["a1", "a2"]
    found = CliRunner().invoke(main, ["search", "needle", "--db", str(index), "--json", "--source", "host-b"])
    assert found.exit_code == 0, found.output
    assert '"b1"' in found.output and '"a1"' not in found.output
