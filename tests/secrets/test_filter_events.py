"""filterEvents restores a stored document's exact text where the index substituted
U+FFFD (NUL, lone surrogates); that restored text must stay redacted."""

from __future__ import annotations

from pathlib import Path

from readmodel.query import SessionQuery
from tests.logfactory import header, simple_turn, write_log
from tests.secrets.planted import SECRETS, build


def test_a_restored_document_keeps_its_secrets_redacted(tmp_path: Path) -> None:
    root = tmp_path / "root"
    planted = SECRETS[3]  # a GitHub token
    write_log(root, header("nul-and-secret", 1), [simple_turn(0, f"a NUL \x00 then the token {planted.text} here")])
    _, db = build(tmp_path, root=root)
    query = SessionQuery.open(db)
    try:
        documents = query.filter_events("nul-and-secret", [{"kind": "text", "text": "token"}])
    finally:
        query.close()
    texts = [document.text for document in documents]
    assert texts and all(planted.secret not in text for text in texts)
    assert any("\x00" in text and "[REDACTED:github-token]" in text for text in texts)
