"""Search configuration (search-tools-export-spec §7) and its validation."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from readmodel.core.errors import SessionQueryError
from readmodel.core.jsvalues import (
    MAX_SAFE_INTEGER,
    is_safe_integer,
)


MAX_PAGE_LIMIT: Final = MAX_SAFE_INTEGER - 1
OPEN_AT_VALUES: Final = ("startup", "first-search", "never")
JOURNAL_MODES: Final = ("wal", "delete", "truncate", "persist")


class SearchConfig(msgspec.Struct, frozen=True):
    """Validated provider configuration (search-tools-export-spec §7)."""

    default_limit: int = 20
    max_limit: int = 100
    snippet_chars: int = 240
    open_at: str = "startup"
    journal_mode: str = "wal"


def _config_error(detail: str) -> SessionQueryError:
    return SessionQueryError("SESSION_QUERY_INVALID_CONFIG", f"session-search SQLite config: {detail}")


def _limit_setting(raw: Mapping[str, Any], key: str, default: int) -> int:
    value = raw.get(key)
    if value is None:
        return default
    if not (is_safe_integer(value) and 1 <= value <= MAX_PAGE_LIMIT):
        raise _config_error(f"{key} must be an integer between 1 and {MAX_PAGE_LIMIT}")
    return int(value)


def search_config(raw: Mapping[str, Any] | None = None) -> SearchConfig:
    """Validate search settings in the reference's order; absent or null keys take defaults."""
    raw = raw or {}
    open_at = raw.get("openAt")
    if open_at is None:
        open_at = "startup"
    if open_at not in OPEN_AT_VALUES:
        raise _config_error("openAt must be startup, first-search or never")
    default_limit = _limit_setting(raw, "defaultLimit", 20)
    max_limit = _limit_setting(raw, "maxLimit", 100)
    snippet = raw.get("snippetChars")
    if snippet is None:
        snippet = 240
    elif not (type(snippet) in (int, float) and math.isfinite(snippet) and float(snippet).is_integer() and snippet >= 1):
        raise _config_error("snippetChars must be a positive integer")
    if default_limit > max_limit:
        raise _config_error("defaultLimit must be less than or equal to maxLimit")
    journal = raw.get("journalMode")
    if journal is None:
        journal = "wal"
    if type(journal) is not str or journal.lower() not in JOURNAL_MODES:
        raise _config_error("journalMode must be wal, delete, truncate or persist")
    return SearchConfig(default_limit, max_limit, int(snippet), open_at, journal.lower())
