"""Execution plumbing for the tools: deadlines and the exclusive/parallel gate.

:class:`DeadlineSignal` is an abort signal derived from the caller's signal
(if any) that also aborts itself when a deadline passes, with a
:class:`ToolTimeout` as its reason.  It is checked lazily *and* by a timer,
so both a SQLite progress handler polling ``signal.aborted`` and a thread
blocked in ``signal.wait()`` see the deadline.  Whatever the parent was
aborted with is adopted as the reason, unchanged.

:class:`ExecutionGate` schedules tool executions the way the reference host
does: search tools are *exclusive* (they run alone), exact tools are
*parallel* (any number at once, never beside an exclusive one).  Waiting
exclusive calls go first, so a stream of parallel calls cannot starve them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from readmodel.core.cancel import AbortSignal, throw_if_aborted

_POLL_SECONDS = 0.02


class DeadlineSignal(AbortSignal):
    """Aborted when ``parent`` is aborted (same reason) or when ``timeout_ms`` has passed."""

    __slots__ = ("_parent", "_deadline", "_timeout_reason", "_timer")

    def __init__(self, parent: AbortSignal | None, timeout_ms: int | None, timeout_reason: BaseException) -> None:
        super().__init__()
        self._parent = parent
        self._timeout_reason = timeout_reason
        self._deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        self._timer: threading.Timer | None = None
        if timeout_ms is not None:
            self._timer = threading.Timer(timeout_ms / 1000, self._abort, (timeout_reason,))
            self._timer.daemon = True
            self._timer.start()

    @property
    def aborted(self) -> bool:
        if self._event.is_set():
            return True
        if self._parent is not None and self._parent.aborted:
            reason = self._parent.reason
            assert reason is not None
            self._abort(reason)
            return True
        if self._deadline is not None and time.monotonic() >= self._deadline:
            self._abort(self._timeout_reason)
            return True
        return False

    @property
    def reason(self) -> BaseException | None:
        return self._reason if self.aborted else None

    def throw_if_aborted(self) -> None:
        if self.aborted:
            assert self._reason is not None
            raise self._reason

    def wait(self, timeout: float | None = None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        while not self.aborted:
            remaining = None if end is None else end - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            self._event.wait(_POLL_SECONDS if remaining is None else min(_POLL_SECONDS, remaining))
        return True

    def close(self) -> None:
        """Stop the deadline timer (the signal keeps its state)."""
        if self._timer is not None:
            self._timer.cancel()


class ExecutionGate:
    """A readers–writer gate: exclusive executions alone, parallel ones together."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._parallel = 0
        self._exclusive = False
        self._exclusive_waiting = 0

    def _wait(self, signal: AbortSignal | None) -> None:
        self._cond.wait(_POLL_SECONDS if signal is not None else None)
        throw_if_aborted(signal)

    @contextmanager
    def enter(self, exclusive: bool, signal: AbortSignal | None = None) -> Iterator[None]:
        """Hold the gate for one execution; gives up with the abort reason if
        ``signal`` is aborted while waiting."""
        with self._cond:
            throw_if_aborted(signal)
            if exclusive:
                self._exclusive_waiting += 1
                try:
                    while self._exclusive or self._parallel:
                        self._wait(signal)
                finally:
                    self._exclusive_waiting -= 1
                    self._cond.notify_all()
                self._exclusive = True
            else:
                while self._exclusive or self._exclusive_waiting:
                    self._wait(signal)
                self._parallel += 1
        try:
            yield
        finally:
            with self._cond:
                if exclusive:
                    self._exclusive = False
                else:
                    self._parallel -= 1
                self._cond.notify_all()
