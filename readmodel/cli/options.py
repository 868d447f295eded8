"""Options and plumbing the read commands share: filters as flags, opening the engine, output.

Filters come as flags and/or ``--filters JSON`` (the reference's filter
array verbatim; flag clauses are appended after it).  Time flags take what
people type (:mod:`readmodel.cli.inputs`); ``--type`` values are checked
against the known event types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
import msgspec

from readmodel.cli.inputs import NUMBER, TIME_FROM, TIME_HELP, TIME_TO, check_event_types, resolve_id
from readmodel.cli.support import emit_json

F = TypeVar("F", bound=Callable[..., Any])


def open_engine(db: str) -> Any:
    from readmodel.query import SessionQuery

    return SessionQuery.open(db)


def open_session(db: str, session_id: str) -> tuple[Any, str]:
    """The engine and the session id a person meant (a unique prefix resolves; see :func:`resolve_id`)."""
    engine = open_engine(db)
    return engine, resolve_id(engine, session_id)


def builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)




def filters_json_value(text: str | None) -> list[Any]:
    """``--filters JSON``: the reference's filter array verbatim (validated by the engine)."""
    if text is None:
        return []
    try:
        value = msgspec.json.decode(text.encode())
    except msgspec.DecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--filters") from exc
    # A non-array is passed on: the engine answers SESSION_QUERY_INVALID_FILTER.
    return value


def range_clause(kind: str, low: Any, high: Any) -> list[dict[str, Any]]:
    if low is None and high is None:
        return []
    clause: dict[str, Any] = {"kind": kind}
    if low is not None:
        clause["from"] = low
    if high is not None:
        clause["to"] = high
    return [clause]


def values_clause(kind: str, values: tuple[str, ...], with_null: bool = False) -> list[dict[str, Any]]:
    if not values and not with_null:
        return []
    return [{"kind": kind, "values": [*values, *([None] if with_null else [])]}]


def combine(base: Any, extra: list[dict[str, Any]]) -> Any:
    if not extra:
        return base
    if isinstance(base, list):
        return [*base, *extra]
    return base  # invalid --filters: let the engine report it


def option_group(*options: Callable[[F], F]) -> Callable[[F], F]:
    """Apply a group of click options (in the order they are listed in --help)."""

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


session_filter_options = option_group(
    click.option("--id", "ids", multiple=True, help="Only these session ids (repeatable)."),
    click.option("--cwd", "cwds", multiple=True, help="Only sessions in this working directory (repeatable)."),
    click.option("--no-cwd", is_flag=True, help="Also match sessions without a cwd."),
    click.option("--parent", "parents", multiple=True, help="Only children of this session (repeatable)."),
    click.option("--no-parent", is_flag=True, help="Also match sessions without a parent."),
    click.option("--created-from", type=TIME_FROM, help=f"Created at or after this time ({TIME_HELP}).", metavar="TIME"),
    click.option("--created-to", type=TIME_TO, help="Created at or before this time (a date alone: the end of that day).", metavar="TIME"),
    click.option("--source", "sources", multiple=True, metavar="NAME", help="Only sessions indexed by this source (repeatable; a sessionq extension)."),
)

event_filter_options = option_group(
    click.option("--seq-from", type=NUMBER, help="Event seq lower bound (inclusive)."),
    click.option("--seq-to", type=NUMBER, help="Event seq upper bound (inclusive)."),
    click.option("--time-from", type=TIME_FROM, help=f"Events at or after this time ({TIME_HELP}).", metavar="TIME"),
    click.option("--time-to", type=TIME_TO, help="Events at or before this time.", metavar="TIME"),
    click.option("--type", "types", multiple=True, help="Only events of this type, e.g. user/message, assistant/message, tool/result (repeatable; a wrong one lists them all)."),
    click.option(
        "--surface", "surfaces", multiple=True, type=click.Choice(["current", "shadowed", "log-only"]), help="Only this surface (repeatable)."
    ),
)


def session_clauses(options: dict[str, Any]) -> list[dict[str, Any]]:
    """Session filter clauses from the ``session_filter_options`` values (consumed)."""
    return [
        *values_clause("id", options.pop("ids")),
        *values_clause("cwd", options.pop("cwds"), options.pop("no_cwd")),
        *range_clause("created-at", options.pop("created_from"), options.pop("created_to")),
        *values_clause("parent", options.pop("parents"), options.pop("no_parent")),
        *values_clause("source", options.pop("sources")),
    ]


def _checked(types: tuple[str, ...]) -> tuple[str, ...]:
    check_event_types(types)
    return types


def event_clauses(options: dict[str, Any]) -> list[dict[str, Any]]:
    """Event metadata clauses from the ``event_filter_options`` values (consumed)."""
    return [
        *range_clause("seq", options.pop("seq_from"), options.pop("seq_to")),
        *range_clause("time", options.pop("time_from"), options.pop("time_to")),
        *values_clause("type", _checked(options.pop("types"))),
        *values_clause("surface", options.pop("surfaces")),
    ]


def show(value: Any, as_json: bool, printer: str, **extra: Any) -> None:
    """The exact JSON with ``--json``, else the named table printer of :mod:`readmodel.cli.presentation`."""
    if as_json:
        emit_json(value)
        return
    from readmodel.cli import presentation

    getattr(presentation, printer)(builtins(value), **extra)


