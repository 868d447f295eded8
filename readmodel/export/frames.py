"""Structural scanning and bounded decoding of concatenated Zstandard frames.

A zstd transcript is a plain concatenation of independent frames (format-spec
§2.3): frame 1 holds the header line, every later frame one append batch.  The
scan walks frame and block headers without decompressing, so it finds frame
boundaries of a file of any size in O(frames + blocks) small reads.  Only the
final frame can be incomplete (EOF inside it): that is a torn tail, not damage.

Decoding is bounded: zstd regenerates 128 KiB from a four-byte block, so a
frame of a few KB may expand to gigabytes, and its header may declare a false
content size or none.  Plaintext is produced in pieces of at most
:data:`PIECE_BYTES` and counted against the frame bound; a frame whose blocks
could exceed the bound is measured first (decoded, its plaintext discarded), so
it fails before any of it reaches a consumer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import BinaryIO, Final

import msgspec
import zstandard


class ZstdFrameError(ValueError):
    """Damage in a zstd transcript's frame structure or content (always corrupt)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_READ_CHUNK: Final = 1 << 20
DEFAULT_MAX_FRAME_PLAINTEXT: Final = 256 << 20
PIECE_BYTES: Final = 1 << 20
"""Plaintext a streaming decode hands over at a time (at most)."""
_BLOCK_MAX_PLAINTEXT: Final = 128 << 10  # Block_Maximum_Size (RFC 8878 §3.1.1.2.3)


class FrameSpan(msgspec.Struct, frozen=True):
    """A structurally complete frame occupying ``[start, end)`` of the file."""

    start: int
    end: int


class TornFrame(msgspec.Struct, frozen=True):
    """An incomplete final frame starting at ``start`` (EOF was hit inside it)."""

    start: int


class FrameTooLarge(ZstdFrameError):
    """A frame's plaintext exceeds the configured bound."""


def _frame_header_length(descriptor: int) -> int:
    """Bytes of the frame header (descriptor, window, dictionary id, content size) after the magic."""
    fcs_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    fcs_bytes = (1 if single_segment else 0) if fcs_flag == 0 else (2, 4, 8)[fcs_flag - 1]
    return 1 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3] + fcs_bytes


def scan_frames(fh: BinaryIO, start: int = 0, size: int | None = None) -> Iterator[FrameSpan | TornFrame]:
    """Yield every complete frame from ``start``, then at most one :class:`TornFrame`.

    ``size`` is the byte length to treat as end of file (defaults to the
    current size).  Raises :class:`ZstdFrameError` (corrupt) for a bad magic
    number, reserved descriptor bits or a reserved block type.
    """
    if size is None:
        size = fh.seek(0, 2)
    pos = start
    while pos < size:
        frame_start = pos
        if size - pos < 4:
            yield TornFrame(frame_start)
            return
        fh.seek(pos)
        head = fh.read(18)  # magic + the largest possible frame header
        if head[:4] != ZSTD_MAGIC:
            raise ZstdFrameError(f"invalid frame magic at byte {frame_start}")
        if len(head) < 5:
            yield TornFrame(frame_start)
            return
        descriptor = head[4]
        if descriptor & 0x18:
            raise ZstdFrameError(f"reserved frame header bits set at byte {frame_start}")
        has_checksum = (descriptor >> 2) & 1
        pos += 4 + _frame_header_length(descriptor)
        if pos > size:
            yield TornFrame(frame_start)
            return
        while True:
            if size - pos < 3:
                yield TornFrame(frame_start)
                return
            fh.seek(pos)
            raw = fh.read(3)
            block = raw[0] | (raw[1] << 8) | (raw[2] << 16)
            last = block & 1
            block_type = (block >> 1) & 3
            if block_type == 3:
                raise ZstdFrameError(f"reserved block type in frame at byte {frame_start}")
            payload = 1 if block_type == 1 else block >> 3
            pos += 3 + payload
            if pos > size:
                yield TornFrame(frame_start)
                return
            if last:
                break
        if has_checksum:
            pos += 4
            if pos > size:
                yield TornFrame(frame_start)
                return
        yield FrameSpan(frame_start, pos)


class FrameSource:
    """The compressed bytes ``[start, end)`` of one frame, as the decoder's ``read(size)`` source.

    ``read_at(offset, size)`` returns up to ``size`` bytes at ``offset`` as
    ``bytes`` (see :func:`buffer_source`); it seeks itself, so a consumer that
    uses the same file between two pieces of plaintext cannot move the
    decoder.  ``starved`` records that the decoder asked for more after the
    last byte: only a frame it has not finished does that, so a structurally
    complete span it starves on is incomplete.  One source feeds one decode;
    :meth:`again` gives a fresh one over the same bytes.
    """

    __slots__ = ("read_at", "start", "end", "pos", "starved")

    def __init__(self, read_at: Callable[[int, int], bytes], start: int, end: int) -> None:
        self.read_at = read_at
        self.start = self.pos = start
        self.end = end
        self.starved = False

    def again(self) -> FrameSource:
        return FrameSource(self.read_at, self.start, self.end)

    def read(self, size: int) -> bytes:
        piece = self.read_at(self.pos, min(size, self.end - self.pos)) if self.pos < self.end else b""
        if not piece:  # past the span, or the file was cut meanwhile
            self.starved = True
            return b""
        self.pos += len(piece)
        return piece


def file_source(fh: BinaryIO, start: int, end: int) -> FrameSource:
    """The source for the bytes ``[start, end)`` of ``fh``."""

    def read_at(offset: int, size: int) -> bytes:
        fh.seek(offset)
        return fh.read(size)

    return FrameSource(read_at, start, end)


def buffer_source(frame: bytes | memoryview) -> FrameSource:
    """The source for one frame held in memory.

    Pieces are copied to ``bytes``: ``zstandard``'s C backend crashes the
    process on a ``read()`` that returns a memoryview.
    """
    view = memoryview(frame)
    return FrameSource(lambda offset, size: bytes(view[offset : offset + size]), 0, len(view))


class OverBound(Exception):
    """Raised inside :func:`bounded_pieces` once the plaintext passes its bound."""


def bounded_pieces(source: FrameSource, max_plaintext: int, dctx: zstandard.ZstdDecompressor | None = None) -> Iterator[bytes]:
    """The frame's plaintext in pieces of at most :data:`PIECE_BYTES`.

    The decoder produces no more than one piece between two checks of the
    running total, so however far a frame expands (zstd blocks of four bytes
    each regenerate 128 KiB), the decoder holds one piece: past
    ``max_plaintext`` it raises :class:`OverBound`.  Decoder failures raise
    :class:`zstandard.ZstdError`; an unfinished frame just ends (see
    ``source.starved``).
    """
    produced = 0
    decoder = dctx if dctx is not None else zstandard.ZstdDecompressor()
    for piece in decoder.read_to_iter(source, read_size=_READ_CHUNK, write_size=PIECE_BYTES):
        produced += len(piece)
        if produced > max_plaintext:
            raise OverBound
        yield piece


def plaintext_bound(source: FrameSource) -> int:
    """An upper bound of the plaintext the source's frame bytes decode to.

    From the block headers alone: a raw or RLE block regenerates exactly its
    size field, a compressed block at most ``Block_Maximum_Size`` (128 KiB,
    which libzstd enforces).  Ends at the last block or at the source's end
    (a torn frame's available bytes).  Cheap (one small read per block), so a
    frame is measured by decoding only when its blocks could exceed a bound.
    """
    read_at, end = source.read_at, source.end
    head = read_at(source.start, 5)
    if len(head) < 5:
        return 0
    pos = source.start + 4 + _frame_header_length(head[4])
    bound = 0
    while end - pos >= 3:
        raw = read_at(pos, 3)
        if len(raw) < 3:
            break
        block = raw[0] | (raw[1] << 8) | (raw[2] << 16)
        block_type = (block >> 1) & 3
        size = block >> 3
        bound += size if block_type < 2 else _BLOCK_MAX_PLAINTEXT
        pos += 3 + (1 if block_type == 1 else size)
        if block & 1 or block_type == 3:
            break
    return bound


def exceeds(source: FrameSource, max_plaintext: int) -> bool:
    """Whether the source's frame decodes to more than ``max_plaintext`` bytes.

    Decodes (discarding the plaintext, from a fresh source) only when
    :func:`plaintext_bound` allows that much; a decoder failure first is
    ``False`` (the caller's own decode meets it again, after the plaintext
    before it).
    """
    if plaintext_bound(source) <= max_plaintext:
        return False
    try:
        for _ in bounded_pieces(source.again(), max_plaintext):
            pass
    except OverBound:
        return True
    except zstandard.ZstdError:
        return False
    return False


def _too_large(span: FrameSpan, max_plaintext: int) -> FrameTooLarge:
    return FrameTooLarge(f"frame at byte {span.start} holds more than {max_plaintext} bytes of plaintext")


def _failed(span: FrameSpan, detail: str) -> ZstdFrameError:
    return ZstdFrameError(f"frame at byte {span.start} failed validation: {detail}")


def iter_frame(fh: BinaryIO, span: FrameSpan, max_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT) -> Iterator[bytes]:
    """Decompress one complete frame with full validation, yielding plaintext pieces.

    Checksum, dictionary and any decoder failure raise :class:`ZstdFrameError`;
    plaintext beyond ``max_plaintext`` raises :class:`FrameTooLarge`, and
    memory stays at one piece whatever the frame header declares (a content
    size may be absent or false).  A frame whose blocks could hold more than
    the bound is measured first, so :class:`FrameTooLarge` comes before any
    of its plaintext: a consumer that buffers (a line without its LF) never
    holds the bound's worth of a frame that fails anyway.  Pull-based, so a
    slow consumer holds one piece at a time.
    """
    source = file_source(fh, span.start, span.end)
    if exceeds(source, max_plaintext):
        raise _too_large(span, max_plaintext)
    try:
        yield from bounded_pieces(source, max_plaintext)
    except OverBound:
        raise _too_large(span, max_plaintext) from None
    except zstandard.ZstdError as exc:
        raise _failed(span, decoder_error(exc)) from None
    if source.starved:
        raise _failed(span, "incomplete frame")


GROUP_PLAINTEXT: Final = 1 << 20
"""Plaintext :func:`iter_frames` decodes in one call at most (a run of small frames), as
large as a streamed piece (:data:`PIECE_BYTES`): the export reads ahead a few of these."""


def frame_content_size(head: bytes) -> int | None:
    """The content size a frame header declares (``None`` when absent or the header is cut).

    ``head`` starts at the frame's magic number.  libzstd refuses a frame whose
    plaintext differs from its declared size, so a declared size bounds it.
    """
    if len(head) < 5:
        return None
    descriptor = head[4]
    fcs_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    if fcs_flag == 0 and not single_segment:
        return None
    width = 1 if fcs_flag == 0 else (2, 4, 8)[fcs_flag - 1]
    at = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    if len(head) < at + width:
        return None
    size = int.from_bytes(head[at : at + width], "little")
    return size + 256 if width == 2 else size


class _Window:
    """Reads of a file served from one buffered window of at least :data:`_READ_CHUNK` bytes.

    Frame headers and runs are read in file order, so most reads are slices of
    the window: a few system calls per MB instead of two per frame (each one
    also gives up the GIL, which a busy thread beside the reader takes for up
    to a switch interval).
    """

    __slots__ = ("fh", "base", "data")

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.base = 0
        self.data = b""

    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer only at the end of the file)."""
        start = offset - self.base
        if start < 0 or start + size > len(self.data):
            self.fh.seek(offset)
            self.data = self.fh.read(max(size, _READ_CHUNK))
            self.base, start = offset, 0
        return self.data[start : start + size]


def _runs(
    fh: BinaryIO, spans: list[FrameSpan], max_plaintext: int, group_plaintext: int,
) -> Iterator[tuple[list[FrameSpan], int, bytes | None]]:
    """``spans`` as runs ``(spans, declared plaintext, compressed bytes)`` and, for a large
    frame or one without a declared size, ``([span], -1, None)`` (to be streamed)."""
    index = 0
    count = len(spans)
    window = _Window(fh)
    while index < count:
        first = index
        declared = 0
        while index < count:
            span = spans[index]
            size = frame_content_size(window.read(span.start, 18))
            if size is None or size > max_plaintext or declared + size > group_plaintext:
                break
            declared += size
            index += 1
        if index == first:
            yield [spans[index]], -1, None
            index += 1
            continue
        run = spans[first:index]
        yield run, declared, window.read(run[0].start, run[-1].end - run[0].start)


def _decode_run(run: list[FrameSpan], declared: int, data: bytes) -> bytes | None:
    """A run's plaintext in one call; ``None`` when the bytes are short, the decoder fails
    or the plaintext is not the declared size (the slow path then finds and words it)."""
    if len(data) != run[-1].end - run[0].start:
        return None
    try:
        plaintext = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(data)
    except zstandard.ZstdError:
        return None
    return plaintext if len(plaintext) == declared else None


def iter_frames(
    fh: BinaryIO,
    spans: list[FrameSpan],
    max_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT,
    group_plaintext: int = GROUP_PLAINTEXT,
    executor: Executor | None = None,
    ahead: int = 2,
) -> Iterator[bytes]:
    """The plaintext of ``spans`` in order: :func:`iter_frame` over each, faster.

    A run of consecutive frames that each declare a content size, together at
    most ``group_plaintext`` bytes, is read in one call and decoded in one
    call (per-frame Python costs more than decoding a small frame).  Anything
    else, and any run whose decode fails, goes through :func:`iter_frame`
    frame by frame, so failures are the same errors at the same frames, after
    the same plaintext.  With an ``executor``, up to ``ahead`` runs beyond the
    one being handed over are decoded on it meanwhile (libzstd releases the
    GIL), still handed over in order.  Memory: ``ahead + 1`` runs (bounded by
    the declared sizes, which libzstd enforces) or one piece.
    """
    pending: deque[tuple[list[FrameSpan], Future[bytes | None]]] = deque()

    def settle(run: list[FrameSpan], plaintext: bytes | None) -> Iterator[bytes]:
        if plaintext is None:
            for span in run:  # the slow path finds and words the failure exactly
                yield from iter_frame(fh, span, max_plaintext)
        else:
            yield plaintext

    try:
        for run, declared, data in _runs(fh, spans, max_plaintext, group_plaintext):
            if data is None:  # a large frame or one without a declared size: streamed, after the runs before it
                while pending:
                    yield from settle(*_resolved(pending.popleft()))
                yield from iter_frame(fh, run[0], max_plaintext)
            elif executor is None:
                yield from settle(run, _decode_run(run, declared, data))
            else:
                pending.append((run, executor.submit(_decode_run, run, declared, data)))
                if len(pending) > ahead:
                    yield from settle(*_resolved(pending.popleft()))
        while pending:
            yield from settle(*_resolved(pending.popleft()))
    finally:
        for _run, future in pending:
            future.cancel()


def _resolved(item: tuple[list[FrameSpan], Future[bytes | None]]) -> tuple[list[FrameSpan], bytes | None]:
    return item[0], item[1].result()


def decoder_error(exc: zstandard.ZstdError) -> str:
    """libzstd's failure in the words the reader has always reported
    (``zstandard``'s streaming APIs word the same failure differently)."""
    detail = str(exc)
    for prefix in ("zstd decompress error: ", "zstd decompressor error: ", "decompression error: "):
        if detail.startswith(prefix):
            detail = detail[len(prefix) :]
            break
    return f"zstd decompressor error: {detail}"


def decode_frame(
    fh: BinaryIO,
    span: FrameSpan,
    sink: Callable[[bytes], None],
    max_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT,
) -> int:
    """:func:`iter_frame` into ``sink``; returns the plaintext length."""
    produced = 0
    for piece in iter_frame(fh, span, max_plaintext):
        produced += len(piece)
        sink(piece)
    return produced


def decode_torn_frame(fh: BinaryIO, torn: TornFrame, size: int, max_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT) -> bytes:
    """Whatever plaintext the available bytes of an incomplete frame release.

    A decoder error yields no plaintext, as in the reference; so does output
    beyond the plaintext bound (the tail is simply not recovered), which is
    found out before any of it is kept.
    """
    source = file_source(fh, torn.start, size)
    if exceeds(source, max_plaintext):
        return b""
    try:
        return b"".join(bounded_pieces(source, max_plaintext))
    except (OverBound, zstandard.ZstdError):
        return b""
