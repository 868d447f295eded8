"""Encoding results as JSON bytes, including the rare unencodable string.

msgspec cannot encode a string holding a lone surrogate (a log may carry one as
an escape, and the reference returns it as such); those few values fall back
to the standard library with ASCII escapes, which is the same JSON value.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

_encode: Final = msgspec.json.Encoder().encode


def encode_json(value: Any) -> bytes:
    """Compact JSON of a result (structs, dicts, lists, scalars)."""
    try:
        return _encode(value)
    except UnicodeEncodeError:
        return json.dumps(msgspec.to_builtins(value), ensure_ascii=True, separators=(",", ":")).encode("ascii")
