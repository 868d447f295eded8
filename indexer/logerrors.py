"""The errors of reading a log: a log the harness refuses to read, and a line that
cannot be decoded into events (a defect the reader's rules decide about)."""

from __future__ import annotations


class LogFormatError(ValueError):
    """A transcript the harness refuses to read.

    ``kind`` is ``corrupt`` or ``unsupported`` (an intact log this build must
    not interpret).  ``stage`` records where the harness would have failed —
    ``parse``, ``identity``, ``coordinator`` or ``restore`` — which decides
    how the query side reports it.
    """

    def __init__(self, message: str, *, kind: str = "corrupt", stage: str = "parse") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.stage = stage


class RecordError(ValueError):
    """One line cannot be decoded into events (an unparsable-line defect)."""


class NullLineError(LogFormatError):
    """A line holding the JSON literal ``null``: the reference crashes on it."""
