"""The session-log export: a streaming ZIP of a session's logs and media (export-spec §9).

``session.jsonl`` (the raw artifact's plaintext), ``subagents/<safeId>/session.jsonl``
for each descendant with ``includeDescendants``, and ``media/<attachmentId>.<ext>``
for the images the logs reference.  The archive is written forward only, in
data-descriptor mode (:mod:`readmodel.export.zipstream`), and handed out chunk by
chunk while the logs are decoded ahead and deflated in segments on threads
(:mod:`readmodel.export.pipeline`), so memory stays bounded whatever the size of
the logs; ``sessionq export`` and ``GET /api/session.export`` stream the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final


from readmodel.export.artifacts import (
    ARTIFACT_NAME,
    TEXT_SLICE,
    AttachmentStore,
    ImageScanner,
    RawArtifact,
    locate_artifact,
    open_raw,
)
from readmodel.export.pipeline import Readahead, SegmentDeflater
from readmodel.export.zipstream import ZipLimitError, ZipStream
from readmodel.projection.redaction import redacted_log_lines

DEFAULT_LEVEL: Final = 1
"""Deflate level of the archive's entries (0–9).  The reference's default is 6;
sessionq's is 1, deflated by ISA-L: ≈ 13× faster than zlib at 6, for an archive
about a quarter larger (see the README's export figures)."""


Piece = bytes
"""A piece of an entry's content: UTF-8 of the entry's text."""


class ExportStreamError(Exception):
    """A failure after the 200 status: the body is broken, never truncated-but-valid."""


def safe_id(session_id: str) -> str:
    """Each UTF-16 code unit outside ``[A-Za-z0-9_-]`` becomes ``_`` (astral → ``__``)."""
    out: list[str] = []
    for ch in session_id:
        if ch.isascii() and (ch.isalnum() or ch in "_-"):
            out.append(ch)
        else:
            out.append("__" if ord(ch) > 0xFFFF else "_")
    return "".join(out)


def _lines(slices: Iterator[str]) -> Iterator[str]:
    """``slices`` of a log's text (cut anywhere) as its lines, each with its LF (the last maybe without)."""
    pending: list[str] = []  # the current line's pieces (a long line costs no quadratic concatenation)
    for text in slices:
        start = 0
        while (cut := text.find("\n", start)) >= 0:
            pending.append(text[start : cut + 1])
            yield "".join(pending)
            pending = []
            start = cut + 1
        if start < len(text):
            pending.append(text[start:])
    if pending:
        yield "".join(pending)


def redacted_lines(slices: Iterator[str]) -> Iterator[str]:
    """``slices`` of a log's text with detected secrets replaced by markers.

    Redaction covers whole lines (a secret never spans a line: inside a JSON
    line, line breaks are ``\\n`` escapes) and, for streamed pieces, whole
    chunk runs (:func:`readmodel.projection.redaction.redacted_log_lines`), so
    a secret cut into ``assistant/chunk`` events or packed chunk rows is gone
    from every piece.  The marker needs no JSON escaping, so every line stays
    valid JSON.  Closing the result closes ``slices``.
    """
    try:
        yield from redacted_log_lines(_lines(slices))
    finally:
        close = getattr(slices, "close", None)
        if close is not None:
            close()


def _encoded(slices: Iterator[str]) -> Iterator[Piece]:
    try:
        for text in slices:
            yield text.encode("utf-8")
    finally:
        slices.close()  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- export


class HandOvers:
    """What one export handed out: the chunk count and the largest chunk (memory bound checks)."""

    def __init__(self) -> None:
        self.count = 0
        self.peak = 0

    def note(self, data: bytes) -> bytes:
        self.count += 1
        self.peak = max(self.peak, len(data))
        return data


class Exporter:
    """Prepares and streams one session's export archive."""

    def __init__(
        self,
        db: str,
        engine_factory: Callable[[], Any],
        root: str | None,
        attachments: AttachmentStore | None,
        level: int = DEFAULT_LEVEL,
        slice_units: int = TEXT_SLICE,
        *,
        redact: bool = False,
    ) -> None:
        if type(level) is not int or not 0 <= level <= 9:
            raise ValueError("sessionExportCompressionLevel must be an integer between 0 and 9")
        self.db = db
        self.engine_factory = engine_factory
        self.root = root
        self.attachments = attachments
        self.level = level
        self.slice_units = slice_units
        # Entries of unknown size must declare ZIP64 up front to exceed 2 GiB;
        # artifacts whose stored file is this large get it (plaintext may be
        # several times the zstd file size).
        self.zip64_threshold = 64 << 20
        self.line_cap = 8 << 20  # image-scan buffering bound for lines without images
        self.last_sink: HandOvers | None = None  # the latest stream's hand-overs (tests check the bound)
        # Every log entry is written with detected secrets replaced by markers (``--redact all``).
        self.redact = redact

    def read_raw(self, session_id: str) -> RawArtifact | None:
        return open_raw(locate_artifact(self.db, session_id, self.root), session_id)

    def prepare(self, session_id: str, *, redact: bool | None = None) -> tuple[RawArtifact, Iterator[Piece]] | None:
        """Open the root artifact and validate its header (raises on failure).

        The iterator gives the root entry's content as :data:`Piece` values,
        for :meth:`stream` (``redact``: as there).
        """
        artifact = self.read_raw(session_id)
        if artifact is None:
            return None
        slices = self._pieces(artifact, self.redact if redact is None else redact)
        try:
            first = next(slices, None)
        except BaseException:
            artifact.close()
            raise

        def primed() -> Iterator[Piece]:
            try:
                if first is not None:
                    yield first
                    yield from slices
            finally:
                slices.close()  # type: ignore[attr-defined]
                artifact.close()

        return artifact, primed()

    def _descendants(self, root_id: str) -> list[str]:
        trace = self.engine_factory().trace_session(root_id)
        seen = {root_id}
        order: list[str] = []
        stack = list(reversed(trace.descendants))
        while stack:
            node = stack.pop()
            node_id = node.session.header["id"]
            if node_id in seen:
                continue
            seen.add(node_id)
            order.append(node_id)
            stack.extend(reversed(node.descendants))
        return order

    def _zip64(self, path: Path) -> bool:
        try:
            return path.stat().st_size >= self.zip64_threshold
        except OSError:
            return True

    def stream(
        self, root_id: str, root_pieces: Iterator[Piece], include_descendants: bool, root_path: Path | None = None,
        *, redact: bool | None = None,
    ) -> Iterator[bytes]:
        """The archive's bytes.  ``root_pieces`` come from :meth:`prepare` (called with the same
        ``redact``); ``redact`` (``None``: the exporter's setting) scrubs every subagent log too.

        Each log entry is read ahead on a thread of its own and deflated in
        segments on the shared pool (:mod:`readmodel.export.pipeline`); the next
        entry's read starts only once the consumer has taken this one's last
        bytes, and closing the iterator stops both and closes the log."""
        redact = self.redact if redact is None else redact
        archive = ZipStream()
        handed = HandOvers()
        self.last_sink = handed
        scanner = ImageScanner(self.line_cap)
        try:
            root_zip64 = True if root_path is None else self._zip64(root_path)
            yield from self._entry(archive, handed, ARTIFACT_NAME, Readahead(root_pieces), scanner, root_zip64)
            self._rescan_if_needed(scanner, root_id, redact)
            if include_descendants:
                for child_id in self._descendants(root_id):
                    artifact = self.read_raw(child_id)
                    if artifact is None:
                        raise ExportStreamError(f'subagent "{child_id}" has no stored log artifact')
                    name = f"subagents/{safe_id(child_id)}/{artifact.name}"
                    pieces = Readahead(self._pieces(artifact, redact))
                    yield from self._entry(archive, handed, name, pieces, scanner, self._zip64(artifact.path))
                    self._rescan_if_needed(scanner, child_id, redact)
            for attachment_id, ref in scanner.refs.items():
                if self.attachments is None:
                    raise ExportStreamError("no attachment store is configured")
                ext = self.attachments.extension(ref)
                image = self.attachments.read_image(ref)
                yield from self._entry(archive, handed, f"media/{attachment_id}.{ext}", image, None, False)
            yield handed.note(archive.close())
        except ZipLimitError as exc:
            raise ExportStreamError(str(exc)) from None

    def _pieces(self, artifact: RawArtifact, redact: bool) -> Iterator[Piece]:
        """The artifact's entry content: its bytes as stored, or its redacted lines."""
        if not redact:
            return artifact.utf8_pieces()
        return _encoded(redacted_lines(artifact.text_slices(self.slice_units)))

    def _rescan_if_needed(self, scanner: ImageScanner, session_id: str, redact: bool) -> None:
        """A long line mentioned an image past the scanner's cap: read the entry's content again."""
        if not scanner.needs_rescan:
            return
        artifact = self.read_raw(session_id)
        if artifact is None:
            raise ExportStreamError(f'session "{session_id}" lost its stored log artifact during export')
        scanner.rescan(self._pieces(artifact, redact))

    def _entry(
        self, archive: ZipStream, handed: HandOvers, name: str, pieces: Iterable[Piece], scanner: ImageScanner | None,
        zip64: bool,
    ) -> Iterator[bytes]:
        """One entry's records and deflate bytes; ``scanner`` (log entries) sees its content.
        ``pieces`` is closed however the entry ends."""
        deflater = SegmentDeflater(self.level)
        try:
            yield handed.note(archive.begin(name, zip64))
            for data in pieces:
                if scanner is not None:
                    scanner.feed(data)
                for out in deflater.write(data):
                    yield handed.note(archive.body(out))
            for out in deflater.finish():
                yield handed.note(archive.body(out))
        finally:
            deflater.cancel()
            close = getattr(pieces, "close", None)
            if close is not None:
                close()
        if scanner is not None:
            scanner.end_artifact()
        yield handed.note(archive.end(deflater.crc, deflater.compressed, deflater.size))


# --------------------------------------------------------------------------- JSON API
