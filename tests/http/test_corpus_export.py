"""Every session of the shared zstd corpus exports (with descendants) to the expected archive."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from readmodel.export.archive import safe_id
from readmodel.http.app import create_app
from tests.corpus import RAW_ROOT, ZSTD_ROOT, require_corpus
from tests.http.conftest import BASE, unzip
from tests.query.support import build_index


DIGEST = re.compile(r'"attachmentId":"sha256:([0-9a-f]{64})"')
EXT = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}



@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, Path], dict[str, list[str]]]]:
    require_corpus()
    db = tmp_path_factory.mktemp("corpus") / "index.db"
    build_index(ZSTD_ROOT, db)
    conn = sqlite3.connect(db)
    rows = conn.execute('SELECT "id", "path", "parent_session" FROM "sessions"').fetchall()
    conn.close()
    paths = {sid: Path(path) for sid, path, _ in rows}
    children: dict[str, list[str]] = {}
    for sid, _, parent in rows:
        if parent is not None:
            children.setdefault(parent, []).append(sid)
    # The corpus has no attachment store: stand one in with a placeholder
    # object for every referenced digest (the reader addresses by digest).
    store = db.parent / "attachments"
    for digest in set(DIGEST.findall(b"".join(p.read_bytes() for p in RAW_ROOT.rglob("session.jsonl")).decode())):
        folder = store / "objects" / digest[:2]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / digest).write_bytes(b"img:" + digest.encode())
    client = TestClient(create_app(str(db), root=str(ZSTD_ROOT), attachments=str(store)), base_url=BASE)
    yield client, paths, children


def raw_text(path: Path) -> bytes:
    return (RAW_ROOT / path.parent.relative_to(ZSTD_ROOT) / "session.jsonl").read_bytes()


def session_ids() -> list[str]:
    return sorted(p.parent.name for p in ZSTD_ROOT.rglob("session.jsonl.zstd"))


def test_every_corpus_session_exports(corpus: tuple[TestClient, dict[str, Path], dict[str, list[str]]]) -> None:
    client, paths, children = corpus
    assert len(paths) >= 100
    exported = 0
    media_total = 0
    for sid, path in sorted(paths.items()):
        response = client.get("/api/session.export", params={"sessionId": sid, "includeDescendants": "true"})
        assert response.status_code == 200, sid
        entries = unzip(response.content)
        media = [name for name in entries if name.startswith("media/")]
        texts = [name for name in entries if not name.startswith("media/")]
        # descendants = the index's parent links, transitively (order checked as a set:
        # sibling order follows traceSession, which other suites pin).
        expected: set[str] = set()
        stack = list(children.get(sid, []))
        while stack:
            child = stack.pop()
            expected.add(child)
            stack.extend(children.get(child, []))
        assert texts[0] == "session.jsonl"
        assert set(texts[1:]) == {f"subagents/{safe_id(child)}/session.jsonl" for child in expected}
        assert len(texts) == len(expected) + 1
        assert entries["session.jsonl"] == raw_text(path), sid
        for child in expected:
            assert entries[f"subagents/{safe_id(child)}/session.jsonl"] == raw_text(paths[child])
        expected_media = {}
        for name in texts:
            for text_line in entries[name].decode().split("\n"):
                if '"type":"image"' in text_line:
                    for ref in re.findall(r'"attachment":(\{[^{}]*\})', text_line):
                        attachment = json.loads(ref)
                        expected_media[f"media/{attachment['attachmentId']}.{EXT[attachment['mediaType']]}"] = attachment
        assert set(media) == set(expected_media), sid
        assert len(media) == len(set(media))
        for name in media:
            assert entries[name] == b"img:" + name.split("sha256:")[1].split(".")[0].encode()
        exported += 1
        media_total += len(media)
    assert exported == len(paths)
    assert media_total > 0
