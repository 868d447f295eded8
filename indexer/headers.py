"""The header record (line 1 of every transcript) and its validation.

format-spec §3: a foreign numeric ``version`` is refused as *unsupported*
before any shape check; a malformed header is *corrupt*; retired policy keys
are fatal even when only listing.  The projection keeps the known keys only, in
the harness's order.
"""

from __future__ import annotations

from typing import Any, Final

from readmodel.core.clipping import clip
from readmodel.projection.headers import FORMAT_VERSION
from readmodel.core.jsvalues import is_negative_zero, is_non_negative_safe_integer, is_number, is_record

from .records import LogFormatError, RecordError, decode_json_exact


PROJECTION_KEYS: Final = ("version", "id", "createdAt", "cwd", "parentSession", "seedLength", "origin", "delegationDepth", "agentPreset")
RETIRED_KEYS: Final = ("sandboxMode", "approvalPolicy")


class NotAHeader(LogFormatError):
    """The first line is not a well-formed session header."""


def _describe_id(value: Any) -> str:
    return clip(value.get("id") if type(value.get("id")) is str else str(value.get("id")))


def refuse_foreign_version(value: Any, path: str = "") -> None:
    """Raise *unsupported* for a record whose numeric ``version`` is not 0."""
    # JS `typeof value === 'object'` admits arrays, but an array has no version.
    if type(value) is not dict:
        return
    version = value.get("version")
    if is_number(version) and version != FORMAT_VERSION:
        where = f" ({path})" if path else ""
        if version > FORMAT_VERSION:
            reason = f"was written by a newer harness (format version {version}); upgrade to read it"
        else:
            reason = f"uses format version {version}, older than version 0, which has no upgrade path"
        raise LogFormatError(f'session "{_describe_id(value)}"{where} {reason}', kind="unsupported")


def is_header_shape(value: Any) -> bool:
    """The harness's header shape check (format-spec §3.2 step 4)."""
    if not is_record(value) or value.get("type") != "session":
        return False
    if not is_number(value.get("version")) or type(value.get("id")) is not str:
        return False
    for key in ("createdAt", "delegationDepth"):
        field = value.get(key)
        if not is_non_negative_safe_integer(field) or is_negative_zero(field):
            return False
    if "origin" in value and value["origin"] != "subagent":
        return False
    return "agentPreset" not in value or type(value["agentPreset"]) is str


def project_header(value: dict[str, Any]) -> dict[str, Any]:
    """Keep the known header keys in the harness's order (``type`` and unknown keys dropped)."""
    return {key: _plain(value[key]) for key in PROJECTION_KEYS if key in value}


def _plain(value: Any) -> Any:
    # -0 only matters for validation; once accepted it reads back as 0.
    return 0 if type(value) is float and is_negative_zero(value) else value


def parse_header_line(line: bytes, *, path: str = "", check_version: bool = True) -> dict[str, Any]:
    """Parse and validate a header line (without its LF); return the projection.

    ``check_version=False`` is the listing variant (no version refusal).
    Raises :class:`NotAHeader` for an ill-shaped line, :class:`LogFormatError`
    otherwise.
    """
    try:
        value = decode_json_exact(line)
    except RecordError:
        raise NotAHeader("header line is not valid JSON") from None
    if check_version:
        refuse_foreign_version(value, path)
    if not is_header_shape(value):
        raise NotAHeader("first line is not a session header")
    if any(key in value for key in RETIRED_KEYS):
        raise LogFormatError("session header carries retired policy baseline fields (sandboxMode/approvalPolicy)")
    return project_header(value)
