"""The service boundary: every call into the query service goes through here.

Rules (search-tools spec §8.5), for one call under the execution signal:

1. already aborted → raise the signal's reason (the very object);
2. the call succeeds → check the signal again, return the result;
3. the call fails while the signal is aborted → raise the reason
   (cancellation wins over any service error; nothing is logged);
4. otherwise the failure is *sanitized*: its full diagnostic (traceback and
   cause chain) goes to the log as a warning, and the model gets a fixed,
   safe :class:`ToolError` chosen by the failure's code alone.  The original
   message and cause never reach the model.

Classification: a :class:`readmodel.core.errors.SessionQueryError` with a known code
maps through :data:`SAFE_ERRORS`; a tool error already carrying the
unauthorized code stays the standard unauthorized error; everything else
(plain exceptions, odd or unknown codes, ``INVALID_CONFIG``,
``SOURCE_CONFLICT``) is the generic ``SESSION_QUERY_TOOL_FAILED``.  If
logging or classifying itself fails, the result is the generic error too.

A failure object may be hostile (properties that raise, a ``__str__`` that
raises, a cause chain with a cycle): rendering it must never raise, so such a
diagnostic degrades to :data:`UNPRINTABLE`.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar

from readmodel.core.cancel import AbortSignal, is_aborted
from readmodel.core.errors import SessionQueryError
from readmodel.tools.errors import TOOL_FAILED, UNAUTHORIZED, ToolError, tool_failed, unauthorized

T = TypeVar("T")

LOG_PREFIX: Final = "sessionq tools"
UNPRINTABLE: Final = "[the failure could not be rendered]"
CAUSE_CYCLE: Final = "[the cause chain loops back here]"
CAUSE_SEPARATOR: Final = "\ncaused by: "

# Operation labels (the log's vocabulary, one per kind of service call).
OP_SESSION_SEARCH: Final = "search across sessions"
OP_EVENT_SEARCH: Final = "search within one session"
OP_LINEAGE: Final = "family lookup"
OP_EVENT_TRACE: Final = "event relations lookup"
OP_EVENT_READ: Final = "event window lookup"
OP_TARGET_AUTH: Final = "target workspace check"
OP_IDS_AUTH: Final = "id set workspace check"
OP_TITLES: Final = "title lookup"
OP_TITLE_ITEM: Final = "title lookup (one session)"

#: Service code → (model-visible code, model-visible message).
SAFE_ERRORS: Final[dict[str, tuple[str, str]]] = {
    "SESSION_QUERY_ABORTED": ("SESSION_QUERY_ABORTED", "the session lookup was stopped before it finished"),
    "SESSION_QUERY_CORRUPT_SESSION": ("SESSION_QUERY_CORRUPT_SESSION", "the session's event log is damaged"),
    "SESSION_QUERY_EVENT_NOT_FOUND": ("SESSION_QUERY_EVENT_NOT_FOUND", "that session has no event with this sequence number"),
    "SESSION_QUERY_INDEX_FAILED": ("SESSION_QUERY_INDEX_FAILED", "the search index is not usable at the moment"),
    "SESSION_QUERY_INVALID_CONFIG": (TOOL_FAILED, "the session query could not be completed"),
    "SESSION_QUERY_INVALID_CURSOR": ("SESSION_QUERY_INVALID_CURSOR", "a search continuation was not accepted"),
    "SESSION_QUERY_INVALID_FILTER": ("SESSION_QUERY_INVALID_FILTER", "the search filters were not accepted"),
    "SESSION_QUERY_INVALID_LIMIT": ("SESSION_QUERY_INVALID_LIMIT", "the result limit was not accepted"),
    "SESSION_QUERY_INVALID_QUERY": ("SESSION_QUERY_INVALID_QUERY", "the search text was not accepted"),
    "SESSION_QUERY_INVALID_LINEAGE": ("SESSION_QUERY_INVALID_LINEAGE", "the session ancestry is inconsistent"),
    "SESSION_QUERY_INVALID_SURFACE": ("SESSION_QUERY_INVALID_SURFACE", "the session's recorded events do not fit together"),
    "SESSION_QUERY_INVALID_WINDOW": ("SESSION_QUERY_INVALID_WINDOW", "that many neighbouring events cannot be read at once"),
    "SESSION_QUERY_PERSISTENCE_FAILED": ("SESSION_QUERY_PERSISTENCE_FAILED", "stored session history cannot be read right now"),
    "SESSION_QUERY_SEARCH_DISABLED": ("SESSION_QUERY_SEARCH_DISABLED", "session search is switched off here"),
    "SESSION_QUERY_SESSION_NOT_FOUND": ("SESSION_QUERY_SESSION_NOT_FOUND", "no session with that id could be read"),
    "SESSION_QUERY_STALE_CURSOR": (
        "SESSION_QUERY_STALE_CURSOR",
        "session history changed while the results were being collected; run the same search again",
    ),
    "SESSION_QUERY_SOURCE_CONFLICT": (TOOL_FAILED, "the session query could not be completed"),
}


class WarningLogger(Protocol):
    """What the boundary needs of a logger (``logging.Logger`` fits)."""

    def warning(self, msg: str, /, *args: Any) -> Any: ...


# --------------------------------------------------------------------------- diagnostics


def _render_exception(error: BaseException) -> str:
    """Traceback frames (when there are any) plus ``Type: message``; may raise."""
    frames = traceback.format_tb(error.__traceback__) if error.__traceback__ is not None else []
    head = "Traceback (most recent call last):\n" + "".join(frames) if frames else ""
    return head + f"{type(error).__name__}: {str(error)}"


def _cause_of(error: BaseException) -> Any:
    """The failure's cause: an explicit ``cause`` attribute, else ``__cause__``; may raise."""
    cause = getattr(error, "cause", None)
    return cause if cause is not None else error.__cause__


def describe_failure(failure: Any) -> str:
    """The full text of a failure and its cause chain, for the log only.

    Never raises: anything that cannot be rendered gives :data:`UNPRINTABLE`.
    """
    try:
        if not isinstance(failure, BaseException):
            return str(failure)
        parts = [_render_exception(failure)]
        seen = {id(failure)}
        cause = _cause_of(failure)
        while cause is not None:
            if not isinstance(cause, BaseException):
                parts.append(str(cause))
                break
            if id(cause) in seen:
                parts.append(CAUSE_CYCLE)
                break
            seen.add(id(cause))
            parts.append(_render_exception(cause))
            cause = _cause_of(cause)
        return CAUSE_SEPARATOR.join(parts)
    except Exception:
        return UNPRINTABLE


def classify(failure: Any) -> ToolError:
    """The safe model-visible error for a service failure (may raise on hostile objects)."""
    if isinstance(failure, SessionQueryError):
        code = failure.code
        if type(code) is str and code in SAFE_ERRORS:
            safe_code, message = SAFE_ERRORS[code]
            return ToolError(safe_code, message)
        return tool_failed()
    if isinstance(failure, ToolError) and type(failure.code) is str and failure.code == UNAUTHORIZED:
        return unauthorized()
    return tool_failed()


def sanitize(operation: str, failure: Any, logger: WarningLogger) -> ToolError:
    """Log the failure's diagnostic and return its safe replacement."""
    try:
        logger.warning("%s: %s failed: %s", LOG_PREFIX, operation, describe_failure(failure))
        return classify(failure)
    except Exception:
        return tool_failed()


# --------------------------------------------------------------------------- the boundary


def _raise_reason(signal: AbortSignal) -> None:
    reason = signal.reason
    assert reason is not None
    raise reason


class ServiceBoundary:
    """Runs service calls under one execution signal and sanitizes their failures."""

    def __init__(self, signal: AbortSignal | None, logger: WarningLogger | None = None) -> None:
        self.signal = signal
        self.logger: WarningLogger = logger if logger is not None else logging.getLogger("sessionq.tools")

    def check(self) -> None:
        """Raise the abort reason if the execution signal is aborted."""
        if is_aborted(self.signal):
            assert self.signal is not None
            _raise_reason(self.signal)

    def call(self, operation: str, call: Callable[[], T]) -> T:
        """Run one service call under the boundary's rules (module docstring)."""
        self.check()
        safe: ToolError | None = None
        try:
            result = call()
        except Exception as failure:
            # Decided here, raised below: neither the abort reason nor the safe
            # error may carry the original failure as its context.
            safe = None if is_aborted(self.signal) else sanitize(operation, failure, self.logger)
        if safe is not None:
            raise safe
        self.check()
        return result

    def sanitize_item(self, operation: str, failure: Any) -> ToolError:
        """Sanitize one failed item of a batch (cancellation still wins)."""
        self.check()
        return sanitize(operation, failure, self.logger)
