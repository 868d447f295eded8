"""An index whose schema lost objects is refused at open, with the repair, on every surface.

The check (readmodel.store.schemacheck.schema_problems) runs on every open, so it
must stay one statement; what it finds missing decides whether queries are
refused (tables, columns, a non-FTS5 ``texts_fts``) or merely slower
(indexes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from readmodel.store.database import create_index_engine
from readmodel.core.errors import SessionQueryError
from readmodel.http.app import create_app
from readmodel.query import SessionQuery
from readmodel.rpc import Dispatcher
from readmodel.store.schemacheck import schema_problems
from tests.logfactory import header, simple_turn, write_log
from tests.query.support import build_index
from tests import indexdb


def damaged_index(tmp_path: Path, *statements: str) -> Path:
    write_log(tmp_path / "root", header("s1", 1), [simple_turn(0, "hello there")])
    db = build_index(tmp_path / "root", tmp_path / "index.db")
    conn = indexdb.connect(db)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return db


def open_error(db: Path) -> SessionQueryError:
    with pytest.raises(SessionQueryError) as info:
        SessionQuery.open(str(db))
    assert info.value.code == "SESSION_QUERY_INDEX_FAILED"
    return info.value


@pytest.mark.parametrize(
    ("statements", "named"),
    [
        (["DROP TABLE texts_fts"], "missing FTS5 table texts_fts"),
        (["DROP TABLE texts_fts_idx"], "missing table texts_fts_idx"),
        (['ALTER TABLE "events" DROP COLUMN "digest"'], "missing column events.digest"),
        # documents is a view over document_rows and texts (schemas 0016, 0018): its columns are checked too.
        (
            [
                'DROP VIEW "documents"',
                'CREATE VIEW "documents" AS SELECT d."docid", d."sid", d."seq", d."type", d."time", t."length", sessionq_text(t."text_z") AS "text" '
                'FROM "document_rows" d JOIN "texts" t ON t."id" = d."text_id"',
            ],
            "missing column documents.surface",
        ),
        (['DROP VIEW "documents"'], "missing table documents"),
        (["DROP TABLE texts_fts", "CREATE TABLE texts_fts (text TEXT)"], "texts_fts is not an FTS5 table"),
    ],
    ids=["fts", "fts-shadow", "column", "view-column", "view", "not-fts5"],
)
def test_open_refuses_what_queries_need_naming_it_and_the_repair(tmp_path: Path, statements: list[str], named: str) -> None:
    db = damaged_index(tmp_path, *statements)
    message = open_error(db).message
    assert message.startswith(f"the index {db} is damaged ({named})"), message
    assert f"run `sessionq index --once --db {db}`" in message and f"`sessionq db check --db {db}`" in message


def test_a_missing_index_only_slows_queries_so_open_accepts_it(tmp_path: Path) -> None:
    db = damaged_index(tmp_path, 'DROP INDEX "sessions_parent"')
    with SessionQuery.open(str(db)) as query:
        assert [record.header["id"] for record in query.list_sessions()] == ["s1"]
        assert query.status()["schemaProblems"] == [{"problem": "missing index sessions_parent", "fatal": False}]


def test_the_check_is_one_statement(tmp_path: Path) -> None:
    db = damaged_index(tmp_path)
    engine = create_index_engine(str(db), readonly=True)
    statements: list[str] = []
    try:
        with engine.connect() as conn:
            raw = conn.connection.driver_connection
            raw.set_trace_callback(statements.append)
            assert schema_problems(conn) == []
            raw.set_trace_callback(None)
    finally:
        engine.dispose()
    # The trace also shows the transaction's BEGIN and, as "-- ..." comments,
    # the table_info pragmas SQLite runs inside that one statement.
    queries = [sql for sql in statements if sql != "BEGIN" and not sql.startswith("--")]
    assert len(queries) == 1 and "sqlite_master" in queries[0]


def _answers(db: Path) -> list[Callable[[], tuple[str, str]]]:
    """(code, message) of the same call over RPC and over HTTP."""

    def rpc() -> tuple[str, str]:
        dispatcher = Dispatcher(lambda: SessionQuery.open(str(db)))
        line = dispatcher.handle_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "searchSessions", "params": {"query": "hello"}}))
        assert line is not None
        error = json.loads(line)["error"]
        assert error["code"] == -32000
        return error["data"]["code"], error["message"]

    def http() -> tuple[str, str]:
        app = create_app(str(db), root=str(db.parent / "root"), attachments=str(db.parent / "attachments"), port=8765)
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            response = client.post("/api/rpc/searchSessions", json={"query": "hello"})
        assert response.status_code == 500
        error = response.json()["error"]
        return error["code"], error["message"]

    return [rpc, http]


def test_rpc_and_http_answer_the_coded_error_not_an_internal_one(tmp_path: Path) -> None:
    db = damaged_index(tmp_path, "DROP TABLE texts_fts")
    for answer in _answers(db):
        code, message = answer()
        assert code == "SESSION_QUERY_INDEX_FAILED", (answer.__name__, message)
        assert "missing FTS5 table texts_fts" in message and "no such table" not in message
