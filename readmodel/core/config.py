"""Query-engine configuration and its validation (query-spec §7).

Two knobs, both validated when the engine is constructed (synchronously; an
invalid value means no engine is created):

``readWindowMax`` (default 50)
    Upper bound of ``before``/``after`` in ``readEvent``.  JS
    ``Number.isInteger(v) && v >= 0``: zero and integers beyond the
    safe-integer range are allowed; NaN, infinities, fractions, booleans and
    non-numbers are not.
``persistedInspectConcurrency`` (default 4)
    Upper bound of concurrent persisted inspections in title batches.  JS
    ``Number.isSafeInteger(v) && v >= 1``.

A key that is absent *or* ``None`` takes its default (JS ``??``); a missing
config means ``{}``.  ``readWindowMax`` is checked first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from readmodel.core.errors import SessionQueryError
from readmodel.core.jsvalues import is_integer, is_safe_integer

SESSION_QUERY_READ_WINDOW_MAX: Final = 50
SESSION_QUERY_DEFAULT_PERSISTED_INSPECT_CONCURRENCY: Final = 4

# Python callers may spell the keys either way; the reference spelling wins
# when both are present.
_KEYS: Final = (
    ("readWindowMax", "read_window_max"),
    ("persistedInspectConcurrency", "persisted_inspect_concurrency"),
)


@dataclass(frozen=True, slots=True)
class QueryConfig:
    """A validated configuration (every field holds its effective value)."""

    read_window_max: int = SESSION_QUERY_READ_WINDOW_MAX
    persisted_inspect_concurrency: int = SESSION_QUERY_DEFAULT_PERSISTED_INSPECT_CONCURRENCY


def _invalid(message: str) -> SessionQueryError:
    return SessionQueryError("SESSION_QUERY_INVALID_CONFIG", f"session-query: {message}")


def _lookup(config: Mapping[str, Any], keys: tuple[str, str]) -> Any:
    for key in keys:
        value = config.get(key)
        if value is not None:
            return value
    return None


def validate_config(config: Mapping[str, Any] | QueryConfig | None = None) -> QueryConfig:
    """Validate a raw configuration and return the effective :class:`QueryConfig`.

    Accepts ``None``, a mapping with the reference's camelCase keys (or their
    snake_case spelling), or a :class:`QueryConfig` (re-validated, since a
    dataclass does not check its fields).  Raises ``SESSION_QUERY_INVALID_CONFIG``
    with the reference's message for the first invalid key.
    """
    if config is None:
        return QueryConfig()
    if isinstance(config, QueryConfig):
        raw: Mapping[str, Any] = {
            "readWindowMax": config.read_window_max,
            "persistedInspectConcurrency": config.persisted_inspect_concurrency,
        }
    elif isinstance(config, Mapping):
        raw = config
    else:
        # The reference reads ``config?.key``: a non-object has no keys, so
        # every default applies.
        raw = {}
    window = _lookup(raw, _KEYS[0])
    if window is None:
        window = SESSION_QUERY_READ_WINDOW_MAX
    elif not (is_integer(window) and window >= 0):
        raise _invalid("readWindowMax must be a non-negative integer")
    concurrency = _lookup(raw, _KEYS[1])
    if concurrency is None:
        concurrency = SESSION_QUERY_DEFAULT_PERSISTED_INSPECT_CONCURRENCY
    elif not (is_safe_integer(concurrency) and concurrency >= 1):
        raise _invalid("persistedInspectConcurrency must be a positive safe integer")
    # Integral floats (JSON ``2.0``) are the same JS number as ``2``.
    return QueryConfig(read_window_max=int(window), persisted_inspect_concurrency=int(concurrency))
