"""Mapping log-store failures to the query side's closed error codes.

The harness reports an inspection failure through the query service as
``SESSION_QUERY_CORRUPT_SESSION`` when the log is damaged, and as
``SESSION_QUERY_PERSISTENCE_FAILED`` otherwise (an intact log of a newer format,
a layout problem, an I/O error).  A missing transcript is
``SESSION_QUERY_SESSION_NOT_FOUND``.
"""

from __future__ import annotations

from readmodel.core.errors import SessionQueryError

from .layout import LayoutError
from .reader import ResumeMismatch
from .records import LogFormatError


def as_query_error(exc: BaseException, session_id: str) -> SessionQueryError:
    """The coded error a reader of ``session_id`` sees for ``exc``."""
    if isinstance(exc, SessionQueryError):
        return exc
    if isinstance(exc, LayoutError) and exc.kind == "not-found":
        return SessionQueryError("SESSION_QUERY_SESSION_NOT_FOUND", f'session "{session_id}" not found', exc)
    if isinstance(exc, LogFormatError) and exc.kind == "corrupt":
        return SessionQueryError(
            "SESSION_QUERY_CORRUPT_SESSION", f'stored session "{session_id}" is corrupt: {exc.message}', exc
        )
    if isinstance(exc, FileNotFoundError):
        return SessionQueryError("SESSION_QUERY_SESSION_NOT_FOUND", f'session "{session_id}" not found', exc)
    detail = exc.message if isinstance(exc, (LogFormatError, LayoutError)) else (str(exc) or type(exc).__name__)
    if isinstance(exc, ResumeMismatch):
        detail = f"the log changed while it was read: {detail}"
    return SessionQueryError("SESSION_QUERY_PERSISTENCE_FAILED", f'failed to inspect session "{session_id}": {detail}', exc)
