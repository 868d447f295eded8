"""``traceSession``: a session's ancestors and descendants (query-spec.md §5.1).

Input is one observation of the whole corpus (the records of ``listSessions``).
Ancestors follow ``parentSession`` upwards from the target (nearest first);
descendants are the forest of sessions whose parent chain reaches the target,
each level ordered oldest first (``createdAt`` ascending, then id by
``localeCompare``).  A parent missing from the corpus makes the trace partial.

Everything is iterative: lineages thousands of levels deep (T-TR-5) must not
touch Python's recursion limit.  That includes *encoding* the result —
``msgspec`` counts nesting against the recursion limit (a chain of ~500 nodes
already fails with the default limit of 1,000), so deep forests must be
serialised with :func:`encode_lineage_trace` / converted with
:func:`lineage_trace_to_builtins`, which walk the forest with an explicit stack
and produce exactly what ``msgspec.json.encode`` / ``msgspec.to_builtins``
would.  Raising the recursion limit instead would change process-wide state
from library code, so we do not.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
from msgspec import UNSET

from readmodel.projection.collation import sort_records_oldest_first
from readmodel.core.errors import SessionQueryError
from readmodel.core.vocabulary import Header, SessionLineageNode, SessionLineageTrace, SessionRecord

_ABSENT: Any = object()


def clone_json(value: Any) -> Any:
    """Deep copy of a JSON value (dicts, lists, scalars), without recursion.

    The reference clones with ``structuredClone``; for JSON data that is a
    plain deep copy.
    """
    if type(value) is not dict and type(value) is not list:
        return value
    root: Any = {} if type(value) is dict else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if type(source) is dict else enumerate(source)
        for key, item in items:
            if type(item) is dict or type(item) is list:
                copy: Any = {} if type(item) is dict else []
                stack.append((item, copy))
                item = copy
            if type(target) is dict:
                target[key] = item
            else:
                target.append(item)
    return root


def clone_header(header: Header) -> Header:
    """An independent copy of a session header (mutating it changes nothing else)."""
    return clone_json(header)


def clone_record(record: SessionRecord) -> SessionRecord:
    """``{...record, header: structuredClone(record.header)}``."""
    return SessionRecord(header=clone_header(record.header), live=record.live, persisted=record.persisted)


def session_not_found(session_id: str) -> SessionQueryError:
    """``SESSION_QUERY_SESSION_NOT_FOUND`` with the reference's message."""
    return SessionQueryError("SESSION_QUERY_SESSION_NOT_FOUND", f'session "{session_id}" not found')


def lineage_cycle(parent_id: Any) -> SessionQueryError:
    """``SESSION_QUERY_INVALID_LINEAGE`` with the reference's message."""
    return SessionQueryError("SESSION_QUERY_INVALID_LINEAGE", f'session lineage contains a cycle at "{parent_id}"')


def _trace_ancestors(
    by_id: dict[Any, SessionRecord], target: SessionRecord, session_id: str
) -> tuple[list[SessionRecord], Any]:
    """Ancestors nearest first, and the first missing parent id (``_ABSENT`` if none).

    Raises ``SESSION_QUERY_INVALID_LINEAGE`` when the parent chain revisits an
    id (the target included).
    """
    ancestors: list[SessionRecord] = []
    seen: set[Any] = {session_id}
    parent_id = target.header.get("parentSession", _ABSENT)
    while parent_id is not _ABSENT:
        if type(parent_id) is dict or type(parent_id) is list:
            # JS compares objects by identity: never seen, never found -> unresolved
            return ancestors, parent_id
        if parent_id in seen:
            raise lineage_cycle(parent_id)
        seen.add(parent_id)
        parent = by_id.get(parent_id)
        if parent is None:
            return ancestors, parent_id
        ancestors.append(parent)
        parent_id = parent.header.get("parentSession", _ABSENT)
    return ancestors, _ABSENT


def children_index(records: Sequence[SessionRecord]) -> dict[Any, list[SessionRecord]]:
    """Parent id → its children, oldest first (``createdAt`` asc, then id by
    ``localeCompare``; stable).  Records without ``parentSession`` are skipped."""
    grouped: dict[Any, list[SessionRecord]] = {}
    for record in records:
        parent_id = record.header.get("parentSession", _ABSENT)
        if parent_id is not _ABSENT and type(parent_id) is not dict and type(parent_id) is not list:
            grouped.setdefault(parent_id, []).append(record)  # object parents can never be looked up
    return {parent_id: sort_records_oldest_first(children) for parent_id, children in grouped.items()}


def _check_duplicate_id_cycles(children: dict[Any, list[SessionRecord]], session_id: str) -> None:
    """Refuse a parent cycle reachable from the target through duplicated ids.

    With unique ids (every listing), a cycle below the target would have to
    pass through the target, which :func:`_trace_ancestors` already rejects;
    only duplicate ids can create one, and the reference would then expand
    forever.  Iterative three-colour depth-first search over ids.
    """
    on_path: set[Any] = set()
    done: set[Any] = set()
    stack: list[tuple[Any, Iterator[SessionRecord]]] = [(session_id, iter(children.get(session_id, ())))]
    on_path.add(session_id)
    while stack:
        node_id, pending = stack[-1]
        child = next(pending, None)
        if child is None:
            stack.pop()
            on_path.discard(node_id)
            done.add(node_id)
            continue
        child_id = child.header["id"]
        if child_id in on_path:
            raise lineage_cycle(child_id)
        if child_id not in done:
            on_path.add(child_id)
            stack.append((child_id, iter(children.get(child_id, ()))))


def _build_descendants(children: dict[Any, list[SessionRecord]], session_id: str) -> list[SessionLineageNode]:
    """The forest under ``session_id``, built breadth-agnostically with a stack."""
    forest: list[SessionLineageNode] = []
    stack: list[tuple[Any, list[SessionLineageNode]]] = [(session_id, forest)]
    while stack:
        parent_id, siblings = stack.pop()
        for child in children.get(parent_id, ()):
            node = SessionLineageNode(session=clone_record(child), descendants=[])
            siblings.append(node)
            stack.append((child.header["id"], node.descendants))
    return forest


def trace_session(records: Sequence[SessionRecord], session_id: str) -> SessionLineageTrace:
    """``traceSession`` over one corpus observation (query-spec.md §5.1).

    Errors: ``SESSION_QUERY_SESSION_NOT_FOUND`` (no record with that id),
    ``SESSION_QUERY_INVALID_LINEAGE`` (a cycle on the target's parent chain).
    Every record in the result is a fresh clone; for duplicated ids the last
    record wins lookups (as the reference's ``Map``) and every record counts as
    a child.
    """
    by_id = {record.header["id"]: record for record in records}
    target = by_id.get(session_id)
    if target is None:
        raise session_not_found(session_id)
    ancestors, unresolved = _trace_ancestors(by_id, target, session_id)
    children = children_index(records)
    if len(by_id) != len(records):
        _check_duplicate_id_cycles(children, session_id)
    trace = SessionLineageTrace(
        target=clone_record(target),
        ancestors=[clone_record(record) for record in ancestors],
        descendants=_build_descendants(children, session_id),
        complete=unresolved is _ABSENT,
    )
    if unresolved is _ABSENT:
        trace.root = clone_record(ancestors[-1] if ancestors else target)
    else:
        trace.unresolved_parent_id = unresolved
    return trace


# ---------------------------------------------------------------------------
# Recursion-free serialisation of (possibly very deep) traces
# ---------------------------------------------------------------------------

def iter_lineage_nodes(forest: Sequence[SessionLineageNode]) -> Iterator[tuple[int, SessionLineageNode]]:
    """Pre-order walk of a forest as ``(depth, node)``, depth 0 at the top."""
    stack: list[tuple[int, SessionLineageNode]] = [(0, node) for node in reversed(forest)]
    while stack:
        depth, node = stack.pop()
        yield depth, node
        stack.extend((depth + 1, child) for child in reversed(node.descendants))


def _encode_forest(forest: Sequence[SessionLineageNode], out: list[bytes]) -> None:
    """Append the JSON of a forest to ``out`` with an explicit stack."""
    out.append(b"[")
    stack: list[Iterator[SessionLineageNode]] = [iter(forest)]
    first = [True]
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
            first.pop()
            out.append(b"]}" if stack else b"]")
            continue
        if not first[-1]:
            out.append(b",")
        first[-1] = False
        out.append(b'{"session":' + msgspec.json.encode(node.session) + b',"descendants":[')
        stack.append(iter(node.descendants))
        first.append(True)


def encode_lineage_trace(trace: SessionLineageTrace) -> bytes:
    """``msgspec.json.encode(trace)`` without nesting limits (same bytes)."""
    out: list[bytes] = [
        b'{"target":', msgspec.json.encode(trace.target),
        b',"ancestors":', msgspec.json.encode(trace.ancestors),
        b',"descendants":',
    ]
    _encode_forest(trace.descendants, out)
    out += [b',"complete":', msgspec.json.encode(trace.complete)]
    if trace.root is not UNSET:
        out += [b',"root":', msgspec.json.encode(trace.root)]
    if trace.unresolved_parent_id is not UNSET:
        out += [b',"unresolvedParentId":', msgspec.json.encode(trace.unresolved_parent_id)]
    out.append(b"}")
    return b"".join(out)


def _forest_to_builtins(forest: Sequence[SessionLineageNode]) -> list[dict[str, Any]]:
    top: list[dict[str, Any]] = []
    stack: list[tuple[Sequence[SessionLineageNode], list[dict[str, Any]]]] = [(forest, top)]
    while stack:
        nodes, into = stack.pop()
        for node in nodes:
            children: list[dict[str, Any]] = []
            into.append({"session": msgspec.to_builtins(node.session), "descendants": children})
            stack.append((node.descendants, children))
    return top


def lineage_trace_to_builtins(trace: SessionLineageTrace) -> dict[str, Any]:
    """``msgspec.to_builtins(trace)`` without nesting limits (same value)."""
    out: dict[str, Any] = {
        "target": msgspec.to_builtins(trace.target),
        "ancestors": msgspec.to_builtins(trace.ancestors),
        "descendants": _forest_to_builtins(trace.descendants),
        "complete": trace.complete,
    }
    if trace.root is not UNSET:
        out["root"] = msgspec.to_builtins(trace.root)
    if trace.unresolved_parent_id is not UNSET:
        out["unresolvedParentId"] = trace.unresolved_parent_id
    return out
