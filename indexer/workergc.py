"""The cyclic garbage collector around a worker's bulk work.

A worker prepares a chunk of sessions with the collector off
(:func:`~indexer.preparation.collector_paused`).  When the collector came back
on as the chunk ended, its first pass walked the chunk's whole answer — every
row and recording, still alive until the pool has pickled and sent it — to
find nothing (reading a log leaves no cycles), about 1.5% of a worker's CPU.
So a worker's chunk leaves the collector off (:func:`chunk_stretch`) and the
worker's next task turns it back on (:func:`settle_collector`), after one
pass over the young objects, which by then are only what the pool and the
new task allocated: the answer has been sent and freed.

Every task a pool runs must call :func:`settle_collector` first, or run with
the collector off as a chunk left it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_owed = False
"""Whether a chunk left the collector off in this process (it was on before)."""


def settle_collector() -> None:
    """Turn the collector back on if a chunk left it off (one young-generation pass first)."""
    global _owed
    if _owed:
        _owed = False
        gc.collect(0)
        gc.enable()


@contextmanager
def chunk_stretch() -> Iterator[None]:
    """The collector off for one worker task, and left off when it ends if it was on.

    Only for a worker process's task (the pool's next task calls :func:`settle_collector`).
    """
    global _owed
    settle_collector()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        _owed = enabled
