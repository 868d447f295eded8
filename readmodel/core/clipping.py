"""Bounding values from session logs in human-facing messages.

A log's header carries the session id (and parent id, cwd, event types) as
free JSON strings, so a hostile or broken log can make one of them megabytes
long.  Error and problem messages quote such values; quoting them whole would
make every message, every ``status`` report and every log line that repeats
them just as large.  Values up to :data:`LONG_VALUE_CHARS` code points are
quoted verbatim, so the reference's messages for ordinary ids stay
byte-identical; longer ones keep their first :data:`KEPT_CHARS` code points
and say how long they were.
"""

from __future__ import annotations

from typing import Any, Final

LONG_VALUE_CHARS: Final = 256
"""The longest value quoted whole (code points)."""

KEPT_CHARS: Final = 64
"""How much of a longer value is kept (code points)."""

PATH_MAX_CHARS: Final = 4096
"""Linux's ``PATH_MAX``: a longer "path" was built from log content, not found on disk."""

LONG_MESSAGE_CHARS: Final = 4096
"""The longest stored message a report shows whole (older indexes may hold longer ones)."""


def clip(text: str, limit: int = LONG_VALUE_CHARS, keep: int = KEPT_CHARS) -> str:
    """``text`` itself when at most ``limit`` code points, else its first ``keep`` plus ``…(N chars)``."""
    if len(text) <= limit:
        return text
    return f"{text[:keep]}…({len(text)} chars)"


def clip_repr(value: Any) -> str:
    """``repr(value)``, with a long string clipped inside its quotes (any other long repr clipped as text)."""
    if isinstance(value, str):
        return repr(clip(value))
    return clip(repr(value))


def clip_path(path: str) -> str:
    """A path quoted whole unless it exceeds :data:`PATH_MAX_CHARS` (then its first 256 code points)."""
    return clip(path, PATH_MAX_CHARS, LONG_VALUE_CHARS)


def clip_message(text: str) -> str:
    """A stored message bounded for display: the first :data:`LONG_MESSAGE_CHARS` code points."""
    return clip(text, LONG_MESSAGE_CHARS, LONG_MESSAGE_CHARS)
