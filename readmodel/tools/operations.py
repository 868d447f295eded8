"""The five tool flows (search-tools spec §8.7–§8.10).

Each flow takes a :class:`ToolContext` and the schema-checked arguments and
returns the rendered text, or raises a :class:`ToolError` (or the abort
reason of the execution signal).  The order of the steps is part of the
contract: which error wins when several apply, and which service calls are
made before a failure.

Every service call goes through the context's :class:`ServiceBoundary`, with
the execution signal.  The service is a :class:`readmodel.query.SessionQuery`
or anything with the same methods (``filter_sessions``, ``search_sessions``,
``search_events``, ``trace_session``, ``trace_event``, ``read_event``,
``read_title_snapshots``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from readmodel.core.jsvalues import MAX_SAFE_INTEGER
from readmodel.tools.access import (
    Caller,
    authorize_session_ids,
    authorize_target,
    check_observed,
    header_authorized,
    require_caller,
    resolve_target,
)
from readmodel.tools.boundary import (
    OP_EVENT_READ,
    OP_EVENT_SEARCH,
    OP_EVENT_TRACE,
    OP_LINEAGE,
    OP_SESSION_SEARCH,
    OP_TITLE_ITEM,
    OP_TITLES,
    ServiceBoundary,
)
from readmodel.tools.errors import NO_CURRENT_STEP, TOOL_FAILED, UNAUTHORIZED, ToolError, unauthorized
from readmodel.tools.inputs import (
    TOOLS_DEFAULT_MATCH,
    dedupe,
    exact_integer,
    normalize_query,
    relaxed_query,
    require_values,
    seq_range_clause,
)
from readmodel.tools.paging import collect_pages
from readmodel.tools.render import (
    NO_SESSION_MATCHES,
    TitleText,
    VisibleLineage,
    render_event_read,
    render_event_search,
    render_event_trace,
    render_lineage,
    render_session_search,
    title_text,
)
from readmodel.tools.timestamps import time_range_clause

STEP_START = "step/start"


@dataclass(frozen=True)
class ToolContext:
    """One tool execution: the service, the caller, the boundary (with the
    execution signal) and the result cap of the search tools."""

    service: Any
    caller: Caller | None
    boundary: ServiceBoundary
    max_results: int
    redact: bool = False  # secrets are redacted (the raw events read are asked for redacted)

    @property
    def signal(self) -> Any:
        return self.boundary.signal


# --------------------------------------------------------------------------- shared steps


def _with_cursor(request: dict[str, Any], cursor: str | None) -> dict[str, Any]:
    return request if cursor is None else {**request, "cursor": cursor}


def _search_relaxing(args: dict[str, Any], request: dict[str, Any], collect: Any) -> tuple[Any, str]:
    """``(collected, note)``: the pages of ``request``; when the tools' default words
    search of a question finds nothing, those of the question without its function
    words (:func:`readmodel.tools.inputs.relaxed_query`), with a note that says so."""
    collected = collect(request)
    relaxed = relaxed_query(request["query"])
    if collected.items or "match" in args or relaxed is None:
        return collected, ""
    retried = collect({**request, "query": relaxed})
    if not retried.items:
        return collected, ""
    note = f'No event holds every word of "{request["query"]}"; these match "{relaxed}" (its words without "why", "the" and the like).\n\n'
    return retried, note


def event_filters(
    seq_from: int | None,
    seq_to: int | None,
    time_from: str | None,
    time_to: str | None,
    types: list[str] | None,
    surfaces: list[str] | None,
) -> list[dict[str, Any]]:
    """Event filters in the fixed order seq, time, type, surface (each only when given)."""
    filters: list[dict[str, Any]] = []
    seq = seq_range_clause(seq_from, seq_to)
    if seq is not None:
        filters.append(seq)
    time = time_range_clause("time", "time", time_from, time_to)
    if time is not None:
        filters.append(time)
    if require_values("event_types", types) is not None:
        filters.append({"kind": "type", "values": list(types or ())})
    if require_values("surfaces", surfaces) is not None:
        filters.append({"kind": "surface", "values": list(surfaces or ())})
    return filters


def read_titles(ctx: ToolContext, caller: Caller, session_ids: Sequence[str]) -> dict[str, TitleText]:
    """Titles of ``session_ids`` in one batch call.

    A title that could not be read becomes an "unavailable" marker with its
    safe code, except an unauthorized one, which fails the whole tool; a
    title observation of a session that moved out of the workspace fails the
    tool too.  Cancellation always fails the tool.
    """
    requested = list(dict.fromkeys(session_ids))
    results = ctx.boundary.call(OP_TITLES, lambda: ctx.service.read_title_snapshots(requested, ctx.signal))
    wanted = set(requested)
    titles: dict[str, TitleText] = {}
    for result in results:
        session_id = result.session_id
        if session_id not in wanted:
            continue
        if result.status == "fulfilled":
            check_observed(caller, result.value.session, session_id)
            titles[session_id] = title_text(result.value)
            continue
        safe = ctx.boundary.sanitize_item(OP_TITLE_ITEM, result.reason)
        if safe.code == UNAUTHORIZED:
            raise unauthorized()
        titles[session_id] = TitleText(failure_code=safe.code)
    for session_id in requested:
        titles.setdefault(session_id, TitleText(failure_code=TOOL_FAILED))
    return titles


def _authorized_target(ctx: ToolContext, session_id: str | None) -> tuple[Caller, str]:
    """Caller, target and the preflight check, in that order."""
    caller = require_caller(ctx.caller)
    target = resolve_target(caller, session_id)
    authorize_target(ctx.boundary, ctx.service, caller, target)
    return caller, target


# --------------------------------------------------------------------------- session_search


def session_search(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Search earlier sessions of the caller's workspace (§8.7)."""
    caller = require_caller(ctx.caller)
    if caller.cwd is None:
        raise ToolError(UNAUTHORIZED, "searching other sessions needs a calling session that has a workspace")
    query = normalize_query(args["query"])
    session_filters: list[dict[str, Any]] = []
    session_ids = require_values("session_ids", args.get("session_ids"))
    if session_ids is not None:
        session_filters.append({"kind": "id", "values": session_ids})
    created = time_range_clause("created-at", "created_at", args.get("created_at_from"), args.get("created_at_to"))
    if created is not None:
        session_filters.append(created)
    availability = require_values("availability", args.get("availability"))
    if availability is not None:
        session_filters.append({"kind": "availability", "values": availability})
    filters = event_filters(
        args.get("event_seq_from"),
        args.get("event_seq_to"),
        args.get("event_time_from"),
        args.get("event_time_to"),
        args.get("event_types"),
        args.get("event_surfaces"),
    )
    parents = require_values("parent_session_ids", args.get("parent_session_ids"))
    parent_ids = dedupe(parents) if parents is not None else None
    include_roots = args.get("include_root_sessions") is True
    if parent_ids is not None or include_roots:
        allowed = authorize_session_ids(ctx.boundary, ctx.service, caller, parent_ids or [])
        values: list[str | None] = [parent for parent in parent_ids or [] if parent in allowed]
        if include_roots:
            values.append(None)
        if not values:
            return NO_SESSION_MATCHES
        session_filters.append({"kind": "parent", "values": values})
    session_filters.append({"kind": "cwd", "values": [caller.cwd]})
    mode = args.get("match", TOOLS_DEFAULT_MATCH)
    request = {"query": query, "sessionFilters": session_filters, "eventFilters": filters, "match": mode}

    def accept(hit: Any) -> bool:
        header = hit.header
        return header.get("id") != caller.session_id and header_authorized(caller, header)

    collected, note = _search_relaxing(
        args,
        request,
        lambda request: collect_pages(
            ctx.boundary,
            OP_SESSION_SEARCH,
            lambda cursor: ctx.service.search_sessions(_with_cursor(request, cursor), ctx.signal),
            accept,
            ctx.max_results,
        ),
    )
    hits = collected.items
    hit_parents = [hit.header.get("parentSession") for hit in hits]
    visible_parents = authorize_session_ids(
        ctx.boundary, ctx.service, caller, [parent for parent in hit_parents if type(parent) is str]
    )
    titles = read_titles(ctx, caller, [hit.header["id"] for hit in hits])
    return note + render_session_search(hits, titles, visible_parents, collected.capped)


# --------------------------------------------------------------------------- session_event_search


def _last_step_start(events: Sequence[Any]) -> int | None:
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if isinstance(event, dict) and event.get("type") == STEP_START:
            seq = event.get("seq")
            return seq if type(seq) is int else None
    return None


def session_event_search(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Search earlier events of one session; in the caller's own session only
    events before the invoking step are searched (§8.8)."""
    caller, target = _authorized_target(ctx, args.get("session_id"))
    query = normalize_query(args["query"])
    seq_from, seq_to = args.get("seq_from"), args.get("seq_to")
    seq_range_clause(seq_from, seq_to)
    if caller.session_id is not None and target == caller.session_id:
        step = _last_step_start(caller.events)
        if step is None:
            raise ToolError(NO_CURRENT_STEP, "searching the current session needs an active step to stop before")
        seq_to = min(MAX_SAFE_INTEGER if seq_to is None else seq_to, step - 1)
    title = read_titles(ctx, caller, [target])[target]
    if seq_from is not None and seq_to is not None and seq_from > seq_to:
        return render_event_search(target, title, [], False)
    filters = event_filters(
        seq_from, seq_to, args.get("time_from"), args.get("time_to"), args.get("event_types"), args.get("surfaces")
    )
    mode = args.get("match", TOOLS_DEFAULT_MATCH)
    request = {"sessionId": target, "query": query, "filters": filters, "match": mode}
    collected, note = _search_relaxing(
        args,
        request,
        lambda request: collect_pages(
            ctx.boundary,
            OP_EVENT_SEARCH,
            lambda cursor: ctx.service.search_events(_with_cursor(request, cursor), ctx.signal),
            lambda _hit: True,
            ctx.max_results,
            inspect_page=lambda page: check_observed(caller, page.session, target),
        ),
    )
    return note + render_event_search(target, title, collected.items, collected.capped)


# --------------------------------------------------------------------------- session_trace


def visible_lineage(caller: Caller, trace: Any) -> VisibleLineage:
    """Reduce a lineage trace to what the caller may see (§8.9), without recursion.

    Ancestors are kept up to the first hidden one; a trace that leaves the
    corpus also ends in the boundary marker.  A hidden descendant hides its
    whole subtree behind one marker.
    """
    ancestors: list[Any] = []
    boundary = False
    for record in trace.ancestors:
        if not header_authorized(caller, record.header):
            boundary = True
            break
        ancestors.append(record)
    if not boundary and not trace.complete:
        boundary = True
    descendants: list[tuple[int, Any]] = []
    stack: list[tuple[int, Any]] = [(0, node) for node in reversed(trace.descendants)]
    while stack:
        depth, node = stack.pop()
        if header_authorized(caller, node.session.header):
            descendants.append((depth, node.session))
            stack.extend((depth + 1, child) for child in reversed(node.descendants))
        else:
            descendants.append((depth, None))
    return VisibleLineage(trace.target, ancestors, boundary, descendants)


def session_trace(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The visible lineage around one session (§8.9)."""
    caller, target = _authorized_target(ctx, args.get("session_id"))
    trace = ctx.boundary.call(OP_LINEAGE, lambda: ctx.service.trace_session(target, ctx.signal))
    check_observed(caller, trace.target.header, target)
    lineage = visible_lineage(caller, trace)
    ids = [target]
    ids += [record.header["id"] for record in lineage.ancestors]
    ids += [record.header["id"] for _depth, record in lineage.descendants if record is not None]
    titles = read_titles(ctx, caller, ids)
    return render_lineage(lineage, titles)


# --------------------------------------------------------------------------- exact reads


def session_event_trace(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Replacements and provenance of one event (§8.10)."""
    seq = exact_integer("seq", args["seq"])
    caller, target = _authorized_target(ctx, args.get("session_id"))
    trace = ctx.boundary.call(
        OP_EVENT_TRACE, lambda: ctx.service.trace_event({"sessionId": target, "seq": seq}, ctx.signal)
    )
    check_observed(caller, trace.session, target)
    title = read_titles(ctx, caller, [target])[target]
    return render_event_trace(target, title, trace)


def session_event_read(ctx: ToolContext, args: dict[str, Any]) -> str:
    """One whole event plus optional neighbour summaries (§8.10)."""
    seq = exact_integer("seq", args["seq"])
    before = exact_integer("before", args.get("before"))
    after = exact_integer("after", args.get("after"))
    caller, target = _authorized_target(ctx, args.get("session_id"))
    request: dict[str, Any] = {"sessionId": target, "seq": seq}
    if before is not None:
        request["before"] = before
    if after is not None:
        request["after"] = after
    if ctx.redact:
        # Redacted by the service with each chunk's run as context: a secret streamed in pieces
        # leaves none of them (the rendered text is redacted again as a whole by the host).
        window = ctx.boundary.call(OP_EVENT_READ, lambda: ctx.service.read_event(request, ctx.signal, redact=True))
    else:
        window = ctx.boundary.call(OP_EVENT_READ, lambda: ctx.service.read_event(request, ctx.signal))
    check_observed(caller, window.session, target)
    title = read_titles(ctx, caller, [target])[target]
    return render_event_read(target, title, window)
