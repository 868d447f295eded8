"""Streaming raw-artifact reads for the session-log export (readRaw semantics).

format-spec §2.3 "Raw artifact export": a zstd transcript yields the
concatenated plaintext of all complete frames (a torn final frame is omitted,
checksum and decoder failures are fatal, zero frames is an error); a raw
transcript yields the whole file decoded as UTF-8 with replacement.  The first
line must be a well-shaped header carrying the requested id.

Everything here streams: text comes out in bounded pieces (never splitting a
character, since Python strings are code-point sequences), so a log of any
size is exported with memory bounded by the read chunk.

``readmodel`` may not import ``indexer``; the frame scan below is a small,
self-contained structural walk of frame and block headers (same format rules
as the indexer's scanner).
"""

from __future__ import annotations

import codecs
import json
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

from readmodel.core.jsvalues import js_string
from readmodel.store.readonly import reader_uri, sqlite_path
from readmodel.export.frames import FrameSpan, ZstdFrameError, iter_frames, scan_frames
from readmodel.export.pipeline import shared_pool

READ_CHUNK: Final = 1 << 16
TEXT_SLICE: Final = 65_536
ARTIFACT_NAME: Final = "session.jsonl"


class ArtifactError(Exception):
    """A stored artifact exists but cannot be exported (corrupt, wrong header, I/O)."""


# --------------------------------------------------------------------------- locating


def locate_artifact(db: str, session_id: str, root: str | os.PathLike[str] | None = None) -> Path | None:
    """The transcript path the index recorded for ``session_id`` (``None`` if unknown).

    On a PostgreSQL index (many hosts, docs/postgres.md) a log is exported only by a host
    that has it: a recorded path that does not exist here raises :class:`ArtifactError`
    naming the source that indexed it, never serving other bytes in its place.
    """
    from readmodel.store.urls import is_postgres

    if is_postgres(db):
        return _postgres_artifact(db, session_id, root)
    path = sqlite_path(db)
    if path is None:
        raise ArtifactError("raw artifacts need a SQLite index database")
    conn = sqlite3.connect(reader_uri(path), uri=True)
    try:
        row = conn.execute('SELECT "path" FROM "sessions" WHERE "id" = ?', (session_id,)).fetchone()
    finally:
        conn.close()
    return None if row is None else _resolved(row[0], root)


def _resolved(recorded: str, root: str | os.PathLike[str] | None) -> Path:
    found = Path(recorded)
    if not found.is_absolute() and root is not None:
        found = Path(root) / found
    return found


def _postgres_artifact(db: str, session_id: str, root: str | os.PathLike[str] | None) -> Path | None:
    """:func:`locate_artifact` on PostgreSQL: the recorded path, if the log is on this host."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from readmodel.store.postgres import create_postgres_engine
    from readmodel.store.urls import connect_message

    engine = create_postgres_engine(db)
    try:
        with engine.connect() as conn:
            row = conn.execute(text('SELECT "path", "source" FROM "sessions" WHERE "id" = :id'), {"id": session_id}).first()
    except OperationalError as exc:  # the server cannot be reached: the one line
        raise ArtifactError(connect_message(db, exc)) from None
    finally:
        engine.dispose()
    if row is None:
        return None
    found = _resolved(row[0], root)
    if not found.exists():
        raise ArtifactError(
            f"the log of session {session_id} is not on this host: source {row[1] or '(none)'} indexed it at {row[0]}; "
            "export it on that host"
        )
    return found


# --------------------------------------------------------------------------- zstd frames


def _zstd_bytes(fh: BinaryIO) -> Iterator[bytes]:
    """The plaintext of every complete frame, streamed; a torn final frame is left out.

    The whole frame structure is checked first, so structural damage anywhere
    fails before any text is produced; content damage (a checksum) fails
    where its frame is reached.
    """
    size = fh.seek(0, 2)
    try:
        spans = [item for item in scan_frames(fh, 0, size) if isinstance(item, FrameSpan)]
        if not spans:
            raise ArtifactError("zstd session log holds no complete frame")
        yield from iter_frames(fh, spans, executor=shared_pool())  # runs decoded ahead on the pool
    except ZstdFrameError as exc:
        raise ArtifactError(exc.message) from None


def _raw_bytes(fh: BinaryIO) -> Iterator[bytes]:
    while piece := fh.read(READ_CHUNK):
        yield piece


# --------------------------------------------------------------------------- text


def _check_header(first_line: str, session_id: str) -> None:
    try:
        header = json.loads(first_line)
    except ValueError:
        raise ArtifactError("session log does not start with a header") from None
    if type(header) is not dict or header.get("id") != session_id:
        raise ArtifactError("session log header does not name the requested session")


class RawArtifact:
    """An opened artifact: iterate :meth:`text_slices` exactly once."""

    name = ARTIFACT_NAME

    def __init__(self, path: Path, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self._fh: BinaryIO | None = open(path, "rb")  # noqa: SIM115 - closed by the iterator
        self.zstd = str(path).endswith(".zstd")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _bytes(self) -> Iterator[bytes]:
        assert self._fh is not None
        return _zstd_bytes(self._fh) if self.zstd else _raw_bytes(self._fh)

    def text_slices(self, slice_units: int = TEXT_SLICE) -> Iterator[str]:
        """The artifact text in slices of at most ``slice_units`` code points.

        The first line is validated as a header before any text is produced.
        """
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        pending = ""
        header_checked = False
        try:
            for chunk in self._bytes():
                text = decoder.decode(chunk)
                if not header_checked:
                    pending += text
                    newline = pending.find("\n")
                    if newline < 0:
                        if len(pending) > (64 << 20):
                            raise ArtifactError("session log header line is too long")
                        continue
                    _check_header(pending[:newline], self.session_id)
                    header_checked = True
                    text, pending = pending, ""
                yield from _slices(text, slice_units)
            text = pending + decoder.decode(b"", final=True)
            if not header_checked:
                _check_header(text.split("\n", 1)[0], self.session_id)
            yield from _slices(text, slice_units)
        finally:
            self.close()


    def utf8_pieces(self) -> Iterator[bytes]:
        """The artifact text's UTF-8 encoding, in pieces of the decoder's size.

        The same text as :meth:`text_slices` (header validated first, invalid
        UTF-8 replaced).  While the stored bytes are valid UTF-8 they are
        handed on as they are, without building text from them (ASCII needs
        no check at all); from the first invalid byte on, the rest is decoded
        with replacement and encoded again.
        """
        decoder: Any = None  # the replacing decoder, once the bytes stopped being valid UTF-8
        carry = b""  # an incomplete character at the end of the last piece
        header: bytearray | None = bytearray()  # the first line, until it is complete
        try:
            for chunk in self._bytes():
                if carry:
                    chunk, carry = carry + chunk, b""
                if decoder is None and not chunk.isascii():
                    used = _valid_utf8_prefix(chunk)
                    if used is None:
                        decoder = codecs.getincrementaldecoder("utf-8")("replace")
                    elif used < len(chunk):
                        chunk, carry = chunk[:used], chunk[used:]
                if decoder is not None:
                    chunk = decoder.decode(chunk).encode("utf-8")
                if header is not None:
                    header += chunk
                    newline = header.find(b"\n")
                    if newline < 0:
                        if len(header) > (64 << 20):
                            raise ArtifactError("session log header line is too long")
                        continue
                    _check_header(header[:newline].decode("utf-8"), self.session_id)
                    chunk, header = bytes(header), None
                if chunk:
                    yield chunk
            tail = carry.decode("utf-8", "replace") if decoder is None else decoder.decode(b"", final=True)
            data = tail.encode("utf-8")
            if header is not None:
                data = bytes(header) + data
                _check_header(data.split(b"\n", 1)[0].decode("utf-8"), self.session_id)
            if data:
                yield data
        finally:
            self.close()


_CHECK_WINDOW: Final = 1 << 16


def _valid_utf8_prefix(data: bytes) -> int | None:
    """How much of ``data`` is valid UTF-8 but for an incomplete last character; ``None`` if invalid.

    Checked window by window so that ASCII windows (most of a log, usually)
    need no decoding at all.
    """
    pos = 0
    size = len(data)
    while pos < size:
        window = data[pos : pos + _CHECK_WINDOW]
        if window.isascii():
            pos += len(window)
            continue
        try:
            _text, used = codecs.utf_8_decode(window, "strict", False)
        except UnicodeDecodeError:
            return None
        if used < len(window) and pos + len(window) < size:
            if used == 0:  # cannot happen: an incomplete character is at most 3 bytes of a window
                return None
            pos += used  # the cut character continues in the next window
            continue
        pos += used
        if used < len(window):
            break
    return pos


def _slices(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def open_raw(path: Path | None, session_id: str) -> RawArtifact | None:
    """``readRaw``: ``None`` when there is no stored transcript; else the opened artifact."""
    if path is None:
        return None
    try:
        return RawArtifact(path, session_id)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ArtifactError(f"cannot open session log: {exc}") from None


def read_raw_text(path: Path | None, session_id: str) -> str | None:
    """The whole artifact text (tests and small exports)."""
    artifact = open_raw(path, session_id)
    return None if artifact is None else "".join(artifact.text_slices())


# --------------------------------------------------------------------------- images


class _LinePass:
    """One pass over an artifact's UTF-8 bytes: scans every kept line into ``found``.

    A line is kept whole when it is at most ``cap`` bytes, when it mentions
    ``image`` within its first ``cap`` bytes, or when its start offset is in
    ``whole``.  Otherwise it is dropped as soon as it passes the cap (only a
    short tail is kept to spot ``image`` across pieces); dropped lines that do
    mention ``image`` later are recorded in :attr:`missed`.  Lines that never
    mention ``image`` cannot hold an image reference and are skipped unseen
    (lines are named by their start offset, so nothing needs counting them).
    """

    WORD: Final = b"image"

    def __init__(self, cap: int, found: dict[str, dict[str, Any]], whole: frozenset[int] = frozenset()) -> None:
        self.cap = cap
        self.found = found
        self.whole = whole
        self.missed: list[int] = []
        self.fed = 0  # bytes fed so far
        self.line_start = 0  # offset of the current line's first byte
        self._line: list[bytes] = []
        self._size = 0
        self._dropped = False
        self._tail = b""

    def feed(self, data: bytes) -> None:
        base = self.fed
        self.fed += len(data)
        first_end = data.find(b"\n")
        if first_end < 0:
            self._extend(data)
            return
        self._extend(data[:first_end])
        self._finish(base + first_end + 1)
        last_end = data.rfind(b"\n")
        pos = first_end + 1
        word = self.WORD
        # The whole lines between the first and the last line break: only those
        # mentioning the word are scanned.
        while pos <= last_end:
            hit = data.find(word, pos, last_end)
            if hit < 0:
                break
            start = data.rfind(b"\n", pos, hit) + 1 or pos
            end = data.find(b"\n", hit)
            self.line_start = base + start
            self._extend(data[start:end])
            self._finish(base + end + 1)
            pos = end + 1
        self.line_start = base + last_end + 1
        self._extend(data[last_end + 1 :])

    def _extend(self, piece: bytes) -> None:
        if not piece:
            return
        if self._dropped:
            if self.WORD in self._tail + piece and (not self.missed or self.missed[-1] != self.line_start):
                self.missed.append(self.line_start)
            self._tail = (self._tail + piece)[-(len(self.WORD) - 1) :]
            return
        self._line.append(piece)
        self._size += len(piece)
        if self._size > self.cap and self.line_start not in self.whole:
            joined = b"".join(self._line)
            if self.WORD in joined:
                self._line = [joined]
                self._size = len(joined)
                self.whole = self.whole | {self.line_start}
            else:
                self._dropped = True
                self._line = []
                self._tail = joined[-(len(self.WORD) - 1) :]

    def finish_line(self) -> None:
        """Ends the current line (at the end of the artifact)."""
        self._finish(self.fed)

    def _finish(self, next_start: int) -> None:
        if not self._dropped:
            _scan_line(b"".join(self._line), self.found)
        self.line_start = next_start
        self._line = []
        self._size = 0
        self._dropped = False
        self._tail = b""


class ImageScanner:
    """Collects image references of artifacts line by line (export-spec §9.3).

    Keys are ``str(attachmentId)`` in first-seen order; a later sighting
    overwrites the ref but keeps the position (a ``dict`` does exactly that),
    so merging per-artifact results in export order equals one sequential scan.

    It is fed the entries' UTF-8 bytes (text is encoded).  Memory stays
    bounded by ``line_cap`` bytes for lines that do not mention ``image``.
    When a long line mentions it only past the cap, the artifact
    :attr:`needs_rescan`: the caller streams it again through :meth:`rescan`,
    which keeps those lines whole (they must be parsed).
    """

    def __init__(self, line_cap: int = 8 << 20) -> None:
        self.refs: dict[str, dict[str, Any]] = {}
        self.line_cap = line_cap
        self.needs_rescan = False
        self._missed: frozenset[int] = frozenset()
        self._pass = _LinePass(line_cap, {})

    def feed(self, data: bytes | str) -> None:
        self._pass.feed(data.encode("utf-8") if type(data) is str else data)  # type: ignore[union-attr]

    def end_artifact(self) -> None:
        """Close the current artifact; its refs join :attr:`refs` unless a rescan is due."""
        current = self._pass
        current.finish_line()
        if current.missed:
            self.needs_rescan = True
            self._missed = frozenset(current.missed)
        else:
            self._merge(current.found)
        self._pass = _LinePass(self.line_cap, {})

    def rescan(self, pieces: Iterable[bytes | str]) -> None:
        """Scan the artifact flagged by :attr:`needs_rescan` again, in full: ``pieces``
        must be the content first fed (lines are known by their byte offsets)."""
        second = _LinePass(self.line_cap, {}, self._missed)
        for data in pieces:
            second.feed(data.encode("utf-8") if type(data) is str else data)  # type: ignore[union-attr]
        second.finish_line()
        self._merge(second.found)
        self.needs_rescan = False
        self._missed = frozenset()

    def _merge(self, found: dict[str, dict[str, Any]]) -> None:
        for key, ref in found.items():
            self.refs[key] = ref


def _scan_line(line: bytes, found: dict[str, dict[str, Any]]) -> None:
    if not line or b"image" not in line:
        return
    try:
        event = json.loads(line.decode("utf-8", "replace"))
    except ValueError:
        return
    if type(event) is not dict:
        return
    data = event.get("data")
    if type(data) is not dict:
        return
    _scan(data.get("content"), found)
    message = data.get("message")
    if type(message) is dict:
        _scan(message.get("content"), found)
    inserted = data.get("inserted")
    if type(inserted) is list:
        for item in inserted:
            if type(item) is dict:
                _scan(item.get("content"), found)
    chunk = data.get("chunk")
    if type(chunk) is dict and chunk.get("type") == "block-end":
        _scan([chunk.get("block")], found)


def _scan(items: Any, found: dict[str, dict[str, Any]]) -> None:
    if type(items) is not list:
        return
    stack = list(items)
    while stack:
        item = stack.pop()
        if type(item) is not dict:
            continue
        attachment = item.get("attachment")
        if item.get("type") == "image" and type(attachment) is dict:
            found[_js_string(attachment.get("attachmentId", _MISSING))] = attachment
        nested = item.get("content")
        if type(nested) is list:
            stack.extend(nested)


_MISSING: Final = object()


def _js_string(value: Any) -> str:
    """``String(value)`` of an attachment id, ``undefined`` when the key is absent."""
    return "undefined" if value is _MISSING else js_string(value)


# --------------------------------------------------------------------------- attachments

IMAGE_EXTENSIONS: Final = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}
_SHA256_REF: Final = re.compile(r"sha256:([0-9a-f]{64})")


class AttachmentError(Exception):
    """An image reference that cannot be read from the attachment store."""


class AttachmentStore:
    """Content-addressed image store: ``objects/<first 2 hex>/<sha256>``."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def extension(self, ref: dict[str, Any]) -> str:
        ext = IMAGE_EXTENSIONS.get(ref.get("mediaType"))  # type: ignore[arg-type]
        if ext is None:
            raise AttachmentError(f"unsupported image media type {ref.get('mediaType')!r}")
        return ext

    def read_image(self, ref: dict[str, Any], slice_bytes: int = READ_CHUNK) -> Iterator[bytes]:
        """The stored bytes in slices; raises :class:`AttachmentError` when absent or malformed."""
        ident = ref.get("attachmentId")
        match = _SHA256_REF.fullmatch(ident) if type(ident) is str else None
        if match is None:
            raise AttachmentError(f"attachment reference {ident!r} is not a sha256 reference")
        digest = match.group(1)
        path = self.directory / "objects" / digest[:2] / digest
        try:
            fh = open(path, "rb")  # noqa: SIM115
        except OSError:
            raise AttachmentError(f"attachment {ident} is not in the attachment store") from None
        with fh:
            while piece := fh.read(slice_bytes):
                yield piece
