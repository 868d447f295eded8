"""The sources' command line: ``index --source``, per-source locks, ``status``, ``prune --source``."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from click.testing import CliRunner

from indexer.cli import main
from tests.daemon.support import Processes, new_session, query, wait_for
from tests.indexstate import index_state
from tests.sources.test_many_sources import PROBES, cold, make_root


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``sessionq ARGS`` in this process (no terminal on stdin), as a finished process would report.

    ``index`` installs its SIGINT/SIGTERM handlers: this process's own are put back afterwards.
    """
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = CliRunner().invoke(main, list(args))
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def test_daemons_of_two_sources_watch_two_roots_into_one_index(tmp_path: Path, processes: Processes) -> None:
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    make_root(root_a, "a", 4)
    make_root(root_b, "b", 4)
    db = tmp_path / "index.db"
    daemon_a = processes.daemon(root_a, db, "--source", "host-a", "--workers", "0")
    daemon_b = processes.daemon(root_b, db, "--source", "host-b", "--workers", "0")
    new_session(root_a, "a-live", "alpha written while watched")
    new_session(root_b, "b-live", "omega written while watched")
    wait_for(lambda: query(db, 'SELECT count(*) FROM "sessions"') == [(10,)], what="both new sessions indexed")

    # One daemon per source: a second host-a daemon is refused at once, naming the holder.
    second = cli("index", "--once", "--root", str(root_a), "--db", str(db), "--source", "host-a")
    assert second.returncode == 1 and "already writing" in second.stderr and f"pid {daemon_a.pid}" in second.stderr, second.stderr
    assert "for source host-a" in second.stderr and "Traceback" not in second.stderr
    # An upgrade needs every daemon stopped; pruning a running source is refused too.
    upgrade = cli("db", "upgrade", "--db", str(db))
    assert upgrade.returncode == 1 and "already writing" in upgrade.stderr, upgrade.stderr
    refused = cli("prune", "--db", str(db), "--source", "host-b", "--yes")
    assert refused.returncode == 1 and f"pid {daemon_b.pid}" in refused.stderr, refused.stderr

    status = json.loads(cli("status", "--db", str(db), "--json").stdout)
    by_source = {entry["source"]: entry for entry in status["sources"]}
    assert by_source["host-a"]["writerPid"] == daemon_a.pid and by_source["host-b"]["writerPid"] == daemon_b.pid
    assert by_source["host-a"]["sessions"] == by_source["host-b"]["sessions"] == 5
    text = cli("status", "--db", str(db)).stdout
    assert "sources:" in text and "host-a  5 sessions" in text and f"indexer pid {daemon_b.pid}" in text

    assert daemon_a.stop() == 0 and daemon_b.stop() == 0
    assert index_state(str(db), PROBES) == cold(tmp_path, "cold", [(root_a, "host-a"), (root_b, "host-b")])


def test_prune_removes_a_sources_sessions_on_purpose(tmp_path: Path) -> None:
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    make_root(root_a, "a", 3)
    make_root(root_b, "b", 2)
    db = tmp_path / "index.db"
    for root, source in ((root_a, "host-a"), (root_b, "host-b")):
        built = cli("index", "--once", "--root", str(root), "--db", str(db), "--source", source, "--workers", "0")
        assert built.returncode == 0, built.stderr

    # Without a terminal, --yes is required: nothing is removed.
    unconfirmed = cli("prune", "--db", str(db), "--source", "host-a")
    assert unconfirmed.returncode == 1 and "would remove 3 sessions of source host-a" in unconfirmed.stderr
    assert "--yes" in unconfirmed.stderr and query(db, 'SELECT count(*) FROM "sessions"') == [(5,)]
    # An unknown source: nothing to remove, success.
    unknown = cli("prune", "--db", str(db), "--source", "nobody", "--yes")
    assert unknown.returncode == 0 and "nothing to remove" in unknown.stdout
    # Usage errors: no source, an invalid name.
    assert cli("prune", "--db", str(db), "--yes").returncode == 2
    invalid = cli("prune", "--db", str(db), "--source", "../x", "--yes")
    assert invalid.returncode == 2 and "invalid source name" in invalid.stderr

    generation = query(db, 'SELECT "global_generation" FROM "index_meta"')[0][0]
    pruned = cli("prune", "--db", str(db), "--source", "host-a", "--yes")
    assert pruned.returncode == 0 and "removed 3 sessions of source host-a" in pruned.stdout, pruned.stderr
    assert query(db, 'SELECT "global_generation" FROM "index_meta"')[0][0] == generation + 1
    assert query(db, 'SELECT "source" FROM "sources"') == [("host-b",)]
    assert index_state(str(db), PROBES) == cold(tmp_path, "cold", [(root_b, "host-b")])
    # Listing, reads and search no longer see them.
    listed = cli("sessions", "--db", str(db), "--plain", "--limit", "0")
    assert sorted(line.split("\t")[0] for line in listed.stdout.splitlines()) == ["b-000", "b-001"]


def test_the_source_defaults_to_the_host_name_and_can_come_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    from readmodel.store.sources import default_source

    root = tmp_path / "root"
    new_session(root, "one", "alpha")
    db = tmp_path / "index.db"
    assert cli("index", "--once", "--root", str(root), "--db", str(db), "--workers", "0").returncode == 0
    assert query(db, 'SELECT "source" FROM "sessions"') == [(default_source(),)]
    monkeypatch.setenv("SESSIONQ_SOURCE", "from-env")
    new_session(tmp_path / "other", "two", "omega")
    assert cli("index", "--once", "--root", str(tmp_path / "other"), "--db", str(db), "--workers", "0").returncode == 0
    assert query(db, 'SELECT "id", "source" FROM "sessions" ORDER BY "id"') == [("one", default_source()), ("two", "from-env")]


def test_three_daemons_write_one_index_while_readers_query_without_errors(tmp_path: Path, processes: Processes) -> None:
    import threading

    from readmodel import SessionQuery
    from tests.daemon.support import append_turn

    sources = ("host-a", "host-b", "host-c")
    roots = {source: tmp_path / source for source in sources}
    paths = {source: make_root(roots[source], source, 3) for source in sources}
    db = tmp_path / "index.db"
    daemons = [processes.daemon(roots[source], db, "--source", source, "--workers", "0") for source in sources]

    errors: list[BaseException] = []
    answers = 0
    stop = threading.Event()

    def read() -> None:
        nonlocal answers
        query = SessionQuery.open(str(db))
        while not stop.is_set():
            try:
                query.list_sessions()
                query.search_sessions({"query": "alpha", "limit": 5})
                query.filter_sessions([{"kind": "source", "values": ["host-b"]}])
                answers += 1
            except BaseException as exc:  # noqa: BLE001 - counted: there must be none
                errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    try:
        for step in range(6):  # every root grows while all three daemons index
            for source in sources:
                new_session(roots[source], f"{source}-live-{step}", f"alpha live {source} {step}")
                append_turn(paths[source][step % 3], 9 + 9 * (step // 3), f"omega {source} {step}")
        final = cold(tmp_path, "cold", [(roots[source], source) for source in sources])
        wait_for(lambda: index_state(str(db), PROBES) == final, timeout=30, what="the daemons to catch up with the roots")
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert errors == [] and answers > 0
    for daemon in daemons:
        assert daemon.stop() == 0
    assert index_state(str(db), PROBES) == final
