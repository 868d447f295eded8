"""``sessionq status`` and ``sessionq db upgrade|current|check``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from indexer.cli import main
from indexer.samples import build_sample_root
from readmodel.store.revisions import head_revision
from readmodel.store.sources import default_source
from tests.daemon.support import Processes, new_session, query, write_corrupt_session
from tests.logfactory import events_bytes, header, header_bytes, simple_turn, write_frames, write_log
from tests.query.support import build_index
from tests import indexdb


def cli(*args: str) -> Result:
    """Run a read-only or admin command in-process (no signal handlers involved)."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def build(tmp_path: Path, processes: Processes) -> tuple[Path, Path]:
    root = tmp_path / "root"
    build_sample_root(root)
    db = tmp_path / "index.db"
    result = processes.run("index", "--once", "--root", str(root), "--db", str(db))
    assert result.returncode == 0, result.stderr
    return root, db


def test_status_reports_counts_errors_and_layout_problems(tmp_path: Path, processes: Processes) -> None:
    root = tmp_path / "root"
    build_sample_root(root)
    flat = root / "--home-demo-infra--" / "x.jsonl.zstd"
    flat.write_bytes(b"")
    write_corrupt_session(root, "broken")
    new_session(root, "healthy", "perfectly fine words")
    db = tmp_path / "index.db"
    result = processes.run("index", "--once", "--root", str(root), "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert "1 failed" in result.stdout and "1 layout problems" in result.stdout

    out = cli("status", "--db", str(db), "--json")
    assert out.exit_code == 0, out.output
    status = json.loads(out.stdout)
    assert status["sessions"] == 6
    assert status["sessionsInError"] == [
        {"sessionId": "broken", "path": str(root / "--work-demo--" / "broken" / "session.jsonl.zstd"), "status": "corrupt",
         "code": "SESSION_QUERY_CORRUPT_SESSION", "message": status["sessionsInError"][0]["message"], "source": default_source()}
    ]
    assert "broken" in status["sessionsInError"][0]["message"]
    assert [(p["kind"], p["path"]) for p in status["layoutProblems"]] == [("flat-file", str(flat))]
    # Every other session is indexed, and the counts are the database's.
    assert query(db, 'SELECT count(*) FROM "sessions" WHERE "status" = \'ok\'') == [(5,)]
    # An event is an ``events`` row or a member of an ``event_runs`` row.
    stored_events = query(db, 'SELECT (SELECT count(*) FROM "events") + (SELECT coalesce(sum("count"), 0) FROM "event_runs")')[0][0]
    assert status["events"] == stored_events > 0
    assert status["documents"] == query(db, 'SELECT count(*) FROM "documents"')[0][0] > 0
    assert status["identity"] == query(db, 'SELECT "identity" FROM "index_meta"')[0][0]
    assert status["generation"] == query(db, 'SELECT "global_generation" FROM "index_meta"')[0][0] >= 1
    assert status["schemaRevision"] == status["headRevision"] == head_revision()
    assert status["root"] == str(root) and status["compression"] == "zstd"
    assert status["lagMs"] >= 0 and status["lastReconcileAt"] > 1_700_000_000_000
    assert status["fileSize"] > 0
    assert status["syntheticTails"] == 1 and status["heldTails"] == 0  # the demo's interrupted session
    assert "writerPid" not in status  # the --once indexer has exited

    human = cli("status", "--db", str(db))
    assert human.exit_code == 0
    assert "sessions in error:" in human.stdout and "SESSION_QUERY_CORRUPT_SESSION" in human.stdout
    assert "layout problems:" in human.stdout and str(flat) in human.stdout

    # Read-only: works from another process while the daemon holds the index.
    daemon = processes.daemon(root, db)
    live = processes.run("status", "--db", str(db), "--json")
    assert live.returncode == 0, live.stderr
    assert json.loads(live.stdout)["sessions"] == 6
    assert json.loads(live.stdout)["writerPid"] == daemon.pid
    assert f"running (pid {daemon.pid})" in cli("status", "--db", str(db)).stdout
    assert daemon.stop() == 0
    assert "writerPid" not in json.loads(cli("status", "--db", str(db), "--json").stdout)


def test_status_of_a_missing_index_is_a_coded_error(tmp_path: Path) -> None:
    out = cli("status", "--db", str(tmp_path / "absent.db"), "--json")
    assert out.exit_code == 1
    assert json.loads(out.stdout)["error"]["code"] == "SESSION_QUERY_INDEX_FAILED"
    assert not (tmp_path / "absent.db").exists()


def test_db_current_check_upgrade(tmp_path: Path, processes: Processes) -> None:
    _, db = build(tmp_path, processes)
    head = head_revision()
    assert cli("db", "current", "--db", str(db)).stdout.strip() == f"{head} (head)"
    check = cli("db", "check", "--db", str(db))
    assert check.exit_code == 0 and "schema matches" in check.stdout
    upgrade = cli("db", "upgrade", "--db", str(db))
    assert upgrade.exit_code == 0 and "already at" in upgrade.stdout

    fresh = tmp_path / "fresh.db"
    created = cli("db", "upgrade", "--db", str(fresh))
    assert created.exit_code == 0 and "created" in created.stdout
    assert cli("db", "current", "--db", str(fresh)).stdout.strip() == f"{head} (head)"
    assert cli("db", "check", "--db", str(fresh)).exit_code == 0

    missing = cli("db", "current", "--db", str(tmp_path / "absent.db"))
    assert missing.exit_code == 1 and "no index database" in missing.stderr


def test_db_check_reports_drift(tmp_path: Path, processes: Processes) -> None:
    _, db = build(tmp_path, processes)
    conn = indexdb.connect(db)
    conn.execute('DROP INDEX "sessions_parent"')
    conn.execute('ALTER TABLE "document_rows" ADD COLUMN "extra" TEXT')  # documents is its view (schema 0016)
    conn.commit()
    conn.close()
    check = cli("db", "check", "--db", str(db))
    assert check.exit_code == 1
    assert "sessions_parent" in check.stderr and "document_rows.extra" in check.stderr


def test_an_outdated_index_is_refused_unless_upgraded(tmp_path: Path, processes: Processes) -> None:
    root, db = build(tmp_path, processes)
    conn = indexdb.connect(db)
    conn.execute("UPDATE alembic_version SET version_num = '0000'")
    conn.commit()
    conn.close()
    assert "0000 (head is" in cli("db", "current", "--db", str(db)).stdout
    check = cli("db", "check", "--db", str(db))
    assert check.exit_code == 1 and "revision is 0000" in check.stderr
    refused = processes.run("index", "--once", "--root", str(root), "--db", str(db))
    assert refused.returncode == 1
    assert "sessionq db upgrade" in refused.stderr and "Traceback" not in refused.stderr


def test_foreign_files_are_refused_and_left_untouched(tmp_path: Path, processes: Processes) -> None:
    foreign = tmp_path / "other.sqlite"
    conn = indexdb.connect(foreign)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all\n" * 100)
    for target in (foreign, text):
        before = target.read_bytes()
        for args in (["db", "current"], ["db", "check"], ["db", "upgrade"], ["status", "--json"]):
            out = cli(*args, "--db", str(target))
            assert out.exit_code in (1, 2), (args, out.output)
            assert "Traceback" not in out.output
        once = processes.run("index", "--once", "--root", str(tmp_path / "root"), "--db", str(target))
        assert once.returncode == 1 and "not a sessionq index" in once.stderr, once.stderr
        assert target.read_bytes() == before
        assert not Path(str(target) + ".lock").exists()
    assert "not a sessionq index" in cli("db", "check", "--db", str(foreign)).stderr


# -- a damaged schema ---------------------------------------------------------------------


def sample_index(tmp_path: Path) -> Path:
    """The demo root indexed in-process (quicker than a subprocess indexer)."""
    build_sample_root(tmp_path / "root")
    return build_index(tmp_path / "root", tmp_path / "index.db")


def test_status_names_a_damaged_schema_and_its_repair(tmp_path: Path) -> None:
    db = sample_index(tmp_path)
    conn = indexdb.connect(db)
    conn.execute("DROP TABLE texts_fts")
    conn.execute('DROP INDEX "sessions_parent"')
    conn.commit()
    conn.close()
    out = cli("status", "--db", str(db), "--json")
    assert out.exit_code == 0, out.output
    status = json.loads(out.stdout)
    assert status["schemaProblems"] == [
        {"problem": "missing FTS5 table texts_fts", "fatal": True},
        {"problem": "missing index sessions_parent", "fatal": False},
    ]
    assert f"delete {db}" in status["repair"] and f"`sessionq index --once --db {db}`" in status["repair"]
    assert status["sessions"] == 4  # the figures are still there
    human = cli("status", "--db", str(db)).stdout
    assert "missing FTS5 table texts_fts (queries refuse the index)" in human
    assert "missing index sessions_parent (slower queries)" in human and f"repair: {status['repair']}" in human
    check = cli("db", "check", "--db", str(db))
    assert check.exit_code == 1 and "missing FTS5 table texts_fts" in check.stderr


def test_status_of_a_healthy_index_has_no_schema_problems(tmp_path: Path) -> None:
    db = sample_index(tmp_path)
    status = json.loads(cli("status", "--db", str(db), "--json").stdout)
    assert status["schemaProblems"] == [] and "repair" not in status
    assert "schema problems" not in cli("status", "--db", str(db)).stdout


def test_status_that_cannot_read_its_figures_names_the_damage(tmp_path: Path) -> None:
    db = sample_index(tmp_path)
    conn = indexdb.connect(db)
    conn.execute('DROP TABLE "layout_problems"')
    conn.commit()
    conn.close()
    out = cli("status", "--db", str(db), "--json")
    assert out.exit_code == 1
    error = json.loads(out.stdout)["error"]
    assert error["code"] == "SESSION_QUERY_INDEX_FAILED"
    assert error["message"].startswith(f"the index {db} is damaged (missing table layout_problems)"), error


# -- values from hostile logs ---------------------------------------------------------------

HUGE = 1 << 20  # a mebibyte of id: plenty to show the bound, quick to index


def _hostile_root(root: Path) -> None:
    """Logs whose header or events carry a HUGE-character value that messages would quote."""
    huge = "x" * HUGE
    project = write_log(root, header("plain", 1), [simple_turn(0)]).parent.parent
    # The header's id is not the directory's: an identity problem quoting the id (and the path it implies).
    write_frames(project / "impostor" / "session.jsonl.zstd", [header_bytes(header(huge, 2)), events_bytes(simple_turn(0))])
    # An event type no reader knows: a corrupt session quoting the type.
    odd = [{"type": huge, "seq": 0, "time": 1, "data": {}}]
    write_frames(project / "odd" / "session.jsonl.zstd", [header_bytes(header("odd", 4)), events_bytes(odd)])


def test_status_stays_small_when_logs_carry_huge_values(tmp_path: Path) -> None:
    root, db = tmp_path / "root", tmp_path / "index.db"
    _hostile_root(root)
    build_index(root, db)
    out = cli("status", "--db", str(db), "--json")
    assert out.exit_code == 0, out.output
    assert len(out.stdout) < 8192, len(out.stdout)  # 2 MB before the bound
    status = json.loads(out.stdout)
    messages = {row.get("sessionId") or Path(row["path"]).parent.name: row["message"] for row in status["sessionsInError"] + status["layoutProblems"]}
    assert sorted(messages) == ["impostor", "odd"]
    assert f"…({HUGE} chars)" in messages["impostor"] and f"…({HUGE} chars)" in messages["odd"]
    assert len(cli("status", "--db", str(db)).stdout) < 8192


def test_status_bounds_long_messages_an_older_indexer_stored(tmp_path: Path) -> None:
    db = sample_index(tmp_path)
    conn = indexdb.connect(db)
    conn.execute(
        'INSERT INTO "layout_problems" ("path", "kind", "message", "observed_at", "source") VALUES (?, ?, ?, ?, ?)',
        ("/r/x/session.jsonl.zstd", "identity", "y" * HUGE, 1.0, "old-indexer"),
    )
    conn.commit()
    conn.close()
    out = cli("status", "--db", str(db), "--json")
    assert out.exit_code == 0 and len(out.stdout) < 8192
    (problem,) = json.loads(out.stdout)["layoutProblems"]
    assert problem["message"] == "y" * 4096 + f"…({HUGE} chars)"
