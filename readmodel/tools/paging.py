"""Internal paging: the search tools read every page themselves, up to a cap.

The model never sees a cursor.  A search tool asks the provider for the first
page, then follows ``next_cursor`` until the provider has no more pages or
one accepted hit more than ``max_results`` has been seen.  Hits the tool does
not accept (the caller's own session, another workspace) do not count.  The
provider's default page size applies (no limit is ever sent).

A provider that hands back a continuation it already gave in the same call
would loop forever; that is refused with ``SESSION_QUERY_INVALID_CURSOR``.
A provider failure mid-way (e.g. a stale cursor) is reported, not retried.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from msgspec import UNSET

from readmodel.tools.boundary import ServiceBoundary
from readmodel.tools.errors import INVALID_CURSOR, ToolError

T = TypeVar("T")


@dataclass(frozen=True)
class Collected(Generic[T]):
    """The accepted hits, and whether at least one more accepted hit exists."""

    items: list[T]
    capped: bool


def _next_cursor(page: Any) -> str | None:
    cursor = getattr(page, "next_cursor", UNSET)
    return None if cursor is UNSET or cursor is None else cursor


def collect_pages(
    boundary: ServiceBoundary,
    operation: str,
    fetch: Callable[[str | None], Any],
    accept: Callable[[Any], bool],
    max_results: int,
    inspect_page: Callable[[Any], None] | None = None,
) -> Collected[Any]:
    """Read pages through ``fetch(cursor)`` (run inside the boundary) until done or capped.

    ``inspect_page`` sees every page before its items (post-observation checks).
    """
    items: list[Any] = []
    seen: set[str] = set()
    cursor: str | None = None
    while True:
        boundary.check()
        page = boundary.call(operation, lambda: fetch(cursor))
        boundary.check()
        if inspect_page is not None:
            inspect_page(page)
        for item in page.items:
            if not accept(item):
                continue
            if len(items) >= max_results:
                return Collected(items, True)
            items.append(item)
        following = _next_cursor(page)
        if following is None:
            return Collected(items, False)
        if following in seen:
            raise ToolError(INVALID_CURSOR, "the search provider returned the same continuation twice")
        seen.add(following)
        cursor = following
