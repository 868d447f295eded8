"""Turning file-system notifications into indexer work.

The watcher threads (watchdog observers) never touch the index: they classify
each notification against the root layout and hand the result to a
:class:`WorkSink` — usually the daemon's :class:`~indexer.daemon.WorkQueue` —
which debounces and feeds the single writer thread.

Classification (relative to the root, ``<project>/<session>/<transcript>``):

* a file named like this root's transcript at depth 3 → that transcript path
  (created, modified, deleted, renamed onto or away);
* a session directory created or renamed in at depth 2 → the transcript path
  inside it (the file may already be there when the watch is added);
* anything that can change which artifacts the layout rules accept — a flat
  ``*.jsonl[.zstd]`` file in a project dir, an opposite-suffix transcript, a
  directory deleted or renamed away, a project dir created — → a full pass;
* everything else (files directly in the root, deeper files, other names) is
  ignored, exactly as :func:`indexer.layout.discover` ignores it.
"""

from __future__ import annotations

import logging
import os
from typing import Final, Protocol

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from .layout import Compression

log = logging.getLogger("sessionq.watch")

# Only the notifications that can change what the index holds; opened/closed
# without writing and attribute changes are dropped in the emitter already.
# "Closed after writing" is dropped too: every write already raised a
# modification, and a close right after an append (the harness opens, writes,
# closes) would only extend that append's burst and delay the next append.
WATCHED_EVENTS: Final = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]

_FLAT_SUFFIXES: Final = (".jsonl", ".jsonl.zstd")
_STOP_LATENCY: Final = 0.2


class WorkSink(Protocol):
    """Where classified notifications go (called from watcher threads)."""

    def touch(self, path: str) -> None:
        """A transcript at ``path`` may have changed."""

    def request_full(self) -> None:
        """The set of accepted artifacts may have changed: run a full pass."""


class TranscriptEventHandler(FileSystemEventHandler):
    """Classifies watchdog events for one root and forwards them to a sink.

    ``root`` must be the absolute path the observer watches, so that event
    paths and the paths :func:`~indexer.layout.discover` produces are the same
    strings (the reconciler keys sessions by path).
    """

    def __init__(self, root: str, compression: Compression, sink: WorkSink) -> None:
        super().__init__()
        self.root = root
        self.compression = compression
        self.sink = sink

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            self._classify(event)
        except Exception:  # noqa: BLE001 - a watcher thread must never die; the rescan is the safety net
            log.exception("cannot classify %r; scheduling a full pass", event)
            self.sink.request_full()

    def _classify(self, event: FileSystemEvent) -> None:
        paths = [_text(event.src_path)]
        if event.event_type == "moved":
            paths.append(_text(event.dest_path))
        if event.is_directory:
            self._directory(event.event_type, paths)
            return
        for path in paths:
            self._file(path)

    def _parts(self, path: str) -> list[str] | None:
        rel = os.path.relpath(path, self.root)
        if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
            return None
        return rel.split(os.sep)

    def _file(self, path: str) -> None:
        parts = self._parts(path)
        if parts is None:
            return
        if len(parts) == 3:
            if parts[2] == self.compression.transcript_name:
                self.sink.touch(path)
            elif parts[2] == self.compression.opposite.transcript_name:
                self.sink.request_full()  # a mixed-encoding problem appears or disappears
        elif len(parts) == 2 and parts[1].endswith(_FLAT_SUFFIXES):
            self.sink.request_full()  # a flat-file problem appears or disappears

    def _directory(self, event_type: str, paths: list[str]) -> None:
        depths = [len(parts) if (parts := self._parts(path)) is not None else 0 for path in paths]
        if all(depth == 0 or depth > 2 for depth in depths):
            return  # the root itself, outside it, or below session dirs: never a transcript
        if event_type in ("created", "deleted") and depths[0] == 2:
            # A session dir appeared: its transcript may have been written before
            # the watch on the dir was in place, so look at it directly.  One
            # vanished: its transcript is gone (file events cover the rest).
            self.sink.touch(os.path.join(paths[0], self.compression.transcript_name))
            return
        # A project dir appeared or vanished, or directories were renamed: the
        # paths of many sessions may have changed at once.
        self.sink.request_full()


def _text(path: str | bytes) -> str:
    return os.fsdecode(path)


def make_observer(root: str, handler: TranscriptEventHandler, poll: float | None) -> BaseObserver:
    """A started observer watching ``root`` recursively.

    ``poll`` selects watchdog's stat-polling observer with that interval (for
    network or FUSE file systems without inotify).  When inotify cannot be
    set up (e.g. the per-user watch limit is exhausted) this falls back to
    polling every two seconds, with a warning.
    """
    if poll is not None:
        observer: BaseObserver = PollingObserver(timeout=poll)
        observer.schedule(handler, root, recursive=True, event_filter=WATCHED_EVENTS)
        observer.start()
        return observer
    # A short dispatch timeout bounds how long stop() + join() take at shutdown
    # (watchdog's threads poll their stop flag at this interval; default 1 s).
    observer = Observer(timeout=_STOP_LATENCY)
    try:
        observer.schedule(handler, root, recursive=True, event_filter=WATCHED_EVENTS)
        observer.start()
    except OSError as exc:
        log.warning("cannot watch %s with inotify (%s); polling every 2 s instead", root, exc)
        try:
            observer.stop()
        except Exception:  # noqa: BLE001 - best effort on a half-started observer
            pass
        return make_observer(root, handler, 2.0)
    return observer
