"""Request and batch-result shapes of the exact reads (reference ``types.ts``).

Requests are msgspec structs with the reference's camelCase JSON names; every
read also accepts the plain JSON object (a ``Mapping``) a JSON-RPC or HTTP
caller sends.  "Absent" is ``UNSET`` (JS ``undefined``) and differs from an
explicit ``None`` (JS ``null``): ``readEvent`` treats an absent ``before`` as
0 but rejects ``before: null``, exactly as the reference does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from msgspec import UNSET, UnsetType

from readmodel.core.errors import SessionQueryError
from readmodel.core.vocabulary import SessionTitleObservation, Struct, to_builtins


class SessionEventReadRequest(Struct):
    """``{sessionId, seq, before?, after?}`` of ``readEvent``."""

    session_id: str
    seq: Any
    before: Any = UNSET
    after: Any = UNSET


class SessionEventTraceRequest(Struct):
    """``{sessionId, seq}`` of ``traceEvent``."""

    session_id: str
    seq: Any


def _field(request: Mapping[str, Any], camel: str, snake: str) -> Any:
    if camel in request:
        return request[camel]
    return request.get(snake, UNSET)


def read_request(request: SessionEventReadRequest | Mapping[str, Any]) -> SessionEventReadRequest:
    """Normalise a ``readEvent`` request (struct or JSON object) into a fresh struct."""
    if isinstance(request, SessionEventReadRequest):
        return SessionEventReadRequest(
            session_id=request.session_id, seq=request.seq, before=request.before, after=request.after
        )
    return SessionEventReadRequest(
        session_id=_field(request, "sessionId", "session_id"),
        seq=_field(request, "seq", "seq"),
        before=_field(request, "before", "before"),
        after=_field(request, "after", "after"),
    )


def trace_request(request: SessionEventTraceRequest | Mapping[str, Any]) -> SessionEventTraceRequest:
    """Normalise a ``traceEvent`` request (struct or JSON object) into a fresh struct."""
    if isinstance(request, SessionEventTraceRequest):
        return SessionEventTraceRequest(session_id=request.session_id, seq=request.seq)
    return SessionEventTraceRequest(
        session_id=_field(request, "sessionId", "session_id"), seq=_field(request, "seq", "seq")
    )


class SessionTitleObservationResult(Struct):
    """One entry of ``readTitleSnapshots``: ``{sessionId, status, value | reason}``.

    ``reason`` is the raised value itself (a ``SessionQueryError``, or e.g. the
    ``TypeError`` of a malformed title event), unwrapped as in the reference;
    :func:`title_result_to_builtins` gives its JSON form.
    """

    session_id: str
    status: Literal["fulfilled", "rejected"]
    value: SessionTitleObservation | UnsetType = UNSET
    reason: Any = UNSET


def error_to_builtins(error: BaseException) -> dict[str, Any]:
    """The JSON form of a failure: ``{code, message}`` for a query error,
    ``{name, message}`` for an uncoded one (a plain replay ``Error``, a ``TypeError``)."""
    if isinstance(error, SessionQueryError):
        return error.to_json()
    name = getattr(error, "name", None)
    return {"name": name if type(name) is str else type(error).__name__, "message": str(error)}


def title_result_to_builtins(result: SessionTitleObservationResult) -> dict[str, Any]:
    """The exact JSON value of one title batch entry."""
    out: dict[str, Any] = {"sessionId": result.session_id, "status": result.status}
    if result.status == "fulfilled":
        out["value"] = to_builtins(result.value)
    else:
        out["reason"] = error_to_builtins(result.reason)
    return out
