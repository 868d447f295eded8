"""Builders for events and transcripts that tests write themselves.

Events follow the harness's current shapes; transcripts are written either
through :class:`indexer.writer.LogWriter` (well-formed) or from raw lines and
frames (to inject exact defects).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import zstandard

from indexer.layout import Compression, expected_transcript_path
from indexer.writer import LogWriter, batch_bytes, header_line

CWD = "/work/project"


def header(session_id: str = "s1", created_at: int = 1, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"version": 0, "id": session_id, "createdAt": created_at, "cwd": CWD}
    out.update(extra)
    if out.get("cwd") is None and "cwd" in extra and extra["cwd"] is None:
        del out["cwd"]
    out.setdefault("delegationDepth", 0)
    return out


def ev(etype: str, seq: int, data: Any, time: int = 1000, **envelope: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"type": etype, "seq": seq, "time": time, "data": data}
    event.update(envelope)
    return event


def turn_start(seq: int, turn: int = 1) -> dict[str, Any]:
    return ev("turn/start", seq, {"turn": turn})


def turn_end(seq: int, turn: int = 1, kind: str = "completed") -> dict[str, Any]:
    return ev("turn/end", seq, {"turn": turn, "reason": {"kind": kind}})


def step_start(seq: int, turn: int = 1, step: int = 1) -> dict[str, Any]:
    return ev("step/start", seq, {"turn": turn, "step": step})


def step_end(seq: int, turn: int = 1, step: int = 1) -> dict[str, Any]:
    return ev("step/end", seq, {"turn": turn, "step": step})


def user(seq: int, text: str, *, msg_id: str | None = None, surface_op: Any = "append", sources: list[int] | None = None) -> dict[str, Any]:
    data = {"id": msg_id or f"u{seq}", "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}}
    event = ev("user/message", seq, data)
    if sources is not None:
        event["sourceEventSeqs"] = sources
    event["surfaceOp"] = surface_op
    return event


def assistant(seq: int, text: str = "", *, calls: Sequence[tuple[str, str, str]] = (), step: int = 1, turn: int = 1, sources: list[int] | None = None, surface_op: Any = "append") -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool-call", "id": cid, "name": name, "arguments": args} for cid, name, args in calls]
    message = {"id": f"a{seq}", "role": "assistant", "content": content, "source": {"kind": "model", "provider": "p", "model": "m"}}
    event = ev("assistant/message", seq, {"turn": turn, "step": step, "message": message})
    if sources is not None:
        event["sourceEventSeqs"] = sources
    event["surfaceOp"] = surface_op
    return event


def tool_call(seq: int, call_id: str, name: str = "bash", arguments: str = "{}", step: int = 1, turn: int = 1) -> dict[str, Any]:
    return ev("tool/call", seq, {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments})


def tool_result(seq: int, call_id: str, text: str, *, step: int = 1, turn: int = 1, msg_id: str | None = None, surface_op: Any = "append", sources: list[int] | None = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
    block = {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}]}
    message = {"id": msg_id or f"r{seq}", "role": "user", "content": [block], "source": {"kind": "tool", "callId": call_id}}
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
    if error is not None:
        data["error"] = error
    event = ev("tool/result", seq, data)
    if sources is not None:
        event["sourceEventSeqs"] = sources
    event["surfaceOp"] = surface_op
    return event


def chunk(seq: int, text: str, *, index: int = 0, kind: str = "text-delta", time: int = 1000, step: int = 1) -> dict[str, Any]:
    return ev("assistant/chunk", seq, {"turn": 1, "step": step, "chunk": {"type": kind, "index": index, "text": text}}, time=time)


def simple_turn(start: int = 0, text: str = "hello") -> list[dict[str, Any]]:
    """A complete turn: start, step, user, chunks, assistant, step end, turn end."""
    s = start
    return [
        turn_start(s),
        user(s + 1, text),
        step_start(s + 2),
        chunk(s + 3, "a"),
        chunk(s + 4, "b"),
        chunk(s + 5, "c"),
        assistant(s + 6, "abc", sources=[s + 3, s + 4, s + 5]),
        step_end(s + 7),
        turn_end(s + 8),
    ]


def line(value: Any) -> bytes:
    """A JSON line as the harness would write it (compact, raw UTF-8)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def transcript_path(root: Path, hdr: dict[str, Any], compression: Compression = Compression.ZSTD) -> Path:
    return Path(expected_transcript_path(root, hdr, compression))


def write_log(root: Path, hdr: dict[str, Any], batches: Iterable[Sequence[dict[str, Any]]], compression: Compression = Compression.ZSTD, pack: bool = True) -> Path:
    """Write a well-formed transcript at its canonical path."""
    writer = LogWriter.in_root(root, hdr, compression, pack=pack)
    writer.write_session(hdr, batches)
    return Path(writer.path)


def frame(data: bytes, checksum: bool = True) -> bytes:
    return zstandard.ZstdCompressor(write_checksum=checksum).compress(data)


def write_frames(path: Path, plaintexts: Sequence[bytes], tail: bytes = b"") -> Path:
    """A zstd transcript from exact plaintexts (one frame each) plus raw trailing bytes."""
    os.makedirs(path.parent, exist_ok=True)
    path.write_bytes(b"".join(frame(p) for p in plaintexts) + tail)
    return path


def write_raw(path: Path, data: bytes) -> Path:
    os.makedirs(path.parent, exist_ok=True)
    path.write_bytes(data)
    return path


def header_bytes(hdr: dict[str, Any]) -> bytes:
    return header_line(hdr)


def events_bytes(events: Sequence[dict[str, Any]], pack: bool = True) -> bytes:
    return batch_bytes(events, pack)
