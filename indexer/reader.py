"""Reading one transcript exactly as the harness does, streaming and resumable.

The pipeline (format-spec §7.3): header → line scanner with the first-defect
rule → storage identity → the coordinator's checks (retired vocabulary, legacy
upgrades, message shapes, the known-type gate) → synthetic closers for an open
final turn → restore validation (header, envelopes, request headers, surface
fold).  The harness runs these as whole-log passes, so an earlier *stage* wins
over a later one even when the later stage fails on an earlier event.  We run
them in one streaming pass instead and keep, per stage, only the first failure;
after any failure, only earlier stages are still checked.  The error reported
is therefore the one the harness reports, with bounded memory.

Decoding is resumable: :class:`ResumePoint` records the byte offset just past
the last complete frame (zstd) or committed line (raw), a fingerprint of the
bytes before it, and the small walk states, so a grown log costs only its new
bytes.
"""

from __future__ import annotations

import io
import os
import stat
from contextlib import closing
from collections.abc import Callable
from typing import Any, BinaryIO, Final

import msgspec

from readmodel.core.clipping import clip, clip_path, clip_repr
from readmodel.projection.headers import HeaderValidationError, check_restored_header
from readmodel.projection.surface import SurfaceBase, SurfaceFold

from .headers import NotAHeader, parse_header_line
from .layout import Compression, LayoutError, expected_transcript_path, locate, revision_token, same_file
from .records import LineScanner, LogFormatError
from .pipeline import Event, EventSink, Pipeline
from .rawlines import AVAILABLE as RAW_LINES_AVAILABLE
from .repair import CloserState, closers_for
from .zstdframes import (
    DEFAULT_MAX_FRAME_PLAINTEXT,
    FrameSpan,
    TornFrame,
    decode_torn_frame,
    decode_whole_frame,
    first_frame,
    iter_region,
    scan_frames,
)


_RAW_CHUNK: Final = 1 << 20
_STABLE_READ_ATTEMPTS: Final = 5
# A zstd log up to this size is read into memory in one call: scanning its
# frames then costs no system calls, and frames decode from a memoryview.
_IN_MEMORY_MAX: Final = 16 << 20


class ResumeMismatch(Exception):
    """The file no longer continues the bytes a :class:`ResumePoint` was taken from."""


class TornTail(msgspec.Struct, frozen=True):
    """An incomplete tail: the valid prefix ends at ``truncate_to`` (file offset)."""

    truncate_to: int
    recovered: int


class ResumePoint(msgspec.Struct):
    """Where decoding stopped, and the walk states needed to continue from there.

    The surface itself is not part of it (it grows with the log): a resumed
    read gets it on demand from ``LogReader(surface_base=...)``, in practice
    from the index, and only when a replacement needs it.
    """

    compression: str
    offset: int
    fingerprint: str
    header: dict[str, Any]
    next_seq: int
    line_no: int
    last_seq: int | None
    last_time: Any
    closer_state: CloserState
    fold_generation: int


class DecodedLog(msgspec.Struct):
    """The outcome of one read.

    ``events`` are the stored events read by this call (all of them, or only
    the new ones when resuming), legacy-upgraded and validated; ``recovered``
    are complete events salvaged from a torn final zstd frame; ``closers`` are
    the in-memory synthetic closers.  The inspect view is ``events +
    recovered + closers`` on a full read.  With the reader's
    ``lazy_payloads`` a request header's ``system`` and ``tools`` may be
    ``msgspec.Raw``.

    Replacements among the stored events are reported through the reader's
    ``on_replacement`` hook as they happen (and collected in
    ``replacements`` when there is no hook); those made by recovered events
    are in ``tail_replacements``.  A replacement's shadowed seqs may belong to
    earlier reads: they are the only earlier events whose classification
    changes.
    """

    path: str
    compression: str
    header: dict[str, Any]
    revision: str
    size: int
    events: list[Event]
    recovered: list[Event]
    closers: list[Event]
    torn: TornTail | None
    resume: ResumePoint | None
    replacements: list[tuple[int, tuple[int, ...]]]
    tail_replacements: list[tuple[int, tuple[int, ...]]]


class LogReader:
    """Reads one transcript file (any size) into a :class:`DecodedLog`.

    ``session_id`` is the id the caller asked for (checked against the
    header); ``None`` accepts the header's own id.  ``root`` enables the
    storage-identity check of the path against the header.  With
    ``sink`` events are streamed in batches instead of collected.

    ``lazy_payloads`` (for callers that only validate and store events, such
    as the indexer): a ``request/header`` event's ``data.header.system`` and
    ``data.header.tools`` may be ``msgspec.Raw`` (their exact JSON bytes)
    instead of decoded values, on every decode path (block, line by line,
    resumed, torn tail), decided by the line's bytes alone.  Nothing else
    changes: the same events pass and fail with the same errors, and
    ``msgspec.json.encode`` of each event gives the same bytes as without it.
    (``json.dumps`` cannot encode ``Raw``; :func:`readmodel.store.blocks.encode_event`
    never falls back to it for such an event, whose other strings msgspec
    decoded and so hold no lone surrogate.)  Callers that look at those
    values (inspect views, replay, conformance) keep the default.

    ``packed_rows`` (for a sink that takes them, the indexer's projector):
    a packed chunk row accepted on the fast path may reach ``sink`` as one
    :class:`~indexer.packedrows.PackedRow` instead of its members.
    ``raw_lines`` (likewise): a batch of the fast path reaches ``sink`` with
    its raw lines as a second argument (:mod:`indexer.rawlines`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        compression: Compression,
        *,
        session_id: str | None = None,
        root: str | os.PathLike[str] | None = None,
        max_frame_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT,
        sink: EventSink | None = None,
        on_replacement: Callable[[int, tuple[int, ...]], None] | None = None,
        restore: bool = True,
        surface_base: SurfaceBase | None = None,
        lazy_payloads: bool = False,
        packed_rows: bool = False,
        raw_lines: bool = False,
        remember_digests: bool = False,
    ) -> None:
        self.lazy_payloads = lazy_payloads
        # The fold remembers its deferred tool-result digests for a projector in this process
        # (its sink) that asks for the same events' digests (toolresults.defer_fingerprint).
        self.remember_digests = remember_digests
        self.packed_rows = packed_rows
        self.raw_lines = raw_lines and RAW_LINES_AVAILABLE
        self.on_replacement = on_replacement
        self.surface_base = surface_base
        self.restore = restore
        self.path = os.fspath(path)
        self.compression = compression
        self.session_id = session_id
        self.root = root
        self.max_frame_plaintext = max_frame_plaintext
        self.sink = sink

    # -- public -----------------------------------------------------------------

    def read(self, resume: ResumePoint | None = None) -> DecodedLog:
        """Decode the file (from ``resume`` when given), retrying while it is replaced mid-read."""
        for _ in range(_STABLE_READ_ATTEMPTS):
            snapshot = _snapshot(self.path) if self.compression is Compression.ZSTD else None
            if snapshot is not None:
                # Every later read sees this snapshot of the first st_size bytes.
                before, data = snapshot
                result = self._read_open(io.BytesIO(data), before, resume, data)
            else:
                with open(self.path, "rb") as fh:
                    before = os.fstat(fh.fileno())
                    result = self._read_open(fh, before, resume, None)
            after = os.stat(self.path)
            if (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino) and after.st_size >= before.st_size:
                return result
        return result

    # -- internals --------------------------------------------------------------

    def _read_open(self, fh: BinaryIO, st: os.stat_result, resume: ResumePoint | None, data: bytes | None) -> DecodedLog:
        """Decode from ``fh`` (``data``, when given, holds the same first ``st.st_size`` bytes)."""
        size = st.st_size
        collected: list[Event] = []
        sink = self.sink or collected.extend
        if resume is not None:
            self._check_resume(fh, resume, size)
            header = resume.header
            if self.surface_base is None:
                raise ResumeMismatch("resuming needs the surface the earlier read left (surface_base)")
            fold = SurfaceFold.resumed(resume.next_seq, resume.fold_generation, self.surface_base, remember_digests=self.remember_digests)
            pipeline = Pipeline(header["id"], fold, resume.closer_state.copy(), sink, resume.next_seq)
            pipeline.last_seq, pipeline.last_time = resume.last_seq, resume.last_time
            scanner = LineScanner(
                pipeline.accept,
                next_seq=resume.next_seq,
                offset=resume.offset,
                line_no=resume.line_no,
                region_consumer=pipeline.consume_region,
                lazy_payloads=self.lazy_payloads,
            )
        else:
            header, start = self._read_header(fh, size, data)
            session_id = self.session_id if self.session_id is not None else header["id"]
            pipeline = Pipeline(session_id, SurfaceFold(track_history=False, remember_digests=self.remember_digests), CloserState(), sink, 0)
            self._identity(header, session_id, pipeline)
            if self.restore:
                self._header_restore(header, session_id, pipeline)
            else:
                pipeline.skip_restore()
            scanner = LineScanner(pipeline.accept, offset=start, line_no=1, region_consumer=pipeline.consume_region, lazy_payloads=self.lazy_payloads)
        pipeline.packed_rows = self.packed_rows
        pipeline.raw_lines = self.raw_lines
        if self.on_replacement is not None:
            pipeline.on_replacement = self.on_replacement
        if self.compression is Compression.ZSTD:
            torn, recovered, resume_point = self._zstd_region(fh, size, scanner, pipeline, header, data)
        else:
            torn, recovered, resume_point = self._raw_region(fh, size, scanner, pipeline, header)
        if pipeline.error is not None:
            raise pipeline.error
        if pipeline.needs_history:
            raise ResumeMismatch("a legacy tool-result replacement needs the whole log")
        stored_replacements = pipeline.replacements
        tail_replacements: list[tuple[int, tuple[int, ...]]] = []
        pipeline.on_replacement = lambda seq, shadowed: tail_replacements.append((seq, shadowed))
        for event in recovered:
            pipeline.restore_check(event, message_checked=True)
        closer_events = closers_for(pipeline.closers, self._last_event(pipeline)) if self.restore else []
        for closer in closer_events:
            pipeline.restore_check(closer)
        if pipeline.error is not None:
            raise pipeline.error
        return DecodedLog(
            path=self.path,
            compression=self.compression.value,
            header=header,
            revision=revision_token(st),
            size=size,
            events=collected,
            recovered=recovered,
            closers=closer_events,
            torn=torn,
            resume=resume_point,
            replacements=stored_replacements,
            tail_replacements=tail_replacements,
        )

    @staticmethod
    def _last_event(pipeline: Pipeline) -> Event | None:
        if pipeline.last_seq is None:
            return None
        return {"seq": pipeline.last_seq, "time": pipeline.last_time}

    def _resume_point(
        self, fh: BinaryIO, offset: int, scanner: LineScanner, pipeline: Pipeline, header: dict[str, Any], final: bool = False
    ) -> ResumePoint:
        """Capture the walk states at a clean boundary (no defect, no partial line).

        ``final``: no event is observed after this point, so the closer walk's
        state can be shared instead of copied.
        """
        return ResumePoint(
            compression=self.compression.value,
            offset=offset,
            fingerprint=_fingerprint_before(fh, offset),
            header=header,
            next_seq=scanner.next_seq,
            line_no=scanner.line_no,
            last_seq=pipeline.last_seq,
            last_time=pipeline.last_time,
            closer_state=pipeline.closers if final else pipeline.closers.copy(),
            fold_generation=pipeline.fold.generation,
        )

    def _check_resume(self, fh: BinaryIO, resume: ResumePoint, size: int) -> None:
        if resume.compression != self.compression.value or size < resume.offset:
            raise ResumeMismatch("the file shrank or changed encoding")
        if _fingerprint_before(fh, resume.offset) != resume.fingerprint:
            raise ResumeMismatch("the bytes before the resume offset changed")

    def _identity(self, header: dict[str, Any], session_id: str, pipeline: Pipeline) -> None:
        if header.get("id") != session_id:
            pipeline.fail("identity", f'header id {clip_repr(header.get("id"))} does not match requested session "{clip(session_id)}"')
            return
        if self.root is None:
            return
        try:
            expected = expected_transcript_path(self.root, header, self.compression)
        except LayoutError:
            pipeline.fail("identity", f'header id "{clip(session_id)}" cannot name a storage path')
            return
        if not same_file(self.path, expected):
            pipeline.fail("identity", f'header id "{clip(session_id)}" and cwd identify {clip_path(expected)}, not {self.path}')

    @staticmethod
    def _header_restore(header: dict[str, Any], session_id: str, pipeline: Pipeline) -> None:
        try:
            check_restored_header(header, session_id)
        except HeaderValidationError as exc:
            pipeline.fail("header", exc.message)

    def _read_header(self, fh: BinaryIO, size: int, data: bytes | None) -> tuple[dict[str, Any], int]:
        if self.compression is Compression.ZSTD:
            first = first_frame(fh, size, data)
            if not isinstance(first, FrameSpan):
                raise LogFormatError("empty or header-less Zstandard session log")
            plaintext = decode_whole_frame(fh, first, self.max_frame_plaintext, data)
            if not plaintext.endswith(b"\n") or plaintext.count(b"\n") != 1:
                raise LogFormatError("first frame is not exactly one header line")
            line, end = plaintext[:-1], first.end
        else:
            line, end = _read_first_line(fh, size)
            if line is None:
                raise LogFormatError("empty or header-less session log")
        try:
            return parse_header_line(line, path=self.path), end
        except NotAHeader as exc:
            raise LogFormatError(exc.message) from None

    def _zstd_region(
        self, fh: BinaryIO, size: int, scanner: LineScanner, pipeline: Pipeline, header: dict[str, Any], data: bytes | None
    ) -> tuple[TornTail | None, list[Event], ResumePoint | None]:
        # Plaintext offsets are irrelevant in zstd mode; the region restarts at 0.
        start = scanner.consumed
        scanner.committed = scanner.consumed = 0
        torn_frame: TornFrame | None = None
        last_end = start
        feed = scanner.feed
        # Closed before ``fh`` is read again: a long log's frames may be decoded on a thread (zstdframes.prefetched).
        with closing(iter_region(fh, start, size, self.max_frame_plaintext, data)) as region:
            for item in region:
                if isinstance(item, TornFrame):
                    torn_frame = item
                    break
                plaintext, last_end = item
                feed(plaintext)
        if scanner.issue is not None or scanner.committed != scanner.consumed:
            raise LogFormatError(f"complete frame contains a torn JSONL record ({scanner.issue or 'partial final line'})")
        final = torn_frame is None
        resume_point = self._resume_point(fh, last_end, scanner, pipeline, header, final) if pipeline.error is None else None
        if torn_frame is None:
            return None, [], resume_point
        recovered: list[Event] = []
        original_sink = pipeline.sink
        # Recovered events are returned, not streamed: the caller decides whether
        # to use them (a settled tail) or wait for the writer (a changing one).
        pipeline.sink = recovered.extend
        pipeline.defer_restore = True
        scanner.feed(decode_torn_frame(fh, torn_frame, size, self.max_frame_plaintext))
        pipeline.defer_restore = False
        pipeline.sink = original_sink
        return TornTail(torn_frame.start, len(recovered)), recovered, resume_point

    def _raw_region(
        self, fh: BinaryIO, size: int, scanner: LineScanner, pipeline: Pipeline, header: dict[str, Any]
    ) -> tuple[TornTail | None, list[Event], ResumePoint | None]:
        fh.seek(scanner.consumed)
        remaining = size - scanner.consumed
        while remaining > 0:
            piece = fh.read(min(_RAW_CHUNK, remaining))
            if not piece:
                break
            remaining -= len(piece)
            scanner.feed(piece)
        torn = TornTail(scanner.committed, 0) if scanner.committed < size else None
        if scanner.issue is not None or pipeline.error is not None:
            # After a tolerated defect nothing can be appended meaningfully: reload next time.
            return torn, [], None
        # Resume at the last committed LF; a held-back fragment is re-read next time.
        return torn, [], self._resume_point(fh, scanner.committed, scanner, pipeline, header, final=True)


def _snapshot(path: str) -> tuple[os.stat_result, bytes] | None:
    """The file's status and first ``st_size`` bytes, read in one go; ``None``
    when it is not a regular file or too large to hold in memory.

    Plain ``os`` calls: a Python file object costs more than the read itself
    for the typical small log.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _IN_MEMORY_MAX:
            return None
        parts: list[bytes] = []
        remaining = st.st_size
        while remaining > 0:
            piece = os.read(fd, remaining)
            if not piece:
                break  # truncated meanwhile: the frames see the end of what is there
            parts.append(piece)
            remaining -= len(piece)
    finally:
        os.close(fd)
    return st, parts[0] if len(parts) == 1 else b"".join(parts)


def _fingerprint_before(fh: BinaryIO, offset: int) -> str:
    tail = max(0, offset - 32)
    fh.seek(tail)
    return f"{offset}:{fh.read(offset - tail).hex()}"


def _read_first_line(fh: BinaryIO, size: int) -> tuple[bytes | None, int]:
    """The raw header line (without LF) and the offset after it; ``None`` without an LF."""
    fh.seek(0)
    parts: list[bytes] = []
    read = 0
    while read < size:
        piece = fh.read(8192)
        if not piece:
            break
        newline = piece.find(b"\n")
        if newline >= 0:
            parts.append(piece[:newline])
            return b"".join(parts), read + newline + 1
        parts.append(piece)
        read += len(piece)
    return None, 0


def read_log(path: str | os.PathLike[str], compression: Compression | None = None, **options: Any) -> DecodedLog:
    """Read a transcript file (the encoding follows the file name unless given)."""
    path = os.fspath(path)
    if compression is None:
        compression = Compression.ZSTD if path.endswith(".zstd") else Compression.NONE
    return LogReader(path, compression, **options).read()


def inspect_session(root: str | os.PathLike[str], session_id: str, compression: Compression, **options: Any) -> DecodedLog:
    """The harness's non-mutating ``inspect``: locate by id, read, verify identity."""
    path = locate(root, session_id, compression)
    return LogReader(path, compression, session_id=session_id, root=root, **options).read()


def read_from(path: str | os.PathLike[str], from_seq: int, compression: Compression | None = None, **options: Any) -> list[Event]:
    """The harness's ``readFrom``: upgraded, gated events from ``from_seq`` on.

    No closers, no envelope or surface validation, no identity check against a
    root; unknown required types anywhere in the log still refuse it.
    """
    if not (type(from_seq) is int and from_seq >= 0):
        raise ValueError("fromSeq must be a non-negative safe integer")
    log = read_log(path, compression, restore=False, **options)
    return [*log.events, *log.recovered][from_seq:]


def inspect_view(log: DecodedLog) -> dict[str, Any]:
    """``{session, events}`` as the harness's inspect returns it."""
    return {"session": log.header, "events": [*log.events, *log.recovered, *log.closers]}


def read_listing_header(path: str | os.PathLike[str], compression: Compression, max_frame_plaintext: int = DEFAULT_MAX_FRAME_PLAINTEXT) -> dict[str, Any] | None:
    """The header as the harness's listing reads it, touching no event bytes.

    ``None`` means "not listed" (no complete first line or frame, or the first
    line is not a session header).  No version check is applied.  Raises
    :class:`LogFormatError` for damage listing treats as fatal: bad frame magic
    or bits, a header frame that fails validation or holds more than one line,
    retired policy fields.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if compression is Compression.ZSTD:
            first = next(scan_frames(fh, 0, size), None)
            if not isinstance(first, FrameSpan):
                return None
            try:
                plaintext = decode_whole_frame(fh, first, max_frame_plaintext)
            except LogFormatError as exc:
                raise LogFormatError(f"header frame failed validation: {exc.message}") from None
            if not plaintext.endswith(b"\n") or plaintext.count(b"\n") != 1:
                raise LogFormatError("first frame is not exactly one header line")
            line: bytes | None = plaintext[:-1]
        else:
            line, _ = _read_first_line(fh, size)
            if line is None:
                return None
    try:
        return parse_header_line(line, path=os.fspath(path), check_version=False)
    except NotAHeader:
        return None
