"""Search cursors: opaque, signed, bound to the index, the request and the generation.

A forged or foreign cursor is invalid; a cursor over a changed corpus is stale.
They work in any reader process of the same index.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from readmodel.core.errors import SessionQueryError
from readmodel.core.jsvalues import (
    MAX_SAFE_INTEGER,
)
from readmodel.search.requests import EventsRequest, SessionsRequest


_CURSOR_VERSION: Final = 1


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if any(ch not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" for ch in text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _canonical_clause(clause: Mapping[str, Any]) -> dict[str, Any]:
    if "values" in clause:
        values = sorted(clause["values"], key=lambda v: (v is not None, v or ""))
        return {"kind": clause["kind"], "values": values}
    if clause["kind"] in ("created-at", "seq", "time"):
        return {"kind": clause["kind"], "from": clause.get("from"), "to": clause.get("to")}
    return dict(clause)


def _canon(filters: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted(msgspec.json.encode(_canonical_clause(clause)).decode() for clause in filters)


def request_fingerprint(request: SessionsRequest | EventsRequest) -> str:
    """A digest of the normalised request, its search mode included; clause and value order do not matter."""
    if isinstance(request, SessionsRequest):
        identity: dict[str, Any] = {
            "scope": "sessions",
            "query": request.query,
            "sessionFilters": _canon(request.session_filters),
            "eventFilters": _canon(request.event_filters),
            "limit": request.limit,
        }
    else:
        identity = {"scope": "events", "sessionId": request.session_id, "query": request.query, "filters": _canon(request.filters), "limit": request.limit}
    if request.match != "phrase":
        # Extension: a cursor is bound to its mode (and a words query's prefix flag);
        # phrase requests keep the reference-era identity.
        identity["match"] = request.match
        identity["prefix"] = request.prefix
    return hashlib.sha256(msgspec.json.encode(identity)).hexdigest()[:32]


class CursorCodec:
    """Signs and checks cursors for one index.

    ``index_identity`` goes into every cursor (a cursor of another index is
    invalid); ``secret`` is the index's random cursor secret, which no cursor
    carries, so only a process that can read the index can sign one.
    """

    def __init__(self, index_identity: str, secret: bytes) -> None:
        if type(secret) is not bytes or len(secret) < 16:
            raise ValueError("the index's cursor secret is missing or shorter than 16 bytes")
        self.identity = index_identity
        self._key = hashlib.sha256(b"sessionq-cursor\x00" + secret).digest()

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:16]

    def encode(self, scope: str, fingerprint: str, generation: str, offset: int) -> str:
        payload = msgspec.json.encode(
            {"version": _CURSOR_VERSION, "instance": self.identity, "scope": scope, "fingerprint": fingerprint, "generation": generation, "offset": offset}
        )
        return _b64(payload) + "." + _b64(self._sign(payload))

    def decode(self, cursor: str, scope: str, fingerprint: str, generation: str) -> int:
        """The offset a cursor resumes at; INVALID before STALE, as in the reference."""
        invalid = SessionQueryError("SESSION_QUERY_INVALID_CURSOR", "session-search cursor is invalid")
        try:
            body, _, signature = cursor.partition(".")
            payload = _unb64(body)
            if not hmac.compare_digest(_unb64(signature), self._sign(payload)):
                raise invalid
            data = msgspec.json.decode(payload)
        except SessionQueryError:
            raise
        except (ValueError, msgspec.DecodeError):
            raise invalid from None
        if type(data) is not dict:
            raise invalid
        offset = data.get("offset")
        if (
            data.get("version") != _CURSOR_VERSION
            or data.get("instance") != self.identity
            or data.get("scope") != scope
            or data.get("fingerprint") != fingerprint
            or not (type(offset) is int and 0 <= offset <= MAX_SAFE_INTEGER)
        ):
            raise invalid
        if data.get("generation") != generation:
            raise SessionQueryError("SESSION_QUERY_STALE_CURSOR", "session-search cursor is stale because its relevant corpus changed")
        return offset
