"""Model-visible tool errors: a code plus a message the model may read.

Every failure a tool reports is a :class:`ToolError`.  Codes are kept exactly
as the reference spells them (hosts and tests key on them); messages are
sessionq's own wording and never carry data from a failed backend call.

Codes owned by the tools (as opposed to the ``SESSION_QUERY_*`` service codes
of :mod:`readmodel.core.errors`, which the service boundary maps to fixed safe
messages):

``INVALID_ARGS``
    the arguments do not fit the tool's JSON input schema (checked by the
    tool runtime before the tool runs);
``SESSION_QUERY_TOOL_MISSING_AGENT``
    no calling session was given;
``SESSION_QUERY_TOOL_UNAUTHORIZED``
    the target is outside the caller's workspace, or does not exist (the two
    are indistinguishable on purpose);
``SESSION_QUERY_TOOL_NO_CURRENT_STEP``
    a current-session search without a step to cut off at;
``SESSION_QUERY_TOOL_FAILED``
    any failure that is not safe to describe;
``TOOL_TIMEOUT``
    the tool ran past its deadline (the abort reason of the deadline signal).
"""

from __future__ import annotations

from typing import Final

INVALID_ARGS: Final = "INVALID_ARGS"
MISSING_AGENT: Final = "SESSION_QUERY_TOOL_MISSING_AGENT"
UNAUTHORIZED: Final = "SESSION_QUERY_TOOL_UNAUTHORIZED"
NO_CURRENT_STEP: Final = "SESSION_QUERY_TOOL_NO_CURRENT_STEP"
TOOL_FAILED: Final = "SESSION_QUERY_TOOL_FAILED"
TOOL_TIMEOUT: Final = "TOOL_TIMEOUT"
TOOL_NOT_FOUND: Final = "TOOL_NOT_FOUND"
INVALID_FILTER: Final = "SESSION_QUERY_INVALID_FILTER"
INVALID_QUERY: Final = "SESSION_QUERY_INVALID_QUERY"
INVALID_CURSOR: Final = "SESSION_QUERY_INVALID_CURSOR"
ABORTED: Final = "SESSION_QUERY_ABORTED"

GENERIC_FAILURE_MESSAGE: Final = "the session query could not be completed"
UNAUTHORIZED_MESSAGE: Final = "that session is not available to this workspace"


class ToolError(Exception):
    """A failure the model sees as ``Error: <message>`` with ``code`` attached."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


class ToolTimeout(ToolError):
    """The abort reason of a tool deadline (code ``TOOL_TIMEOUT``)."""

    def __init__(self, tool: str, timeout_ms: int) -> None:
        super().__init__(TOOL_TIMEOUT, f"{tool} gave up after its {timeout_ms} ms time limit")
        self.timeout_ms = timeout_ms


def unauthorized() -> ToolError:
    """The one unauthorized error: it never names the session it refuses."""
    return ToolError(UNAUTHORIZED, UNAUTHORIZED_MESSAGE)


def tool_failed() -> ToolError:
    """The generic failure whose message says nothing about the cause."""
    return ToolError(TOOL_FAILED, GENERIC_FAILURE_MESSAGE)


def invalid_filter(message: str) -> ToolError:
    return ToolError(INVALID_FILTER, message)


def invalid_query(message: str) -> ToolError:
    return ToolError(INVALID_QUERY, message)


def invalid_args(message: str) -> ToolError:
    return ToolError(INVALID_ARGS, message)
