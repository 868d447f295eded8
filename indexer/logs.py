"""The indexer's log lines and its progress bar, both on stderr.

Log records of the ``sessionq`` loggers carry structured ``fields``; they print
as ``key=value`` lines (or JSON lines with ``--log-format json``).  While the
initial build shows a progress bar, log lines are printed above it.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO




log = logging.getLogger("sessionq.daemon")


# -- log lines -----------------------------------------------------------------------------


class _KeyValueFormatter(logging.Formatter):
    """``2026-01-01T12:00:00.123Z INFO sessionq.daemon reconcile kind=paths events=3 ...``"""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        text = f"{stamp} {record.levelname} {record.name} {record.getMessage()}"
        fields = getattr(record, "fields", None)
        if fields:
            text += " " + " ".join(f"{key}={_kv(value)}" for key, value in fields.items())
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def _kv(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")  # 12.5, 44970.25: never exponent notation
    text = str(value)
    return json.dumps(text) if (not text or any(ch.isspace() or ch in '="' for ch in text)) else text


class _JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg`` and the fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to stderr, or above a live progress bar when one is shown."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.console: Any = None  # a rich Console while a progress bar is live

    def emit(self, record: logging.LogRecord) -> None:
        if self.console is None:
            super().emit(record)
            return
        try:
            self.console.print(self.format(record), markup=False, highlight=False, soft_wrap=True)
        except Exception:  # noqa: BLE001 - logging must never break indexing
            self.handleError(record)


_handler: _StderrHandler | None = None


def configure_logging(level: str = "info", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Route the ``sessionq`` loggers to stderr as key=value lines or JSON lines."""
    global _handler
    root = logging.getLogger("sessionq")
    if _handler is not None:
        root.removeHandler(_handler)
    _handler = _StderrHandler(stream or sys.stderr)
    _handler.setFormatter(_JsonFormatter() if fmt == "json" else _KeyValueFormatter())
    root.addHandler(_handler)
    root.setLevel(level.upper())
    root.propagate = False


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[int, int, int], None] | None]:
    """A rich progress bar on stderr for the initial pass (only on a terminal)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    progress = Progress(
        SpinnerColumn(),
        TextColumn("[bold]indexing[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("sessions · {task.fields[events]:,} events · {task.fields[rate]:,.0f} events/s"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    started = time.perf_counter()
    task = progress.add_task("index", total=None, events=0, rate=0.0)

    def update(done: int, total: int, events: int) -> None:
        elapsed = max(time.perf_counter() - started, 1e-6)
        progress.update(task, completed=done, total=total, events=events, rate=events / elapsed)

    if _handler is not None:
        _handler.console = console
    try:
        with progress:
            yield update
    finally:
        if _handler is not None:
            _handler.console = None
