"""What a pass sees of one transcript before indexing it: its stat, listing header or layout problem.

:func:`observe` is run by the writer, or by the preparation workers in chunks
(:func:`observe_chunk`) when a full pass lists many transcripts.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from readmodel.core.clipping import clip_path, clip_repr

from .layout import Compression, LayoutProblem, expected_transcript_path, same_file
from .reader import read_listing_header
from .records import LogFormatError
from .workergc import settle_collector

_encode_json = msgspec.json.Encoder().encode


class Observed(msgspec.Struct):
    path: str
    stat: os.stat_result | None
    header: dict[str, Any] | None
    problem: LayoutProblem | None = None


def observe(path: str, root: str, compression: Compression) -> Observed:
    """One transcript's stat and listing header, or the layout problem it is."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Observed(path, None, None)
    try:
        header = read_listing_header(path, compression)
    except LogFormatError as exc:
        return Observed(path, st, None, LayoutProblem("unreadable-header", path, exc.message))
    except OSError as exc:
        return Observed(path, st, None, LayoutProblem("unreadable", path, f"{path}: {exc}"))
    if header is None:
        return Observed(path, st, None)  # not materialised yet: not listed
    if not _storable(header):
        # SQLite text is UTF-8; an id or header with a lone surrogate cannot be a row key.
        return Observed(path, st, None, LayoutProblem("unindexable", path, f"{path}: the header holds text that cannot be stored as UTF-8"))
    try:
        expected = expected_transcript_path(root, header, compression)
    except ValueError:
        return Observed(path, st, None, LayoutProblem("identity", path, f"header id of {path} cannot name a storage path"))
    if not same_file(path, expected):
        return Observed(path, st, None, LayoutProblem("identity", path, f"{path} holds session {clip_repr(header['id'])}, whose transcript belongs at {clip_path(expected)}"))
    return Observed(path, st, header)


def observe_chunk(paths: list[str], root: str, compression: str) -> list[Observed]:
    """A worker task of a parallel listing (module-level so it pickles by name)."""
    settle_collector()
    mode = Compression(compression)
    return [observe(path, root, mode) for path in paths]


def _storable(header: dict[str, Any]) -> bool:
    try:
        _encode_json(header)
        return True
    except UnicodeEncodeError:
        return False


def beside_opposite(path: str, compression: Compression) -> bool:
    # discover() excludes a session dir that also holds the opposite-suffix
    # transcript (mixed-encoding, reported under the *other* file's path, so
    # has_problem misses it); only a full pass decides such a dir consistently.
    return os.path.lexists(os.path.join(os.path.dirname(path), compression.opposite.transcript_name))
