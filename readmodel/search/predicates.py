"""Metadata filters as parameterised SQL predicates, within the reference's budgets.

Filters compile to predicates applied before ranking; the outer predicate and
binding budgets are the reference's, so a request it refuses is refused here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final


from readmodel.core.errors import SessionQueryError
from readmodel.store.sources import SOURCE_SUBQUERY


OUTER_PREDICATE_LIMIT: Final = 14
BINDING_LIMIT: Final = 32_766
FIXED_BINDINGS: Final = 10


def budget_error() -> SessionQueryError:
    return SessionQueryError(
        "SESSION_QUERY_INVALID_FILTER",
        f"session-search request exceeds the supported SQLite FTS5 outer-predicate budget of {OUTER_PREDICATE_LIMIT}; reduce filters",
    )


def binding_error() -> SessionQueryError:
    return SessionQueryError(
        "SESSION_QUERY_INVALID_FILTER",
        f"session-search request exceeds the portable SQLite binding limit of {BINDING_LIMIT}; reduce filter values",
    )


class Where:
    """Fragments and bindings of one predicate builder, with its own budgets."""

    def __init__(self) -> None:
        self.fragments: list[str] = []
        self.params: list[Any] = []

    def add(self, fragment: str, params: Sequence[Any] = ()) -> None:
        self.fragments.append(fragment)
        self.params.extend(params)
        if len(self.fragments) > OUTER_PREDICATE_LIMIT:
            raise budget_error()
        if len(self.params) > BINDING_LIMIT:
            raise binding_error()

    def sql(self) -> str:
        return " AND ".join(self.fragments)


def _placeholders(count: int) -> str:
    return ", ".join("?" for _ in range(count))


def _range(where: Where, column: str, clause: Mapping[str, Any]) -> None:
    if "from" in clause:
        where.add(f"CAST({column} AS INTEGER) >= ?", [clause["from"]])
    if "to" in clause:
        where.add(f"CAST({column} AS INTEGER) <= ?", [clause["to"]])


def _nullable_in(where: Where, column: str, values: Sequence[Any]) -> None:
    if not values:
        where.add("0")
        return
    present = [value for value in values if value is not None]
    parts: list[str] = []
    if present:
        parts.append(f"{column} IN ({_placeholders(len(present))})")
    if len(present) != len(values):
        parts.append(f"{column} IS NULL")
    where.add("(" + " OR ".join(parts) + ")", present)


def _plain_in(where: Where, column: str, values: Sequence[Any]) -> None:
    if not values:
        where.add("0")
    else:
        where.add(f"{column} IN ({_placeholders(len(values))})", values)


def session_where(filters: Sequence[Mapping[str, Any]]) -> Where:
    """Session filters as predicates over the ``matched`` rows (search-tools-export-spec §2.6)."""
    where = Where()
    for clause in filters:
        kind = clause["kind"]
        if kind == "id":
            _plain_in(where, "session_id", clause["values"])
        elif kind == "source":
            # A sessionq extension: the sessions a source stored (a live session by its stored row).
            values = clause["values"]
            if not values:
                where.add("0")
            else:
                where.add(f"session_id IN {SOURCE_SUBQUERY.format(marks=_placeholders(len(values)))}", values)
        elif kind in ("cwd", "parent"):
            _nullable_in(where, "cwd" if kind == "cwd" else "parent_session", clause["values"])
        elif kind == "created-at":
            _range(where, "created_at", clause)
        elif kind == "availability":
            values = set(clause["values"])
            if not values:
                where.add("0")
            elif len(values) == 1:
                where.add("live = 1" if "live" in values else "persisted = 1")
        else:
            raise SessionQueryError("SESSION_QUERY_INVALID_FILTER", f'session filter contains unknown kind "{kind}"')
    return where


def event_where(filters: Sequence[Mapping[str, Any]]) -> Where:
    """Event metadata filters as predicates over the ``matched`` rows."""
    where = Where()
    for clause in filters:
        kind = clause["kind"]
        if kind in ("seq", "time"):
            _range(where, kind, clause)
        elif kind in ("type", "surface"):
            _plain_in(where, kind, clause["values"])
        else:
            raise SessionQueryError("SESSION_QUERY_INVALID_FILTER", f'session filter contains unknown kind "{kind}"')
    return where
