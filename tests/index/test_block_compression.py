"""Raw blocks and document texts compressed with the index's dictionary (session 12).

Blocks under :data:`~readmodel.store.blocks.SMALL_PAYLOAD_BYTES` are compressed
with smaller match tables than level 3's, larger ones and every document text
exactly as level 3 compresses them.  Whatever the tables, a frame names its
dictionary (readers find it by that id) and decompresses to the payload.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from readmodel.store import blocks


def _log_lines(count: int, salt: int) -> bytes:
    """LF-joined event lines resembling a log's: shared keys, varying ids and words."""
    return b"\n".join(
        b'{"seq":%d,"type":"assistant/message","time":%d,"text":"step %d of the plan, file src/mod%d.py"}'
        % (seq, 1_700_000_000_000 + seq * 37, (seq * 7919 + salt) % 1009, seq % 53)
        for seq in range(count)
    )


@pytest.fixture(scope="module")
def dictionary() -> Iterator[tuple[int, bytes]]:
    """A trained dictionary, active while the module's tests run."""
    trained = blocks.train_dictionary([_log_lines(40, salt) for salt in range(400)], 16 * 1024)
    blocks.use_dictionary(*trained)
    yield trained
    blocks.use_dictionary(0, b"")


def _level_3(dictionary: bytes, data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=blocks.BLOCK_LEVEL, dict_data=zstandard.ZstdCompressionDict(dictionary)).compress(data)


def _payload_of_size(size: int) -> bytes:
    payload = _log_lines(size // 80 + 2, size)
    return payload[:size]


@pytest.mark.parametrize("size", [0, 100, 20_000, blocks.SMALL_PAYLOAD_BYTES - 1, blocks.SMALL_PAYLOAD_BYTES, 300_000])
def test_every_block_frame_names_the_dictionary_and_decompresses_to_its_payload(dictionary: tuple[int, bytes], size: int) -> None:
    payload = _payload_of_size(size)
    frame = blocks.compress_payload(payload)
    assert blocks.frame_dictionary(frame) == dictionary[0]
    assert blocks.decompress_payload(frame) == payload
    # A reader with only the dictionary (another process, another version) reads it too.
    assert zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(dictionary[1])).decompress(frame) == payload


def test_blocks_from_the_small_payload_size_on_are_compressed_as_level_3(dictionary: tuple[int, bytes]) -> None:
    for size in (blocks.SMALL_PAYLOAD_BYTES, 300_000):
        payload = _payload_of_size(size)
        assert blocks.compress_payload(payload) == _level_3(dictionary[1], payload)


def test_small_blocks_are_about_as_small_as_level_3s(dictionary: tuple[int, bytes]) -> None:
    payloads = [_payload_of_size(size) for size in (20_000, 40_000, 64_000, 120_000)]
    small = sum(len(blocks.compress_payload(payload)) for payload in payloads)
    level_3 = sum(len(_level_3(dictionary[1], payload)) for payload in payloads)
    assert small <= level_3 * 1.02


def test_document_texts_are_compressed_exactly_as_level_3_at_every_size(dictionary: tuple[int, bytes]) -> None:
    for size in (100, 20_000, 64_000, 300_000):
        data = _payload_of_size(size)
        assert blocks.compress_text(data) == _level_3(dictionary[1], data)


def test_the_block_compressors_are_per_dictionary(dictionary: tuple[int, bytes]) -> None:
    """Switching dictionaries switches both compressors: a frame names the active one."""
    other = blocks.train_dictionary([_log_lines(40, salt + 5000) for salt in range(400)], 16 * 1024)
    payload = _payload_of_size(40_000)
    try:
        blocks.use_dictionary(*other)
        assert blocks.frame_dictionary(blocks.compress_payload(payload)) == other[0]
        assert blocks.frame_dictionary(blocks.compress_payload(_payload_of_size(200_000))) == other[0]
    finally:
        blocks.use_dictionary(*dictionary)
    assert blocks.frame_dictionary(blocks.compress_payload(payload)) == dictionary[0]


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.binary(min_size=0, max_size=3000).filter(lambda line: b"\n" not in line), min_size=1, max_size=60))
def test_any_block_round_trips_line_for_line(dictionary: tuple[int, bytes], lines: list[bytes]) -> None:
    frame = blocks.compress_block(lines)
    assert blocks.decompress_block(frame) == lines
