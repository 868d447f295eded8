"""Shared by the RPC and HTTP hostile-input suites: hypothesis strategies for
hostile JSON-RPC input and the small real index they query."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from readmodel.rpc import METHODS
from tests.logfactory import header, simple_turn, write_log
from tests.query.support import build_index


def two_session_index(work: Path) -> Path:
    """An index of two sessions under ``work``: ``root`` and its subagent ``kid``."""
    root = work / "root"
    write_log(root, header("root", 1), [simple_turn(0, "alpha beta")])
    write_log(root, header("kid", 2, parentSession="root", origin="subagent", delegationDepth=1), [simple_turn(0, "beta gamma")])
    return build_index(root, work / "index.db")


def dumps(value: Any, ascii_only: bool = True) -> bytes:
    """JSON text of ``value``; lone surrogates need the ASCII escapes to be valid text."""
    return json.dumps(value, ensure_ascii=ascii_only, allow_nan=False).encode("utf-8", "surrogatepass")


# Text with lone surrogates (and pairs, astral characters, controls) mixed in.
texts = st.text(st.characters(exclude_categories=()), max_size=12) | st.sampled_from(
    ["\ud800", "a\udc00b", "\ud83d", "\ude00\ud83d", "😀", "", "\\", '"']
)
scalars = st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats(allow_nan=False, allow_infinity=False) | texts
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=12)
ids = st.none() | st.integers(-(10**25), 10**25) | st.floats(allow_nan=False, allow_infinity=False) | texts | json_values
methods = st.sampled_from(sorted(METHODS)) | texts

known_params = st.fixed_dictionaries(
    {},
    optional={
        "sessionId": st.sampled_from(["root", "kid", "nope"]) | json_values,
        "sessionIds": st.lists(st.sampled_from(["root", "kid"]) | texts, max_size=3) | json_values,
        "seq": st.integers(-2, 8) | json_values,
        "before": st.integers(-1, 60) | json_values,
        "after": st.integers(-1, 60) | json_values,
        "startSeq": st.integers(-1, 8) | json_values,
        "limit": st.integers(-1, 6000) | json_values,
        "query": texts | json_values,
        "cursor": texts | json_values,
        "filters": json_values,
        "sessionFilters": json_values,
        "eventFilters": json_values,
    },
)


@st.composite
def requests(draw: st.DrawFn) -> Any:
    """Mostly request-shaped objects (some fields missing or mistyped), sometimes anything."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0" if draw(st.integers(0, 9)) else draw(json_values)
    if draw(st.integers(0, 9)):
        message["method"] = draw(methods)
    if draw(st.booleans()):
        message["id"] = draw(ids)
    if draw(st.integers(0, 3)):
        message["params"] = draw(known_params) if draw(st.integers(0, 5)) else draw(json_values)
    return message


@st.composite
def nested(draw: st.DrawFn, depth: int) -> bytes:
    """A JSON text nesting ``depth`` arrays/objects around a scalar."""
    openers = draw(st.lists(st.sampled_from([b"[", b'{"k":']), min_size=depth, max_size=depth))
    closers = [b"]" if opener == b"[" else b"}" for opener in reversed(openers)]
    return b"".join(openers) + dumps(draw(scalars)) + b"".join(closers)


huge_numbers = st.sampled_from([b"1e999", b"-1e400", b"1E+99999", b"9" * 4301, b"-" + b"9" * 5000, b"1." + b"0" * 5000 + b"1"]) | st.integers(
    min_value=2**63
).map(lambda n: str(n).encode())
