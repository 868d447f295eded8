"""Frozen-message event snapshots (the reference's ``snapshotSessionEvent``).

Reads that return whole events (``readSession``, ``readSurface``, ``readEvent``)
hand out snapshots: the event wrapper is a fresh, mutable ``dict``; its message
part is a deep copy that refuses mutation, as the reference deep-freezes it:

* ``user/message``: ``event["data"]``;
* ``assistant/message`` and ``tool/result``: ``event["data"]["message"]``.

Frozen values are ``dict``/``list`` subclasses, so they compare equal to plain
JSON values and ``msgspec``/``json`` encode them unchanged; every mutating
method raises :class:`TypeError` (what a strict-mode JS assignment to a frozen
object throws).
"""

from __future__ import annotations

from typing import Any, NoReturn

from readmodel.projection.eventmodel import check_message_shape
from readmodel.projection.lineage import clone_json


def _refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError("cannot modify a frozen session message")


class FrozenDict(dict):  # type: ignore[type-arg]
    """A ``dict`` that cannot be modified after construction."""

    __slots__ = ()
    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        # copy/pickle would otherwise rebuild the dict through __setitem__.
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> dict[str, Any]:
        return dict(self)


class FrozenList(list):  # type: ignore[type-arg]
    """A ``list`` that cannot be modified after construction."""

    __slots__ = ()
    __setitem__ = __delitem__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> list[Any]:
        return list(self)


def freeze(value: Any) -> Any:
    """A deep, frozen copy of a JSON value (iterative: no recursion limit)."""
    if not isinstance(value, (dict, list)):
        return value
    # Build bottom-up: collect containers depth-first, then freeze children first.
    order: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        order.append(item)
        children = item.values() if isinstance(item, dict) else item
        stack.extend(child for child in children if isinstance(child, (dict, list)))
    frozen: dict[int, Any] = {}
    for item in reversed(order):
        if isinstance(item, dict):
            frozen[id(item)] = FrozenDict(
                (key, frozen[id(child)] if isinstance(child, (dict, list)) else child) for key, child in item.items()
            )
        else:
            frozen[id(item)] = FrozenList(
                frozen[id(child)] if isinstance(child, (dict, list)) else child for child in item
            )
    return frozen[id(value)]


def _message_holder(event: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Where the frozen message part lives: ``(container, key)`` or ``None``."""
    etype = event.get("type")
    data = event.get("data")
    if etype == "user/message":
        return event, "data"
    if (etype == "assistant/message" or etype == "tool/result") and type(data) is dict and "message" in data:
        return data, "message"
    return None


def snapshot_event(event: dict[str, Any], *, copy: bool = True, check: bool = True) -> dict[str, Any]:
    """``snapshotSessionEvent``: a detached event whose message part is frozen.

    ``copy`` deep-copies the wrapper first (needed for events borrowed from a
    live session; events freshly decoded from the index are already private).
    ``check`` runs the message-shape validation and raises
    :class:`readmodel.projection.eventmodel.EventShapeError` (a plain ``ValueError``, the
    reference's plain ``Error``) for a malformed message event; the index only
    holds events that already passed it.
    """
    if check:
        check_message_shape(event)
    if copy:
        event = clone_json(event)
    holder = _message_holder(event)
    if holder is not None:
        container, key = holder
        if container is not event:
            # ``data`` stays a mutable wrapper; only its message is frozen.
            container = dict(container)
            event["data"] = container
        container[key] = freeze(container[key])
    return event
