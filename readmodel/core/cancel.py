"""Cancellation: the Python counterpart of the reference's ``AbortSignal``.

The reference's cancellable operations take an optional ``AbortSignal`` and,
at fixed points ("abort checks"), throw ``signal.reason`` — the very object the
caller aborted with, never a wrapper (query-spec conventions, §2.11).

sessionq's reads are synchronous, so the same contract is expressed with a
thread-safe token: :class:`AbortController` owns an :class:`AbortSignal`; any
thread may call :meth:`AbortController.abort`; the engine calls
:func:`throw_if_aborted` at exactly the reference's check points.  A database
call in progress is never interrupted: the check after it raises the reason
once the call has returned, which is the reference's "wait for the backend
call to settle, then reject with the reason" rule.
"""

from __future__ import annotations

import threading
from typing import Any


class AbortError(Exception):
    """The default abort reason (JS ``DOMException`` named ``AbortError``)."""

    def __init__(self, message: str = "This operation was aborted") -> None:
        super().__init__(message)
        self.name = "AbortError"


class AbortSignal:
    """Read side of a cancellation token.  ``aborted`` never goes back to ``False``."""

    __slots__ = ("_event", "_reason", "_lock")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> BaseException | None:
        """The caller's abort reason (``None`` until aborted)."""
        return self._reason

    def throw_if_aborted(self) -> None:
        """Raise the abort reason itself when aborted (identity is preserved)."""
        if self._event.is_set():
            assert self._reason is not None
            raise self._reason

    def wait(self, timeout: float | None = None) -> bool:
        """Block until aborted (or ``timeout``); returns ``aborted``."""
        return self._event.wait(timeout)

    def _abort(self, reason: BaseException) -> None:
        with self._lock:
            if self._event.is_set():
                return  # the first reason wins, as in JS
            self._reason = reason
            self._event.set()


class AbortController:
    """Owner of an :class:`AbortSignal`."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        """Abort with ``reason`` (default: a fresh :class:`AbortError`).

        Python can only raise exceptions, so a reason must be a
        ``BaseException`` instance; anything else is refused with ``TypeError``.
        """
        if reason is None:
            reason = AbortError()
        if not isinstance(reason, BaseException):
            raise TypeError("an abort reason must be an exception instance")
        self.signal._abort(reason)


def aborted_signal(reason: Any = None) -> AbortSignal:
    """A signal that is already aborted (JS ``AbortSignal.abort(reason)``)."""
    controller = AbortController()
    controller.abort(reason)
    return controller.signal


def throw_if_aborted(signal: AbortSignal | None) -> None:
    """The abort check: raise the reason if ``signal`` exists and is aborted."""
    if signal is not None and signal.aborted:
        signal.throw_if_aborted()


def is_aborted(signal: AbortSignal | None) -> bool:
    return signal is not None and signal.aborted
