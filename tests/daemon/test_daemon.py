"""``sessionq index``: one-shot builds, the exclusive lock, watching, polling, held tails, shutdown."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

from click.testing import CliRunner

from indexer.cli import main
from indexer.daemon import IndexLock
from indexer.layout import Compression, discover
from indexer.samples import build_sample_root
from indexer.writer import LogWriter, batch_bytes
from tests.daemon.support import Processes, append_turn, fts_hits, new_session, query, wait_for
from tests.logfactory import assistant, step_end, step_start, turn_end, turn_start, user


def sample_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    build_sample_root(root)
    return root


def assert_clean_exit(code: int, stderr: str) -> None:
    assert code == 0, stderr
    assert "Traceback" not in stderr, stderr


def test_once_builds_the_index_of_a_generated_root(tmp_path: Path, processes: Processes) -> None:
    root = sample_root(tmp_path)
    db = tmp_path / "index.db"
    result = processes.run("index", "--once", "--root", str(root), "--db", str(db))
    assert_clean_exit(result.returncode, result.stderr)
    expected = len(discover(root, Compression.ZSTD).transcripts)
    assert expected == 4
    assert f"indexed {expected} sessions" in result.stdout
    assert query(db, 'SELECT count(*) FROM "sessions" WHERE "status" = \'ok\'') == [(expected,)]
    # --once indexes the open/torn tail of the demo's interrupted session as the inspect view.
    assert query(db, 'SELECT "tail_state" FROM "sessions" WHERE "id" = \'demo-deploy-pipeline\'') == [("settled",)]
    assert fts_hits(db, "tokenizer")
    again = processes.run("index", "--once", "--root", str(root), "--db", str(db))
    assert_clean_exit(again.returncode, again.stderr)
    assert f"{expected} unchanged" in again.stdout


def test_a_second_indexer_fails_fast_with_a_clear_message(tmp_path: Path, processes: Processes) -> None:
    root = sample_root(tmp_path)
    db = tmp_path / "index.db"
    daemon = processes.daemon(root, db)
    for args in (["index", "--once"], ["index"]):
        started = time.monotonic()
        second = processes.run(*args, "--root", str(root), "--db", str(db), timeout=30)
        assert second.returncode == 1, second.stderr
        assert time.monotonic() - started < 10
        assert "already writing" in second.stderr and f"pid {daemon.pid}" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr
    upgrade = CliRunner().invoke(main, ["db", "upgrade", "--db", str(db)])
    assert upgrade.exit_code == 1 and "already writing" in upgrade.stderr
    assert_clean_exit(daemon.stop(), daemon.stderr())
    with IndexLock(str(db)):  # released with the daemon
        pass


def test_watching_indexes_appends_new_sessions_and_deletions(tmp_path: Path, processes: Processes) -> None:
    root = tmp_path / "root"
    db = tmp_path / "index.db"
    path, next_seq = new_session(root, "watched", "initial words")
    doomed, _ = new_session(root, "doomed", "soon gone")
    daemon = processes.daemon(root, db)
    assert query(db, 'SELECT count(*) FROM "sessions"') == [(2,)]

    started = time.monotonic()
    next_seq = append_turn(path, next_seq, "zebracorn appended")
    wait_for(lambda: fts_hits(db, "zebracorn"), 5, 0.005, "the appended frame")
    latency = time.monotonic() - started
    assert query(db, 'SELECT "event_count" FROM "sessions" WHERE "id" = \'watched\'') == [(next_seq,)]
    print(f"append visible after {latency * 1000:.0f} ms")

    new_session(root, "brand-new", "quokkafish arrives")
    wait_for(lambda: fts_hits(db, "quokkafish"), 5, 0.01, "the new session")

    shutil.rmtree(doomed.parent)
    wait_for(lambda: query(db, 'SELECT count(*) FROM "sessions" WHERE "id" = \'doomed\'') == [(0,)], 5, 0.01, "the deletion")
    assert not fts_hits(db, "gone")

    code = daemon.stop(signal.SIGTERM)
    log = daemon.stderr()
    assert_clean_exit(code, log)
    assert "stopping signal=SIGTERM" in log
    assert "kind=paths" in log  # watch events took the targeted path


def test_sigint_stops_cleanly_too(tmp_path: Path, processes: Processes) -> None:
    root = sample_root(tmp_path)
    daemon = processes.daemon(root, tmp_path / "index.db")
    assert_clean_exit(daemon.stop(signal.SIGINT), daemon.stderr())


def test_poll_mode_sees_appends_and_new_sessions(tmp_path: Path, processes: Processes) -> None:
    root = tmp_path / "root"
    db = tmp_path / "index.db"
    path, next_seq = new_session(root, "polled", "first words")
    daemon = processes.daemon(root, db, "--poll", "0.1")
    append_turn(path, next_seq, "platypoodle appended")
    wait_for(lambda: fts_hits(db, "platypoodle"), 8, 0.02, "the appended frame (polling)")
    new_session(root, "polled-new", "narwhalnut here")
    wait_for(lambda: fts_hits(db, "narwhalnut"), 8, 0.02, "the new session (polling)")
    assert "mode=poll" in daemon.stderr()
    assert_clean_exit(daemon.stop(), daemon.stderr())


def test_an_open_tail_is_settled_by_the_timer_and_replaced_when_the_writer_continues(tmp_path: Path, processes: Processes) -> None:
    root = tmp_path / "root"
    db = tmp_path / "index.db"
    path, seq = new_session(root, "open", "before the gap")
    daemon = processes.daemon(root, db, "--settle", "0.4")
    writer = LogWriter(path, Compression.ZSTD)
    # A complete frame that leaves a turn open: its events are indexed at once,
    # the synthetic closers only after the file has been still for --settle.
    writer.append([turn_start(seq, 2), user(seq + 1, "wombatrix question"), step_start(seq + 2, 2)])
    wait_for(lambda: fts_hits(db, "wombatrix"), 5, 0.005, "the open turn's events")
    state = 'SELECT "tail_state", "event_count", "synthetic_from" FROM "sessions" WHERE "id" = \'open\''
    assert query(db, state) == [("held", seq + 3, None)]
    # Nothing more is written: the daemon's own timer must index the settled view.
    wait_for(lambda: query(db, state)[0][0] == "settled", 5, 0.02, "the settled tail")
    assert query(db, state) == [("settled", seq + 5, seq + 3)]  # + step/end and turn/end closers
    assert query(db, 'SELECT "type" FROM "events" WHERE "synthetic" = 1 ORDER BY "seq"') == [("step/end",), ("turn/end",)]

    # The writer continues with a frame torn in two writes: nothing changes until it completes.
    frame = writer.encode(batch_bytes([assistant(seq + 3, "kinkajolt answer", step=2, turn=2), step_end(seq + 4, 2, 2), turn_end(seq + 5, 2)]))
    cut = len(frame) // 2
    with open(path, "ab") as fh:
        fh.write(frame[:cut])
    time.sleep(0.2)
    assert not fts_hits(db, "kinkajolt")
    with open(path, "ab") as fh:
        fh.write(frame[cut:])
    wait_for(lambda: fts_hits(db, "kinkajolt"), 5, 0.005, "the completed frame")
    assert query(db, state) == [("clean", seq + 6, None)]
    assert query(db, 'SELECT count(*) FROM "events" WHERE "synthetic" = 1') == [(0,)]
    assert_clean_exit(daemon.stop(), daemon.stderr())


def test_json_logs(tmp_path: Path, processes: Processes) -> None:
    import json

    root = sample_root(tmp_path)
    daemon = processes.daemon(root, tmp_path / "index.db", "--log-format", "json")
    assert_clean_exit(daemon.stop(), daemon.stderr())
    records = [json.loads(line) for line in daemon.stderr().splitlines() if line.strip()]
    start = next(r for r in records if r.get("reason") == "start")
    assert start["msg"] == "reconcile" and start["kind"] == "full" and start["reloaded"] == 4


def test_a_missing_root_is_awaited_and_a_replaced_root_is_watched_again(tmp_path: Path, processes: Processes) -> None:
    root = tmp_path / "root"
    db = tmp_path / "index.db"
    once = processes.run("index", "--once", "--root", str(root), "--db", str(db))
    assert once.returncode == 1 and "does not exist" in once.stderr
    daemon = processes.start("index", "--root", str(root), "--db", str(db), "--rescan", "0", name="daemon")
    wait_for(lambda: "waiting for it" in daemon.stderr(), 20, 0.02, "the missing-root warning")
    new_session(root, "first", "aardwolf appears")
    wait_for(lambda: fts_hits(db, "aardwolf"), 8, 0.02, "the root to be picked up")
    shutil.rmtree(root)
    wait_for(lambda: query(db, 'SELECT count(*) FROM "sessions"') == [(0,)], 5, 0.02, "the deletions")
    new_session(root, "second", "binturong arrives")  # a new directory at the same path
    wait_for(lambda: fts_hits(db, "binturong"), 8, 0.02, "the replaced root to be watched")
    assert_clean_exit(daemon.stop(), daemon.stderr())
