"""Replay validation of a session log (the reference's ``Session.create`` check).

``readSession`` builds a throwaway session from the resolved header and events
to prove the log replays (query-spec §2.3).  A failure is a *plain* error with
the core's message and no query error code; :class:`ReplayError` is that error.

The rules, in the core's order: the header (format-spec §3.2 step 9), then per
event: lossless JSON, the envelope whitelist, ``seq`` equal to its index, the
``request/header`` checks, the message shapes, the retired vocabulary, and the
surface transition.

Only live sessions need this at read time: every persisted session in the
index passed the same restore validation when it was loaded, and one that did
not is stored with its error instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from readmodel.projection.eventmodel import (
    EventShapeError,
    check_envelope,
    check_message_shape,
    check_not_rejected_vocabulary,
    check_request_header,
)
from readmodel.projection.headers import HeaderValidationError, check_restored_header
from readmodel.projection.surface import SurfaceFold, SurfaceFoldError
from readmodel.core.vocabulary import Event, Header


class ReplayError(ValueError):
    """A log that the core refuses to replay (a plain ``Error`` in the reference)."""


def _lossless(value: Any) -> bool:
    """Whether ``value`` survives a JSON round trip unchanged (iterative)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if item is None or kind is bool or kind is int or kind is str:
            continue
        if kind is float:
            if not math.isfinite(item):
                return False
            continue
        if isinstance(item, dict):
            if any(type(key) is not str for key in item):
                return False
            stack.extend(item.values())
            continue
        if isinstance(item, list):
            stack.extend(item)
            continue
        return False
    return True


def validate_replay(session_id: str, header: Header, events: Sequence[Event]) -> None:
    """Raise :class:`ReplayError` unless ``events`` replay under ``header``.

    The ``session/end-seed`` marker the throwaway session would append is not
    part of any output, so nothing is returned.
    """
    try:
        check_restored_header(header, session_id)
    except HeaderValidationError as exc:
        raise ReplayError(exc.message) from exc
    fold = SurfaceFold(track_history=False)
    for index, event in enumerate(events):
        if not _lossless(event):
            raise ReplayError(f"seed event at index {index} is not lossless JSON")
        try:
            check_envelope(event)
            seq = event["seq"]
            if seq != index:
                raise ReplayError(
                    f"seed event at index {index} has seq {seq} (expected {index}); seed must be contiguous from 0"
                )
            check_request_header(event)
            check_message_shape(event)
            check_not_rejected_vocabulary(event)
            fold.apply(event)
        except (EventShapeError, SurfaceFoldError) as exc:
            raise ReplayError(str(exc)) from exc
