"""The closed set of query error codes and the exception that carries them.

Every failure a user or a model can see maps to exactly one of the seventeen
``SESSION_QUERY_*`` codes of the reference service.  Codes are plain strings so
that they survive JSON encoding unchanged.
"""

from __future__ import annotations

from typing import Final, Literal

SessionQueryErrorCode = Literal[
    "SESSION_QUERY_ABORTED",
    "SESSION_QUERY_CORRUPT_SESSION",
    "SESSION_QUERY_EVENT_NOT_FOUND",
    "SESSION_QUERY_INDEX_FAILED",
    "SESSION_QUERY_INVALID_CONFIG",
    "SESSION_QUERY_INVALID_CURSOR",
    "SESSION_QUERY_INVALID_FILTER",
    "SESSION_QUERY_INVALID_LIMIT",
    "SESSION_QUERY_INVALID_QUERY",
    "SESSION_QUERY_INVALID_LINEAGE",
    "SESSION_QUERY_INVALID_SURFACE",
    "SESSION_QUERY_INVALID_WINDOW",
    "SESSION_QUERY_PERSISTENCE_FAILED",
    "SESSION_QUERY_SEARCH_DISABLED",
    "SESSION_QUERY_SESSION_NOT_FOUND",
    "SESSION_QUERY_STALE_CURSOR",
    "SESSION_QUERY_SOURCE_CONFLICT",
]

ERROR_CODES: Final[frozenset[str]] = frozenset(SessionQueryErrorCode.__args__)  # type: ignore[attr-defined]


class SessionQueryError(Exception):
    """A coded, user-visible query failure.

    ``code`` is always one of :data:`ERROR_CODES`; ``message`` is the exact
    reference message text; ``cause`` optionally keeps the underlying error.
    """

    name: Final = "SessionQueryError"

    def __init__(self, code: SessionQueryErrorCode, message: str, cause: BaseException | None = None) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown session query error code {code!r}")
        super().__init__(message)
        self.code: SessionQueryErrorCode = code
        self.message = message
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause

    def to_json(self) -> dict[str, str]:
        """The ``{code, message}`` object the CLI and JSON-RPC layers print."""
        return {"code": self.code, "message": self.message}

    def __repr__(self) -> str:
        return f"SessionQueryError({self.code!r}, {self.message!r})"
