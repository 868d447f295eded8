"""`sessionq export` on a PostgreSQL index: a log on this host is exported exactly as from
SQLite; a log another host indexed is refused in one line naming its source (docs/postgres.md)."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from click.testing import CliRunner

from indexer.cli import main
from tests.postgresql.test_indexing import index
from tests.sources.test_many_sources import make_root


def _export(db: str, session_id: str, root: Path, out: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["export", session_id, "--db", db, "--root", str(root), "-o", str(out)])
    return result.exit_code, result.output


def _entries(archive: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(archive) as zf:
        assert zf.testzip() is None
        return {info.filename: zf.read(info) for info in zf.infolist()}


def test_a_log_on_this_host_exports_the_same_archive_contents_as_from_sqlite(postgres_url: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_root(root, "laptop", 3)
    index(root, postgres_url, "laptop")
    index(root, str(tmp_path / "index.db"), "laptop")
    session_id = "laptop-002"
    code, output = _export(postgres_url, session_id, root, tmp_path / "pg.zip")
    assert code == 0, output
    code, output = _export(str(tmp_path / "index.db"), session_id, root, tmp_path / "sqlite.zip")
    assert code == 0, output
    pg, lite = _entries(tmp_path / "pg.zip"), _entries(tmp_path / "sqlite.zip")
    assert pg == lite and any(name.endswith("session.jsonl") for name in pg)
    code, output = _export(postgres_url, "laptop-0", root, tmp_path / "prefix.zip")  # an ambiguous prefix
    assert code != 0 and "Traceback" not in output


def test_a_log_only_another_host_has_is_refused_naming_its_source(postgres_url: str, tmp_path: Path) -> None:
    elsewhere = tmp_path / "other-host"
    make_root(elsewhere, "runner", 1)
    index(elsewhere, postgres_url, "ci-runner")
    shutil.rmtree(elsewhere)  # this host never had that root: only the shared index knows the session
    out = tmp_path / "out.zip"
    code, output = _export(postgres_url, "runner-000", tmp_path / "mine", out)
    assert code == 1, output
    (line,) = output.strip().splitlines()
    assert "not on this host" in line and "ci-runner" in line and "Traceback" not in output
    assert not out.exists() and not Path(str(out) + ".partial").exists()
