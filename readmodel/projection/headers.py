"""Full restore validation of a session header (format-spec §3.2 step 9).

The harness applies these rules when it materialises a session (``load``,
``inspect``, and the query service's ``readSession`` replay).  Listing applies
fewer rules, so a header that lists may still fail here.
"""

from __future__ import annotations

import os
from typing import Any

from readmodel.core.jsvalues import is_non_negative_safe_integer

FORMAT_VERSION = 0


class HeaderValidationError(ValueError):
    """A header fails the restore rules."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def check_restored_header(header: dict[str, Any], session_id: str) -> None:
    """Full restore validation of a header (format-spec §3.2 step 9); raises corrupt."""

    def fail(reason: str) -> None:
        raise HeaderValidationError(f'session "{session_id}" header is invalid: {reason}')

    if header.get("version") != FORMAT_VERSION:
        fail("version must be 0")
    if header.get("id") != session_id:
        fail("id does not match the session")
    if not is_non_negative_safe_integer(header.get("createdAt")):
        fail("createdAt must be a non-negative safe integer")
    if "cwd" in header and (type(header["cwd"]) is not str or not os.path.isabs(header["cwd"])):
        fail("cwd must be an absolute path")
    if "parentSession" in header and type(header["parentSession"]) is not str:
        fail("parentSession must be a string")
    if "seedLength" in header and not is_non_negative_safe_integer(header["seedLength"]):
        fail("seedLength must be a non-negative safe integer")
    if "origin" in header and header["origin"] != "subagent":
        fail('origin must be "subagent"')
    if "delegationDepth" in header and not is_non_negative_safe_integer(header["delegationDepth"]):
        fail("delegationDepth must be a non-negative safe integer")
    if "agentPreset" in header and type(header["agentPreset"]) is not str:
        fail("agentPreset must be a string")
