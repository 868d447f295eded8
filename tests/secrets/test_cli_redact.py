"""The console script: raw reads and exports are as written by default and scrubbed with
``--redact all``; ``index --redact off`` keeps the secrets searchable."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.cli.helpers import sessionq
from tests.secrets.planted import SECRETS, session_id, write_root

AWS = SECRETS[1]  # an AWS access key id: one JSON-safe token


def test_reads_and_exports_redact_on_request(tmp_path: Path) -> None:
    root, db = tmp_path / "root", str(tmp_path / "index.db")
    write_root(root)
    assert sessionq("index", "--once", "--root", str(root), "--db", db, "--workers", "0").returncode == 0
    me = session_id(1)
    as_written = sessionq("read", me, "--json", "--db", db)
    scrubbed = sessionq("read", me, "--json", "--db", db, "--redact", "all")
    assert as_written.returncode == scrubbed.returncode == 0
    assert AWS.secret in as_written.stdout
    assert AWS.secret not in scrubbed.stdout and AWS.middle not in scrubbed.stdout and "[REDACTED:aws-access-key]" in scrubbed.stdout
    event = sessionq("event", me, "1", "--json", "--db", db, env={"SESSIONQ_REDACT": "all"})
    assert event.returncode == 0 and AWS.secret not in event.stdout and "REDACTED" in event.stdout
    target = tmp_path / "out.zip"
    assert sessionq("export", me, "--db", db, "--root", str(root), "-o", str(target), "--redact", "all").returncode == 0
    with zipfile.ZipFile(target) as archive:
        text = archive.read("session.jsonl").decode()
    assert AWS.secret not in text and AWS.middle not in text and "[REDACTED:aws-access-key]" in text
    search = sessionq("search", AWS.secret, "--json", "--db", db)
    assert search.returncode == 0 and me not in search.stdout
    assert sessionq("index", "--once", "--root", str(root), "--db", db, "--redact", "off").returncode == 0
    assert me in sessionq("search", AWS.secret, "--json", "--db", db).stdout
