"""Zstandard frame scanning for the log reader.

The scanner itself is shared with the export (``readmodel.export.frames``); here its
damage errors become the reader's corrupt-log errors.

:func:`iter_region` is the reader's hot path: it decodes a log held in memory
frame by frame with one reused decompression context, and hands plaintext
over in batches of whole frames.  Any frame that is not plainly fine (a
decoder error, an incomplete or over-long frame, stray bytes after its end,
an unusually large compressed size) takes the exact streaming path of
:func:`decode_frame` instead, so errors, and the plaintext delivered before
them, are the same as frame-by-frame streaming.

No path holds more than the plaintext bound of a frame, whatever its header
declares: the one-shot decode trusts a declared content size only up to the
bound (libzstd fails a frame whose blocks exceed it), and everything else is
decoded in bounded pieces (see :mod:`readmodel.export.frames`).
"""

from __future__ import annotations

import queue
import threading
from array import array
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Final, TypeVar

import zstandard

from readmodel.export import frames as _frames
from readmodel.export.frames import (
    DEFAULT_MAX_FRAME_PLAINTEXT,
    ZSTD_MAGIC,
    FrameSpan,
    TornFrame,
    ZstdFrameError,
)

from readmodel.core.accelerators import LINESCAN, accelerated

from .records import LogFormatError

__all__ = [
    "DEFAULT_MAX_FRAME_PLAINTEXT",
    "ZSTD_MAGIC",
    "FrameSpan",
    "FrameTooLarge",
    "TornFrame",
    "decode_frame",
    "decode_frame_at_once",
    "decode_torn_frame",
    "decode_whole_frame",
    "first_frame",
    "frame_end",
    "iter_region",
    "scan_frames",
]

# A frame decoded in one call materialises its whole plaintext (at most the
# plaintext bound) at once; a frame larger than this when compressed is
# streamed instead, its plaintext handed over in pieces.
_ONE_SHOT_MAX_COMPRESSED: Final = 1 << 20

# Plaintext handed to the consumer per batch (whole frames; a larger frame goes alone).
REGION_BATCH_BYTES: Final = 1 << 20

_local = threading.local()
T = TypeVar("T")


class FrameTooLarge(LogFormatError):
    """A frame's plaintext exceeds the configured bound."""


def _as_log_error(exc: ZstdFrameError) -> LogFormatError:
    if isinstance(exc, _frames.FrameTooLarge):
        return FrameTooLarge(exc.message)
    return LogFormatError(exc.message)


def scan_frames(fh: BinaryIO, start: int = 0, size: int | None = None) -> Iterator[FrameSpan | TornFrame]:
    """See :func:`readmodel.export.frames.scan_frames`; damage is a corrupt log."""
    try:
        yield from _frames.scan_frames(fh, start, size)
    except ZstdFrameError as exc:
        raise _as_log_error(exc) from None


def decode_frame(fh: BinaryIO, span: FrameSpan, sink: Callable[[bytes], None], max_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT) -> int:
    """See :func:`readmodel.export.frames.decode_frame`; failures are a corrupt log."""
    try:
        return _frames.decode_frame(fh, span, sink, max_plaintext)
    except ZstdFrameError as exc:
        raise _as_log_error(exc) from None


decode_torn_frame = _frames.decode_torn_frame


def _decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor.

    Creating one allocates a decompression context; reusing it across frames
    (each ``decompressobj()`` resets it) saves that per frame.  Decompressors
    are not thread-safe, hence one per thread.
    """
    dctx = getattr(_local, "dctx", None)
    if dctx is None:
        dctx = _local.dctx = zstandard.ZstdDecompressor()
    return dctx


def decode_frame_at_once(frame: bytes | memoryview, max_plaintext: int) -> bytes | None:
    """The plaintext of ``frame`` (the bytes of one complete frame) in one call.

    ``None`` when the frame is not plainly fine (a decoder error, not exactly
    one complete frame, plaintext over ``max_plaintext``, an empty frame) or
    declares no content size while its block headers allow more than
    ``max_plaintext`` (a compressed block allows 128 KiB): the caller then takes
    the streaming path, which reports a failure exactly and measures such a
    frame without keeping its plaintext.

    Memory never exceeds ``max_plaintext`` whatever the header says.  A frame
    that declares its content size (this project's writer's do) decodes into a
    buffer of exactly that size, and libzstd fails it if the blocks hold
    more; one that declares none is decoded in bounded pieces, stopping at
    the bound.  A declared size of 0 is not taken on trust: the one-shot
    decoder would return nothing without looking at the blocks.
    """
    try:
        declared = zstandard.frame_content_size(frame)
    except zstandard.ZstdError:
        return None
    if declared > 0:
        if declared > max_plaintext:
            return None
        try:
            # Positional (max_output_size, read_across_frames, allow_extra_data): measurably cheaper per frame.
            return _decompressor().decompress(frame, 0, False, False)
        except (zstandard.ZstdError, MemoryError):
            return None
    if declared == 0:
        return None
    return _decode_unsized(frame, max_plaintext)


def _decode_unsized(frame: bytes | memoryview, max_plaintext: int) -> bytes | None:
    """:func:`decode_frame_at_once` of a frame without a declared content size."""
    source = _frames.buffer_source(frame)
    if _frames.plaintext_bound(source) > max_plaintext:
        return None  # the streaming path measures it without keeping its plaintext
    try:
        out = b"".join(_frames.bounded_pieces(source, max_plaintext, _decompressor()))
    except (zstandard.ZstdError, _frames.OverBound):
        return None
    return None if source.starved else out


def decode_whole_frame(fh: BinaryIO, span: FrameSpan, max_plaintext: int, data: bytes | None = None) -> bytes:
    """The plaintext of one complete frame as one ``bytes`` (``data``, when given, holds the file's bytes).

    At once when the frame is small and plainly fine, else streamed, so
    failures are exactly :func:`decode_frame`'s (a :class:`LogFormatError`).
    """
    if data is not None:
        plaintext = decode_frame_at_once(memoryview(data)[span.start : span.end], max_plaintext)
    elif span.end - span.start <= _ONE_SHOT_MAX_COMPRESSED:
        fh.seek(span.start)
        plaintext = decode_frame_at_once(fh.read(span.end - span.start), max_plaintext)
    else:
        plaintext = None
    if plaintext is not None:
        return plaintext
    parts: list[bytes] = []
    decode_frame(fh, span, parts.append, max_plaintext)
    return b"".join(parts)


def _stream_frame(fh: BinaryIO, span: FrameSpan, max_plaintext: int) -> Iterator[bytes]:
    """:func:`readmodel.export.frames.iter_frame` with failures as corrupt-log errors."""
    try:
        yield from _frames.iter_frame(fh, span, max_plaintext)
    except ZstdFrameError as exc:
        raise _as_log_error(exc) from None


def frame_end_python(data: bytes, pos: int, size: int) -> int:
    """End offset of the frame starting at ``pos`` in ``data[:size]``, or -1 when it is torn.

    The in-memory twin of :func:`readmodel.export.frames.scan_frames` (same
    structural walk, same damage errors, raised as :class:`LogFormatError`);
    ``len(data)`` must be ``size``.
    """
    frame_start = pos
    if size - pos < 4:
        return -1
    if data[pos : pos + 4] != ZSTD_MAGIC:
        raise LogFormatError(f"invalid frame magic at byte {frame_start}")
    if size - pos < 5:
        return -1
    descriptor = data[pos + 4]
    if descriptor & 0x18:
        raise LogFormatError(f"reserved frame header bits set at byte {frame_start}")
    fcs_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    fcs_bytes = (1 if single_segment else 0) if fcs_flag == 0 else (2, 4, 8)[fcs_flag - 1]
    pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3] + fcs_bytes
    if pos > size:
        return -1
    while True:
        if size - pos < 3:
            return -1
        block = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
        block_type = (block >> 1) & 3
        if block_type == 3:
            raise LogFormatError(f"reserved block type in frame at byte {frame_start}")
        pos += 4 if block_type == 1 else 3 + (block >> 3)
        if pos > size:
            return -1
        if block & 1:
            break
    if descriptor & 4:  # content checksum
        pos += 4
        if pos > size:
            return -1
    return pos


_frame_end_c: Final = accelerated(LINESCAN, "frame_end")
"""The C walk of :func:`frame_end_python` (``indexer/_linescan.c``): -2 where the Python walk raises."""


def frame_end(data: bytes, pos: int, size: int) -> int:
    """:func:`frame_end_python`, in C when the accelerator is built (the same ends and errors)."""
    if _frame_end_c is not None:
        end: int = _frame_end_c(data, pos, size)
        if end >= -1:
            return end
    return frame_end_python(data, pos, size)


def first_frame(fh: BinaryIO, size: int, data: bytes | None = None) -> FrameSpan | TornFrame | None:
    """The first frame of the file (``None`` for an empty one); damage raises :class:`LogFormatError`."""
    if data is not None and len(data) == size:
        if size == 0:
            return None
        end = frame_end(data, 0, size)
        return FrameSpan(0, end) if end >= 0 else TornFrame(0)
    return next(scan_frames(fh, 0, size), None)


def iter_region(
    fh: BinaryIO, start: int, size: int, max_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT, data: bytes | None = None
) -> Iterator[tuple[bytes, int] | TornFrame]:
    """The plaintext of every complete frame from ``start``, then the torn frame if any.

    ``data``, when given, is the file's first ``size`` bytes (``fh`` reads the
    same bytes).  Yields ``(plaintext, end)`` pairs, ``end`` being the file
    offset after the last complete frame whose plaintext has been yielded (the
    final pair always carries the end of the last complete frame), and finally
    at most one :class:`TornFrame`.  Concatenated, the plaintext is exactly
    what :func:`decode_frame` delivers frame after frame; an error (bad frame
    structure or content) is raised only after the plaintext of every frame
    before the damaged one, and whatever streaming delivers of the damaged
    frame itself, has been yielded.  Plaintext is batched up to
    :data:`REGION_BATCH_BYTES` (whole frames; a larger frame goes alone).
    """
    if data is None or len(data) != size:
        if size - start >= PREFETCH_MIN_BYTES:
            yield from prefetched(_iter_region_windowed(fh, start, size, max_plaintext), PREFETCH_BATCHES)
        else:
            yield from _iter_region_from_file(fh, start, size, max_plaintext)
        return
    view = memoryview(data)
    batch: list[bytes] = []
    batch_bytes = 0
    pos = yielded_end = start
    while pos < size:
        try:
            end = frame_end(data, pos, size)
        except LogFormatError:
            if batch:
                yield b"".join(batch), pos
            raise
        if end < 0:
            break
        out = decode_frame_at_once(view[pos:end], max_plaintext) if end - pos <= _ONE_SHOT_MAX_COMPRESSED else None
        if out is None:
            # The exact streaming path: whatever it delivers before failing goes out first.
            if batch:
                yield b"".join(batch), pos
                batch, batch_bytes, yielded_end = [], 0, pos
            for piece in _stream_frame(fh, FrameSpan(pos, end), max_plaintext):
                yield piece, pos
            out = b""
        pos = end
        if out:
            batch.append(out)
            batch_bytes += len(out)
            if batch_bytes >= REGION_BATCH_BYTES:
                yield b"".join(batch) if len(batch) > 1 else batch[0], pos
                batch, batch_bytes, yielded_end = [], 0, pos
    if batch or pos != yielded_end:
        yield (b"".join(batch) if len(batch) != 1 else batch[0]), pos
    if pos < size:
        yield TornFrame(pos)


PREFETCH_MIN_BYTES: Final = 4 << 20
"""A region of a log read from its file is decoded ahead on a thread of its own from this many compressed bytes."""
PREFETCH_BATCHES: Final = 2
"""Batches (of up to :data:`REGION_BATCH_BYTES` of plaintext) decoded ahead of the consumer."""

_END: Final = object()


def prefetched(items: Iterator[T], depth: int) -> Iterator[T]:
    """``items``, produced on a thread of its own at most ``depth`` items ahead of the consumer.

    For a long log read from its file: reading and decompressing frames
    (system calls and libzstd, which release the GIL) overlap with the
    consumer's decoding and validation of the previous batch, so one log's
    reading can use more than one core.  The same items in the same order; an
    exception ``items`` raises is raised here at the same point of the
    sequence.  Closing this generator (or the consumer failing) stops the
    thread and waits for it, so whatever ``items`` reads (a file object) is
    free again when the generator is closed or exhausted.
    """
    out: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if not _offer(out, (item, None), stop):
                    return
            _offer(out, (_END, None), stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, in order
            _offer(out, (_END, exc), stop)
        finally:
            closer = getattr(items, "close", None)
            if closer is not None:
                closer()

    thread = threading.Thread(target=produce, name="frame-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, error = out.get()
            if item is _END:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        thread.join()


def _offer(out: queue.Queue[Any], item: Any, stop: threading.Event) -> bool:
    """Put ``item`` unless ``stop`` is set first; whether it was put."""
    while not stop.is_set():
        try:
            out.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


WINDOW_BYTES: Final = 1 << 20
"""Compressed bytes :func:`_iter_region_windowed` reads in one call."""


def _iter_region_windowed(fh: BinaryIO, start: int, size: int, max_plaintext: int) -> Iterator[tuple[bytes, int] | TornFrame]:
    """:func:`_iter_region_from_file` in few calls that give the GIL up: what the decode-ahead thread runs.

    The per-frame path seeks, reads and decodes frame by frame, and each of
    those calls gives the GIL up and then waits for it while the consumer's
    fold holds it (up to the switch interval each time), so a thread running
    it fell behind the consumer instead of working beside it.  This reads
    :data:`WINDOW_BYTES` of compressed log at once, finds its frames in memory
    (:func:`frame_end`) and decodes each batch of frames that declare their
    plaintext size, within the bound, in one libzstd call that runs without
    the GIL (``multi_decompress_to_buffer``, which fails a frame whose
    plaintext is not exactly its declared size); a frame that declares none
    goes through :func:`decode_frame_at_once`, as in memory.  Anything else —
    a frame that fails or is damaged, a torn tail, a frame longer than the
    window, a file shorter than ``size`` — hands the rest of the region, from
    the first frame not yet delivered, to the per-frame path, which delivers
    and fails exactly as it always has.  The plaintext before it is the same,
    batched at whole frames as there (a batch ends once it holds
    :data:`REGION_BATCH_BYTES`).
    """
    batch = _Batch(start)
    pos = start
    while pos < size:
        want = min(WINDOW_BYTES, size - pos)  # at most _ONE_SHOT_MAX_COMPRESSED: every frame may decode at once
        fh.seek(pos)
        window = fh.read(want)
        if len(window) != want:  # the file changed under the reader
            yield from _handed_over(batch, fh, size, max_plaintext)
            return
        view = memoryview(window)
        spans: list[int] = []  # start, end, declared size of each frame waiting to be decoded together
        pending = local = 0
        while local < want:
            try:
                end = frame_end(window, local, want)
            except LogFormatError:
                end = -2  # damage: the per-frame path raises it at the same point
            if end == -1 and local > 0 and pos + want < size:
                break  # the frame goes on past the window: the next window starts with it
            declared = _declared_size(view[local:end]) if end >= 0 else -1
            sized = 0 < declared <= max_plaintext
            if sized:
                spans += (local, end, declared)
                pending += declared
                if batch.size + pending < REGION_BATCH_BYTES:
                    local = end
                    continue
            if not batch.decode(window, pos, spans, pending):
                yield from _handed_over(batch, fh, size, max_plaintext)
                return
            spans, pending = [], 0
            if not sized:
                plaintext = decode_frame_at_once(view[local:end], max_plaintext) if end >= 0 else None
                if plaintext is None:  # a torn tail, damage, or a frame the per-frame path fails
                    yield from _handed_over(batch, fh, size, max_plaintext)
                    return
                batch.add([plaintext], len(plaintext), pos + end)
            local = end
            if batch.size >= REGION_BATCH_BYTES:
                yield batch.take()
        if not batch.decode(window, pos, spans, pending):
            yield from _handed_over(batch, fh, size, max_plaintext)
            return
        pos += local
    if batch.pieces or batch.end != batch.delivered:
        yield batch.take()


class _Batch:
    """Decoded plaintext not yet delivered: the frames up to :attr:`end` (from :attr:`delivered`)."""

    __slots__ = ("pieces", "size", "end", "delivered")

    def __init__(self, start: int) -> None:
        self.pieces: list[bytes] = []
        self.size = 0
        self.end = self.delivered = start

    def add(self, pieces: list[bytes], size: int, end: int) -> None:
        self.pieces += pieces
        self.size += size
        self.end = end

    def decode(self, window: bytes, pos: int, spans: list[int], size: int) -> bool:
        """Add the frames at ``spans`` of the window read at ``pos`` (``size`` bytes declared); False: one failed, none added."""
        if not spans:
            return True
        decoded = _decode_together(window, spans)
        if decoded is None:
            return False
        self.add(decoded, size, pos + spans[-2])
        return True

    def take(self) -> tuple[bytes, int]:
        """The plaintext to deliver, and the end of its last frame."""
        taken = b"".join(self.pieces), self.end
        self.pieces, self.size, self.delivered = [], 0, self.end
        return taken


def _declared_size(frame: memoryview) -> int:
    """The plaintext size ``frame``'s header declares (-1: none, or an unreadable header)."""
    try:
        return int(zstandard.frame_content_size(frame))
    except zstandard.ZstdError:
        return -1


def _decode_together(window: bytes, spans: list[int]) -> list[bytes] | None:
    """The plaintext of the frames at ``spans`` (start, end, declared size, ...) of ``window``, decoded in
    one call without the GIL; ``None`` when any of them fails (the per-frame path then says how)."""
    segments = array("Q")
    for at in range(0, len(spans), 3):
        segments.append(spans[at])
        segments.append(spans[at + 1] - spans[at])
    try:
        frames = zstandard.BufferWithSegments(window, segments.tobytes())
        decoded = _decompressor().multi_decompress_to_buffer(frames, decompressed_sizes=array("Q", spans[2::3]).tobytes(), threads=0)
    except (zstandard.ZstdError, MemoryError, ValueError):
        return None
    return [decoded[at].tobytes() for at in range(len(decoded))]


def _handed_over(batch: _Batch, fh: BinaryIO, size: int, max_plaintext: int) -> Iterator[tuple[bytes, int] | TornFrame]:
    """What ``batch`` holds, then the region from its end on, frame by frame."""
    if batch.pieces:
        yield batch.take()
    yield from _iter_region_from_file(fh, batch.end, size, max_plaintext)


def _iter_region_from_file(fh: BinaryIO, start: int, size: int, max_plaintext: int) -> Iterator[tuple[bytes, int] | TornFrame]:
    """:func:`iter_region` reading frames from ``fh`` (logs too large to hold in memory)."""
    batch: list[bytes] = []
    batch_bytes = 0
    end = yielded_end = start
    frames = scan_frames(fh, start, size)
    while True:
        try:
            item = next(frames, None)
        except LogFormatError:
            if batch:
                yield b"".join(batch), end
            raise
        if item is None or isinstance(item, TornFrame):
            break
        out = None
        if item.end - item.start <= _ONE_SHOT_MAX_COMPRESSED:
            fh.seek(item.start)
            out = decode_frame_at_once(fh.read(item.end - item.start), max_plaintext)
        if out is None:
            # The exact streaming path: whatever it delivers before failing goes out first.
            if batch:
                yield b"".join(batch), end
                batch, batch_bytes, yielded_end = [], 0, end
            for piece in _stream_frame(fh, item, max_plaintext):
                yield piece, end
            out = b""
        end = item.end
        if out:
            batch.append(out)
            batch_bytes += len(out)
            if batch_bytes >= REGION_BATCH_BYTES:
                yield b"".join(batch), end
                batch, batch_bytes, yielded_end = [], 0, end
    if batch or end != yielded_end:
        yield b"".join(batch), end
    if item is not None:
        yield item
