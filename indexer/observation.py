"""What a pass sees of one transcript before indexing it: its stat, listing header or layout problem.

:func:`observe` is run by the writer, or by the preparation workers in chunks
(:func:`observe_chunk`, in a :class:`Listing`) when a full pass
lists many transcripts or a cold build lists its root while its index is
being created (:mod:`indexer.coldstart`).
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Final

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


LISTING_CHUNK: Final = 512
"""Transcripts per listing task at most (a task's answer is pickled whole)."""


class Listing:
    """The listing of ``paths`` handed to ``pool`` in tasks of ``chunk`` transcripts, which the caller helps with.

    :meth:`result` lists itself, from the last task back, the tasks no worker
    has started yet (a task is cancelled before the caller takes it over):
    a writer that would only wait for the workers reads headers too, and
    when other processes keep the cores busy (the workers run nicer than the
    writer) it takes over most of the listing.  Every path is observed once,
    by :func:`observe`, wherever it is.
    """

    def __init__(self, pool: ProcessPoolExecutor, paths: list[str], root: str, compression: Compression, chunk: int) -> None:
        self.root = root
        self.compression = compression
        self.chunks = [paths[start : start + chunk] for start in range(0, len(paths), chunk)]
        self.futures: list[Future[list[Observed]]] = [pool.submit(observe_chunk, part, root, compression.value) for part in self.chunks]
        self.listed_here = 0  # transcripts the caller observed itself

    def result(self) -> list[Observed]:
        """Every path's observation, in the order of ``paths`` (a worker task's exception is raised)."""
        here: dict[int, list[Observed]] = {}
        # Tasks start in order: once one cannot be cancelled, no earlier one can.
        for index in reversed(range(len(self.futures))):
            if not self.futures[index].cancel():
                break
            here[index] = [observe(path, self.root, self.compression) for path in self.chunks[index]]
            self.listed_here += len(self.chunks[index])
        return [item for index, future in enumerate(self.futures) for item in (here[index] if index in here else future.result())]


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
