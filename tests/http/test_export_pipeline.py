"""The export's threaded stages and its ZIP container (issue 21, target 4).

* deflate in independent, sync-flushed segments primed with the previous
  32 KiB == the plaintext, with the CRC-32 and sizes of the whole, for any cut
  of the input into pieces and segments, at ISA-L's and zlib's levels; and as
  small as one continuous stream;
* the read-ahead hands over items, the end and a failure in the source's
  order, and closing it closes the source on its thread before returning;
* the container's ZIP64 records (forced per entry, and for more than 65,535
  entries) are read by Python's ``zipfile`` and ``unzip -t``.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import zipfile
import zlib
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from readmodel.export.pipeline import Readahead, SegmentDeflater, codec
from readmodel.export.zipstream import ZIP64_LIMIT, ZipLimitError, ZipStream


def _deflated(pieces: list[bytes], level: int, segment: int, depth: int) -> tuple[bytes, SegmentDeflater]:
    deflater = SegmentDeflater(level, segment=segment, depth=depth)
    out = [chunk for piece in pieces for chunk in deflater.write(piece)]
    out += list(deflater.finish())
    return b"".join(out), deflater


@settings(max_examples=80, deadline=None)
@given(
    pieces=st.lists(st.one_of(st.binary(max_size=300), st.text(alphabet="ab \n{}é", max_size=400).map(str.encode)), max_size=12),
    level=st.sampled_from([0, 1, 3, 6]),
    segment=st.sampled_from([1, 7, 64, 1000]),
    depth=st.sampled_from([1, 3]),
)
def test_segments_inflate_to_the_plaintext_with_its_crc(pieces: list[bytes], level: int, segment: int, depth: int) -> None:
    data, deflater = _deflated(pieces, level, segment, depth)
    plain = b"".join(pieces)
    assert zlib.decompress(data, -15) == plain
    assert (deflater.crc, deflater.size, deflater.compressed) == (zlib.crc32(plain), len(plain), len(data))


def test_primed_segments_are_as_small_as_one_stream() -> None:
    text = b"".join(b'{"seq":%d,"type":"assistant/chunk","text":"the same words again and again %d"}\n' % (n, n % 97) for n in range(40_000))
    data, _ = _deflated([text[i : i + 70_000] for i in range(0, len(text), 70_000)], 1, 64 << 10, 4)
    module = codec(1)
    compressor = module.compressobj(1, module.DEFLATED, -15)
    whole = compressor.compress(text) + compressor.flush()
    assert zlib.decompress(data, -15) == text
    assert len(data) <= len(whole) * 1.02


def _source(items: list[bytes], failure: Exception | None, closed: list[str]) -> Iterator[bytes]:
    try:
        yield from items
        if failure is not None:
            raise failure
    finally:
        closed.append(threading.current_thread().name)


def test_readahead_keeps_order_and_raises_the_failure_after_the_items_before_it() -> None:
    closed: list[str] = []
    ahead = Readahead(_source([b"a", b"b", b"c"], ValueError("frame 3 is damaged"), closed), depth=1)
    got = []
    with pytest.raises(ValueError, match="frame 3 is damaged"):
        for item in ahead:
            got.append(item)
    assert got == [b"a", b"b", b"c"]
    assert closed == ["sessionq-readahead"]
    assert list(Readahead(_source([b"x"] * 50, None, []), depth=2)) == [b"x"] * 50


def test_closing_the_readahead_closes_the_source_before_it_returns() -> None:
    closed: list[str] = []
    ahead = Readahead(_source([bytes([n]) for n in range(100)], None, closed), depth=2)
    assert next(ahead) == b"\x00"
    ahead.close()
    assert closed == ["sessionq-readahead"]
    assert not any(thread.name == "sessionq-readahead" for thread in threading.enumerate())
    with pytest.raises(StopIteration):
        next(ahead)


def _archive(entries: list[tuple[str, bytes, bool]]) -> bytes:
    archive = ZipStream()
    out = []
    for name, content, zip64 in entries:
        out.append(archive.begin(name, zip64))
        data, deflater = _deflated([content], 1, 1 << 16, 2)
        out.append(archive.body(data))
        out.append(archive.end(deflater.crc, deflater.compressed, deflater.size))
    out.append(archive.close())
    return b"".join(out)


def _check_with_unzip(tmp_path: Path, data: bytes) -> None:
    if shutil.which("unzip"):
        target = tmp_path / "archive.zip"
        target.write_bytes(data)
        result = subprocess.run(["unzip", "-t", "-qq", str(target)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


def test_entries_with_and_without_zip64_read_back(tmp_path: Path) -> None:
    entries = [("session.jsonl", b"line\n" * 5000, True), ("subagents/k/session.jsonl", b"", False), ("media/é.png", b"\x89PNG" * 9, False)]
    data = _archive(entries)
    with zipfile.ZipFile(BytesIO(data)) as archive:
        assert archive.testzip() is None
        assert [(info.filename, archive.read(info), info.extract_version >= 45) for info in archive.infolist()] == entries
    _check_with_unzip(tmp_path, data)


@pytest.mark.slow
def test_more_than_65535_entries_get_zip64_end_records(tmp_path: Path) -> None:
    archive = ZipStream()
    out = []
    for n in range(0x10000 + 2):  # empty entries: the final empty block alone is their deflate stream
        out += [archive.begin(f"media/{n}.png", False), archive.body(b"\x03\x00"), archive.end(0, 2, 0)]
    data = b"".join([*out, archive.close()])
    assert b"PK\x06\x06" in data[-200:]  # the ZIP64 end record and its locator precede the classic one
    with zipfile.ZipFile(BytesIO(data)) as archive:
        assert len(archive.infolist()) == 0x10000 + 2
    _check_with_unzip(tmp_path, data)


def test_an_entry_without_zip64_cannot_end_past_the_32_bit_sizes() -> None:
    archive = ZipStream()
    archive.begin("session.jsonl", zip64=False)
    with pytest.raises(ZipLimitError):
        archive.end(0, 10, ZIP64_LIMIT + 1)
    archive = ZipStream()
    archive.begin("session.jsonl", zip64=True)
    assert len(archive.end(0, 10, ZIP64_LIMIT + 1)) == 24  # the 64-bit data descriptor
