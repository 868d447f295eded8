"""A bad log never stops the indexing of the others, and loses nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from indexer.layout import Compression, encode_segment, project_key
from indexer.reconcile import Reconciler
from readmodel.store.blocks import decode_events
from readmodel.store.database import open_writer
from tests.logfactory import frame, header, header_bytes, line, simple_turn, write_log
from tests import indexdb


def index(tmp_path: Path, root: Path) -> sqlite3.Connection:
    db = tmp_path / "index.db"
    engine = open_writer(str(db))
    Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
    engine.dispose()
    return indexdb.connect(db)


def test_corrupt_unsupported_and_misplaced_logs_are_recorded_while_others_index(tmp_path: Path) -> None:
    root = tmp_path / "root"
    good = write_log(root, header("good"), [simple_turn(), simple_turn(9)])
    corrupt = write_log(root, header("corrupt"), [simple_turn()[:4], simple_turn()[4:], simple_turn(9)])
    data = bytearray(corrupt.read_bytes())
    middle = len(frame(header_bytes(header("corrupt")))) + 40  # inside the first event frame
    data[middle] ^= 0x55
    corrupt.write_bytes(bytes(data))
    future = write_log(root, header("future"), [simple_turn()])
    with open(future, "ab") as fh:
        fh.write(frame(line({"type": "future/kind", "seq": 9, "time": 1, "data": {}})))
    (good.parent.parent / "stray.jsonl.zstd").write_bytes(b"")
    conn = index(tmp_path, root)
    rows = dict(conn.execute('SELECT "id", "status" || \':\' || coalesce("error_code", \'\') FROM "sessions"').fetchall())
    assert rows == {"good": "ok:", "corrupt": "corrupt:SESSION_QUERY_CORRUPT_SESSION", "future": "unsupported:SESSION_QUERY_PERSISTENCE_FAILED"}
    # Every event is an ``events`` row or a member of an ``event_runs`` row.
    rows = conn.execute('SELECT count(*) FROM "events" e JOIN "sessions" s ON s."sid" = e."sid" WHERE s."id" = \'good\'').fetchone()[0]
    runs = conn.execute('SELECT coalesce(sum(r."count"), 0) FROM "event_runs" r JOIN "sessions" s ON s."sid" = r."sid" WHERE s."id" = \'good\'').fetchone()[0]
    assert rows + runs == 18
    assert conn.execute('SELECT "kind" FROM "layout_problems"').fetchall() == [("flat-file",)]


def test_lone_surrogates_survive_in_raw_events_and_are_replaced_in_documents(tmp_path: Path) -> None:
    root = tmp_path / "root"
    hdr = header("odd-text")
    path = root / project_key(hdr["cwd"]) / encode_segment("odd-text") / "session.jsonl.zstd"
    path.parent.mkdir(parents=True)
    event = b'{"type":"user/message","seq":0,"time":1,"data":{"id":"u","role":"user","content":[{"type":"text","text":"lone \\ud800 half"}],"source":{"kind":"user"}},"surfaceOp":"append"}\n'
    path.write_bytes(frame(header_bytes(hdr)) + frame(event))
    conn = index(tmp_path, root)
    (blob,) = conn.execute('SELECT "data" FROM "event_blocks"').fetchone()
    assert decode_events(blob)[0]["data"]["content"][0]["text"] == "lone \ud800 half"
    assert conn.execute('SELECT "text" FROM "documents"').fetchall() == [("lone \ufffd half",)]


def test_an_id_that_cannot_be_stored_is_a_reported_problem(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_log(root, header("fine"), [simple_turn()])
    bad = header("bad\ud800id")
    path = root / project_key(bad["cwd"]) / encode_segment("bad\ud800id") / "session.jsonl.zstd"
    path.parent.mkdir(parents=True)
    raw_header = header_bytes({**bad, "id": "IDPLACEHOLDER"}).replace(b"IDPLACEHOLDER", b"bad\\ud800id")
    path.write_bytes(frame(raw_header) + frame(line(simple_turn()[0])))
    conn = index(tmp_path, root)
    assert conn.execute('SELECT "id" FROM "sessions"').fetchall() == [("fine",)]
    assert conn.execute('SELECT "kind" FROM "layout_problems"').fetchall() == [("unindexable",)]


def test_the_code_schema_revision_is_the_newest_migration() -> None:
    from readmodel.store.revisions import head_revision
    from readmodel.store.schema import SCHEMA_REVISION

    assert head_revision() == SCHEMA_REVISION


def test_a_raw_log_cut_at_a_tolerated_defect_indexes_its_prefix_and_reloads_later(tmp_path: Path) -> None:
    from indexer.layout import expected_transcript_path
    from tests.logfactory import events_bytes

    root = tmp_path / "root"
    hdr = header("cut")
    path = Path(expected_transcript_path(root, hdr, Compression.NONE))
    path.parent.mkdir(parents=True)
    events = simple_turn()
    path.write_bytes(header_bytes(hdr) + events_bytes(events[:3], pack=False) + b"{broken\n" + events_bytes(events[3:8], pack=False))
    db = tmp_path / "index.db"
    engine = open_writer(str(db))
    reconciler = Reconciler(engine, root, Compression.NONE, settle_seconds=0)
    reconciler.reconcile()
    conn = indexdb.connect(db)
    assert conn.execute('SELECT "status", "stored_count", "resume" IS NULL FROM "sessions"').fetchone() == ("ok", 3, 1)
    with open(path, "ab") as fh:
        fh.write(b"more garbage\n")
    reconciler.reconcile()
    assert conn.execute('SELECT "status", "stored_count" FROM "sessions"').fetchone() == ("ok", 3)
    engine.dispose()
