"""Where transcripts live in a log root, and how the harness names them.

Layout (format-spec §1)::

    <root>/<project dir>/<session dir>/session.jsonl.zstd   (zstd mode)
    <root>/<project dir>/<session dir>/session.jsonl        (raw mode)

The project dir is ``projectKey(cwd)`` or ``_no-cwd``; the session dir is
``encodeSegment(id)``.  Discovery follows real directories only (symlinks are
never traversed).  Unlike the harness, a layout problem (a flat transcript file,
an opposite-suffix transcript, a duplicate id) excludes only the offending
artifact and is reported, so one stray file never hides the rest of a root.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from enum import Enum
from typing import Any, Final

import msgspec

from readmodel.core.clipping import clip
from readmodel.core.jsvalues import utf16_units

NO_CWD_DIR: Final = "_no-cwd"
_SAFE_UNITS: Final = frozenset(map(ord, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"))
_SEPARATOR_UNITS: Final = frozenset(map(ord, "/\\:"))
_SAFE_SEGMENT: Final = re.compile(r"[A-Za-z0-9._-]*").fullmatch
"""Whether every character of a text is one of :data:`_SAFE_UNITS` (one C-level pass)."""
_SLUG_MAX: Final = 251


class Compression(str, Enum):
    """The physical encoding of every transcript in one root."""

    ZSTD = "zstd"
    NONE = "none"

    @property
    def transcript_name(self) -> str:
        return "session.jsonl.zstd" if self is Compression.ZSTD else "session.jsonl"

    @property
    def opposite(self) -> "Compression":
        return Compression.NONE if self is Compression.ZSTD else Compression.ZSTD


class LayoutError(ValueError):
    """A storage-topology problem, naming the offending path."""

    def __init__(self, kind: str, path: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.path = path
        self.message = message


class LayoutProblem(msgspec.Struct, frozen=True):
    """A reported layout problem: ``kind`` is flat-file, mixed-encoding or duplicate-id."""

    kind: str
    path: str
    message: str


class TranscriptRef(msgspec.Struct, frozen=True):
    """One discovered transcript file."""

    path: str
    project_dir: str
    session_dir: str


def _escape_unit(unit: int) -> str:
    return f"~{unit:04X}"


def encode_segment(session_id: str) -> str:
    """Injectively escape a session id into one safe path segment (format-spec §1.4)."""
    if session_id == "":
        raise LayoutError("invalid-id", "", "an empty session id cannot name a storage path")
    if session_id == ".":
        return "~002E"
    if session_id == "..":
        return "~002E~002E"
    if _SAFE_SEGMENT(session_id) is not None:
        return session_id
    return "".join(chr(unit) if unit in _SAFE_UNITS else _escape_unit(unit) for unit in utf16_units(session_id))


def project_key(cwd: Any) -> str:
    """The project directory name for a header ``cwd`` (format-spec §1.3).

    Mirrors the reference's behaviour on wrongly typed values, which walks the
    value's UTF-16 units: ``null`` and arrays cannot name a path, while other
    non-strings (numbers, booleans, objects) have no units and map to ``--root--``.
    """
    if type(cwd) is not str:
        if cwd is None or type(cwd) is list:
            raise LayoutError("invalid-cwd", "", "header cwd cannot name a storage path")
        return "--root--"
    if cwd == "":
        raise LayoutError("invalid-cwd", "", "an empty cwd cannot name a storage path")
    return _project_key_of_text(cwd)


@functools.lru_cache(maxsize=4096)
def _project_key_of_text(cwd: str) -> str:
    # Every session of a project repeats its cwd: the unit walk is worth caching.
    out: list[str] = []
    in_separator = False
    for unit in utf16_units(cwd):
        if unit in _SEPARATOR_UNITS:
            if not in_separator:
                out.append("-")
            in_separator = True
            continue
        in_separator = False
        out.append(chr(unit) if unit in _SAFE_UNITS else _escape_unit(unit))
    slug = "".join(out).lstrip("-") or "root"
    return "--" + slug[:_SLUG_MAX] + "--"


def project_dir_for(header: dict[str, Any]) -> str:
    """``_no-cwd`` when the header has no ``cwd`` key, else ``projectKey(cwd)``."""
    return project_key(header["cwd"]) if "cwd" in header else NO_CWD_DIR


def expected_transcript_path(root: str | os.PathLike[str], header: dict[str, Any], compression: Compression) -> str:
    """The path the harness would store this header's transcript at."""
    return os.path.join(os.fspath(root), project_dir_for(header), encode_segment(header["id"]), compression.transcript_name)


def _real_dirs(path: str) -> Iterator[os.DirEntry[str]]:
    try:
        entries = sorted(os.scandir(path), key=lambda e: os.fsencode(e.name))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield entry


def _exists(path: str) -> bool:
    """"Exists" in the harness's sense: can be opened for reading (ENOENT = absent).

    A path ``stat`` finds absent is one ``open`` finds absent (the same lookup), and
    one call is cheaper than opening: a root of 10,000 sessions asks this 10,000 times
    for a file that is almost never there.  Anything else is left to ``open``.
    """
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except OSError:
        pass
    try:
        with open(path, "rb"):
            return True
    except FileNotFoundError:
        return False
    except (IsADirectoryError, NotADirectoryError):
        return True


def detect_compression(root: str | os.PathLike[str]) -> Compression:
    """Guess a root's encoding from the first transcript found (zstd when empty)."""
    for project in _real_dirs(os.fspath(root)):
        for session in _real_dirs(project.path):
            if os.path.exists(os.path.join(session.path, Compression.ZSTD.transcript_name)):
                return Compression.ZSTD
            if os.path.exists(os.path.join(session.path, Compression.NONE.transcript_name)):
                return Compression.NONE
    return Compression.ZSTD


def _is_flat_transcript(entry: os.DirEntry[str]) -> bool:
    return entry.is_file(follow_symlinks=False) and (entry.name.endswith(".jsonl") or entry.name.endswith(".jsonl.zstd"))


class Discovery(msgspec.Struct):
    """The transcripts of a root and the layout problems that excluded others."""

    transcripts: list[TranscriptRef]
    problems: list[LayoutProblem]


def discover(root: str | os.PathLike[str], compression: Compression) -> Discovery:
    """List every transcript in ``root`` (sorted by project dir, then session dir).

    Flat transcript files inside a project dir and session dirs that hold the
    opposite-suffix transcript are reported and excluded.  A missing root is
    an empty root.  Duplicate ids are detected later, from headers.
    """
    transcripts: list[TranscriptRef] = []
    problems: list[LayoutProblem] = []
    root_path = os.fspath(root)
    # A session dir's path never ends with a separator: "/" + name is os.path.join's answer.
    opposite_name, transcript_name = "/" + compression.opposite.transcript_name, "/" + compression.transcript_name
    for project in _real_dirs(root_path):
        try:
            entries = sorted(os.scandir(project.path), key=lambda e: os.fsencode(e.name))
        except FileNotFoundError:
            continue
        for entry in entries:
            if _is_flat_transcript(entry):
                problems.append(
                    LayoutProblem("flat-file", entry.path, f"unsupported flat-file transcript layout: {entry.path}")
                )
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            opposite = entry.path + opposite_name
            if _exists(opposite):
                problems.append(
                    LayoutProblem(
                        "mixed-encoding",
                        opposite,
                        f"transcript {opposite} does not match this root's {compression.value!r} encoding; "
                        "use the matching compression mode or a separate root",
                    )
                )
                continue
            candidate = entry.path + transcript_name
            if os.path.isfile(candidate):
                transcripts.append(TranscriptRef(candidate, project.name, entry.name))
    return Discovery(transcripts, problems)


def locate(root: str | os.PathLike[str], session_id: str, compression: Compression) -> str:
    """Find the unique transcript of ``session_id`` (format-spec §1.6 targeted lookup).

    Raises :class:`LayoutError` with kind ``not-found``, ``flat-file``,
    ``mixed-encoding`` or ``duplicate-id``.
    """
    segment = encode_segment(session_id)
    hits: list[str] = []
    for project in _real_dirs(os.fspath(root)):
        for suffix in (".jsonl", ".jsonl.zstd"):
            flat = os.path.join(project.path, segment + suffix)
            if _exists(flat):
                raise LayoutError("flat-file", flat, f"unsupported flat-file transcript layout: {flat}")
        session_dir = os.path.join(project.path, segment)
        opposite = os.path.join(session_dir, compression.opposite.transcript_name)
        if _exists(opposite):
            raise LayoutError(
                "mixed-encoding",
                opposite,
                f"transcript {opposite} does not match this root's {compression.value!r} encoding; "
                "use the matching compression mode or a separate root",
            )
        candidate = os.path.join(session_dir, compression.transcript_name)
        if _exists(candidate):
            hits.append(candidate)
    if not hits:
        raise LayoutError("not-found", "", f'session "{clip(session_id)}" not found')
    if len(hits) > 1:
        raise LayoutError(
            "duplicate-id", hits[1], f'session "{clip(session_id)}" appears in multiple project directories: {", ".join(hits)}'
        )
    return hits[0]


def transcripts_with_prefix(root: str | os.PathLike[str], prefix: str, compression: Compression) -> list[str]:
    """The transcripts whose session directory name starts with the encoded ``prefix`` (sorted):
    the logs whose id may start with ``prefix`` (an encoded id's prefix is the encoded prefix's
    extension, so none is missed; the caller checks each header's id)."""
    if not prefix or prefix in (".", ".."):
        return []
    start = encode_segment(prefix)
    found = []
    for project in _real_dirs(os.fspath(root)):
        try:
            entries = sorted(os.scandir(project.path), key=lambda e: os.fsencode(e.name))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            if entry.name.startswith(start) and entry.is_dir(follow_symlinks=False):
                candidate = os.path.join(entry.path, compression.transcript_name)
                if os.path.isfile(candidate):
                    found.append(candidate)
    return found


def same_file(found: str, expected: str) -> bool:
    """Path identity (format-spec §1.8 step 4): equal strings, or equal real paths."""
    if found == expected:
        return True
    try:
        return os.path.realpath(found, strict=True) == os.path.realpath(expected, strict=True)
    except OSError:
        return False


def revision_token(st: os.stat_result) -> str:
    """The opaque revision ``dev:ino:size:mtime_ns:ctime_ns`` of a transcript."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
