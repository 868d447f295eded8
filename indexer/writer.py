"""A harness-compatible transcript writer, for samples, tests and benchmarks.

sessionq never writes the logs it indexes.  This writer exists so the project
can produce realistic logs of its own (demo roots, torn-tail and growth tests,
benchmark corpora) in exactly the harness's on-disk form: a header frame, one
frame (or one block of lines) per append batch, and ``assistant/chunk`` runs of
three or more packed into rows (format-spec §2, §3.1, §4.4).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec
import zstandard

from readmodel.core.jsvalues import is_non_negative_safe_integer, is_number, is_record, is_safe_integer

from .layout import Compression, expected_transcript_path

_encode: Final = msgspec.json.Encoder().encode
_HEADER_ORDER: Final = ("version", "id", "createdAt", "cwd", "parentSession", "seedLength", "origin", "delegationDepth", "agentPreset")
_ROW_TAG: Final = {"text-delta": "text-chunks", "reasoning-delta": "reasoning-chunks", "tool-call-delta": "tool-call-chunks"}
_MIN_RUN: Final = 3


def header_line(header: dict[str, Any]) -> bytes:
    """Serialise a header in the writer's key order (``delegationDepth`` defaults to 0)."""
    record: dict[str, Any] = {"type": "session"}
    for key in _HEADER_ORDER:
        if key in header:
            record[key] = header[key]
        elif key == "delegationDepth":
            record[key] = 0
    return _encode(record) + b"\n"


def _packable(event: Any) -> tuple[Any, ...] | None:
    """The run key of a packable chunk event, or ``None`` (format-spec §4.4)."""
    if not is_record(event) or event.get("type") != "assistant/chunk" or event.keys() != {"type", "seq", "time", "data"}:
        return None
    data = event["data"]
    if not is_non_negative_safe_integer(event["seq"]) or not is_safe_integer(event["time"]) or not is_record(data):
        return None
    if data.keys() != {"turn", "step", "chunk"} or not is_number(data["turn"]) or not is_number(data["step"]):
        return None
    chunk = data["chunk"]
    if not is_record(chunk) or not is_number(chunk.get("index")):
        return None
    kind = chunk.get("type")
    if kind in ("text-delta", "reasoning-delta"):
        if chunk.keys() != {"type", "index", "text"} or type(chunk["text"]) is not str:
            return None
        return (kind, data["turn"], data["step"], chunk["index"])
    if kind == "tool-call-delta":
        keys = chunk.keys()
        if keys not in ({"type", "index", "id", "argumentsDelta"}, {"type", "index", "id", "name", "argumentsDelta"}):
            return None
        if type(chunk["id"]) is not str or type(chunk["argumentsDelta"]) is not str:
            return None
        if "name" in chunk and type(chunk["name"]) is not str:
            return None
        return (kind, data["turn"], data["step"], chunk["index"], chunk["id"], "name" in chunk, chunk.get("name"))
    return None


def _row(run: list[dict[str, Any]]) -> dict[str, Any]:
    first = run[0]
    chunk = first["data"]["chunk"]
    kind = chunk["type"]
    data: dict[str, Any] = {"turn": first["data"]["turn"], "step": first["data"]["step"], "index": chunk["index"]}
    gaps = [run[i]["time"] - run[i - 1]["time"] for i in range(1, len(run))]
    if kind == "tool-call-delta":
        data["dt"] = gaps
        data["id"] = chunk["id"]
        if "name" in chunk:
            data["name"] = chunk["name"]
        data["args"] = [e["data"]["chunk"]["argumentsDelta"] for e in run]
    else:
        data["dt"] = gaps
        data["texts"] = [e["data"]["chunk"]["text"] for e in run]
    return {"type": _ROW_TAG[kind], "seq0": first["seq"], "time0": first["time"], "data": data}


def pack_records(events: Sequence[dict[str, Any]], pack: bool = True) -> list[dict[str, Any]]:
    """The stored records of one batch: runs of 3+ chunk deltas packed into rows."""
    if not pack:
        return list(events)
    records: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    run_key: tuple[Any, ...] | None = None

    def flush() -> None:
        if len(run) >= _MIN_RUN:
            records.append(_row(run))
        else:
            records.extend(run)
        run.clear()

    for event in events:
        key = _packable(event)
        if (
            key is not None
            and run
            and key == run_key
            and event["seq"] == run[-1]["seq"] + 1
            and is_safe_integer(event["time"] - run[-1]["time"])
        ):
            run.append(event)
            continue
        flush()
        if key is not None:
            run.append(event)
            run_key = key
        else:
            records.append(event)
            run_key = None
    flush()
    return records


def batch_bytes(events: Sequence[dict[str, Any]], pack: bool = True) -> bytes:
    """The logical bytes of one append batch: records joined by LF, LF-terminated."""
    return b"".join(_encode(record) + b"\n" for record in pack_records(events, pack))


class LogWriter:
    """Appends batches to one transcript in the harness's physical form."""

    def __init__(self, path: str | os.PathLike[str], compression: Compression = Compression.ZSTD, *, pack: bool = True, level: int = 3) -> None:
        self.path = os.fspath(path)
        self.compression = compression
        self.pack = pack
        self._compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)

    @classmethod
    def in_root(cls, root: str | os.PathLike[str], header: dict[str, Any], compression: Compression = Compression.ZSTD, **options: Any) -> "LogWriter":
        """A writer for the transcript path the harness would use for ``header``."""
        return cls(expected_transcript_path(root, header, compression), compression, **options)

    def encode(self, plaintext: bytes) -> bytes:
        """One physical write unit: a checksummed frame (zstd) or the plain bytes."""
        return self._compressor.compress(plaintext) if self.compression is Compression.ZSTD else plaintext

    def create(self, header: dict[str, Any], first_batch: Sequence[dict[str, Any]]) -> None:
        """Create the transcript with its header and first batch (never an empty file)."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "wb") as fh:
            fh.write(self.encode(header_line(header)))
            fh.write(self.encode(batch_bytes(first_batch, self.pack)))

    def append(self, batch: Sequence[dict[str, Any]]) -> int:
        """Append one batch; returns the number of bytes written."""
        data = self.encode(batch_bytes(batch, self.pack))
        with open(self.path, "ab") as fh:
            fh.write(data)
        return len(data)

    def write_session(self, header: dict[str, Any], batches: Iterable[Sequence[dict[str, Any]]]) -> None:
        """Create the transcript and append every further batch."""
        batches = iter(batches)
        self.create(header, next(batches, []))
        for batch in batches:
            self.append(batch)
