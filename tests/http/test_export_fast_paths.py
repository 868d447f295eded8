"""The export's fast paths give what the plain paths give (issue 21).

* runs of small frames decoded in one call (``iter_frames``) == frame by frame
  (``iter_frame``), failures included (same error, after the same plaintext);
* stored bytes handed on unchanged while valid UTF-8 (``utf8_pieces``) == the
  text slices decoded with replacement and encoded again;
* the image scan over bytes, skipping lines without ``image``, finds what a
  line-by-line scan finds;
* archives at every level, ISA-L's included, are standard ZIPs
  (Python's ``zipfile`` and ``unzip -t``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from readmodel.export.archive import DEFAULT_LEVEL, Exporter
from readmodel.export.pipeline import codec, shared_pool
from readmodel.export.artifacts import ImageScanner, RawArtifact, _scan_line
from readmodel.export.frames import FrameSpan, ZstdFrameError, iter_frame, iter_frames, scan_frames

HEADER = b'{"version":0,"id":"s1","createdAt":1,"cwd":"/w","delegationDepth":0}\n'


def _frames(payloads: list[bytes], sized: list[bool]) -> bytes:
    out = []
    for payload, with_size in zip(payloads, sized):
        out.append(zstandard.ZstdCompressor(write_checksum=True, write_content_size=with_size).compress(payload))
    return b"".join(out)


def _spans(path: Path) -> list[FrameSpan]:
    with open(path, "rb") as fh:
        return [item for item in scan_frames(fh) if isinstance(item, FrameSpan)]


def _decode(path: Path, fast: bool, group: int = 1 << 20, pooled: bool = False) -> tuple[bytes, str | None]:
    out = bytearray()
    with open(path, "rb") as fh:
        spans = _spans(path)
        try:
            if fast:
                for piece in iter_frames(fh, spans, group_plaintext=group, executor=shared_pool() if pooled else None, ahead=1):
                    out += piece
            else:
                for span in spans:
                    for piece in iter_frame(fh, span):
                        out += piece
        except ZstdFrameError as exc:
            return bytes(out), exc.message
    return bytes(out), None


texts = st.text(alphabet=st.sampled_from(list("ab \n{}\"é한😀")), max_size=300)
raw_bytes = st.binary(max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pieces=st.lists(st.one_of(texts.map(lambda t: t.encode("utf-8")), raw_bytes), min_size=1, max_size=12),
    sized=st.lists(st.booleans(), min_size=13, max_size=13),
    damage=st.one_of(st.none(), st.integers(min_value=0, max_value=11)),
    group=st.sampled_from([1, 64, 1 << 20]),
    pooled=st.booleans(),
)
def test_runs_of_frames_decode_like_single_frames(
    tmp_path: Path, pieces: list[bytes], sized: list[bool], damage: int | None, group: int, pooled: bool,
) -> None:
    # Runs decoded ahead on the pool (``pooled``) come out in order, failures included.
    data = bytearray(_frames(pieces, sized))
    if damage is not None and damage < len(pieces):
        # Flip a byte of frame ``damage``'s checksum: a content failure found only by decoding.
        end = len(_frames(pieces[: damage + 1], sized))
        data[end - 1] ^= 0xFF
    path = tmp_path / f"log-{len(pieces)}-{damage}-{group}.zstd"
    path.write_bytes(bytes(data))
    assert _decode(path, fast=True, group=group, pooled=pooled) == _decode(path, fast=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pieces=st.lists(st.one_of(texts.map(lambda t: t.encode("utf-8")), raw_bytes, st.just("한😀".encode()[1:5])), max_size=10),
    sized=st.lists(st.booleans(), min_size=11, max_size=11),
)
def test_stored_bytes_pass_through_as_the_texts_utf8(tmp_path: Path, pieces: list[bytes], sized: list[bool]) -> None:
    # Characters cut between frames, invalid bytes anywhere, frames with and without sizes.
    path = tmp_path / "s1.jsonl.zstd"
    path.write_bytes(_frames([HEADER, *pieces], [True, *sized]))
    expected = "".join(RawArtifact(path, "s1").text_slices(7)).encode("utf-8")
    assert b"".join(RawArtifact(path, "s1").utf8_pieces()) == expected


def test_a_header_split_over_frames_is_still_checked(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl.zstd"
    path.write_bytes(_frames([HEADER[:10], HEADER[10:], b"rest\n"], [True, False, True]))
    assert b"".join(RawArtifact(path, "s1").utf8_pieces()) == HEADER + b"rest\n"
    with pytest.raises(Exception, match="does not name"):
        b"".join(RawArtifact(path, "other").utf8_pieces())


def _image_line(ident: str) -> str:
    return json.dumps({"data": {"content": [{"type": "image", "attachment": {"attachmentId": ident}}]}})


@settings(max_examples=80, deadline=None)
@given(
    lines=st.lists(st.one_of(st.sampled_from(["", "x" * 30, "not json image", "images everywhere"]), st.integers(0, 5).map(lambda n: _image_line(f"sha256:{n}"))), max_size=25),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=6),
    cap=st.sampled_from([4, 40, 8 << 20]),
)
def test_the_byte_scan_finds_what_a_line_by_line_scan_finds(lines: list[str], cuts: list[int], cap: int) -> None:
    data = "\n".join(lines).encode()
    expected: dict[str, Any] = {}
    for line in data.split(b"\n"):
        _scan_line(line, expected)
    scanner = ImageScanner(line_cap=cap)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for start, end in zip(bounds, bounds[1:]):
        scanner.feed(data[start:end])
    scanner.end_artifact()
    if scanner.needs_rescan:
        scanner.rescan([data.decode()])
    assert list(scanner.refs.items()) == list(expected.items())


@pytest.mark.parametrize("level", [0, 1, 2, 3, 6, 9])
def test_archives_at_every_level_are_standard_zips(tmp_path: Path, level: int) -> None:
    from tests.http.conftest import Site
    from tests.logfactory import header, simple_turn, write_log

    site = Site(tmp_path)
    write_log(site.root, header("s1"), [[*simple_turn(0, "compressible text é 😀 " * 3000)], [*simple_turn(2, "more")]])
    site.index()
    data = site.client(compression_level=level).get("/api/session.export", params={"sessionId": "s1"}).content
    with zipfile.ZipFile(BytesIO(data)) as archive:
        assert archive.testzip() is None
        assert "compressible text é 😀 " * 10 in archive.read("session.jsonl").decode()
    if shutil.which("unzip"):
        target = tmp_path / "export.zip"
        target.write_bytes(data)
        result = subprocess.run(["unzip", "-t", str(target)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


def test_the_default_level_deflates_with_isal() -> None:
    isal = pytest.importorskip("isal.isal_zlib")
    import zlib

    assert codec(DEFAULT_LEVEL) is isal and codec(6) is zlib and codec(0) is zlib  # zlib beyond ISA-L's levels
    assert Exporter("unused.db", lambda: None, None, None).level == DEFAULT_LEVEL == 1
