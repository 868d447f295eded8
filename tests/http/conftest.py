"""Fixtures for the HTTP tests: real index databases and the real app."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from readmodel.http.app import create_app
from tests.query.support import build_index

BASE = "http://127.0.0.1:8765"


class Site:
    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "root"
        self.root.mkdir()
        self.db = tmp_path / "index.db"
        self.attachments = tmp_path / "attachments"
        self.attachments.mkdir()

    def index(self) -> None:
        build_index(self.root, self.db)

    def client(self, **options: Any) -> TestClient:
        options.setdefault("root", str(self.root))
        options.setdefault("attachments", str(self.attachments))
        app = create_app(str(self.db), port=8765, **options)
        return TestClient(app, base_url=BASE)


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


def unzip(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        return {info.filename: archive.read(info) for info in archive.infolist()}


def names(data: bytes) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.namelist()
