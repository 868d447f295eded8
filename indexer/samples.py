"""A small, self-made demo root: what ``scripts/run`` indexes on a machine without logs.

The sessions are invented here (never copied from any corpus) and cover what a
user of sessionq meets: multi-turn work with tool calls, a compaction that
replaces earlier history, a subagent child with lineage, titles, an error turn,
and a session whose last turn was interrupted mid-tool-call (an open tail).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .layout import Compression
from .writer import LogWriter

_BASE_TIME = 1_790_000_000_000


class _Session:
    """Accumulates events with consecutive seqs and plausible timestamps."""

    def __init__(self, session_id: str, cwd: str | None, created: int, **header: Any) -> None:
        self.header: dict[str, Any] = {"version": 0, "id": session_id, "createdAt": created}
        if cwd is not None:
            self.header["cwd"] = cwd
        self.header.update(header)
        self.header.setdefault("delegationDepth", 0)
        self.events: list[dict[str, Any]] = []
        self.batches: list[list[dict[str, Any]]] = [[]]
        self.clock = created
        self.turn = 0
        self.step = 0

    def add(self, etype: str, data: Any, **envelope: Any) -> int:
        if etype in ("turn/start", "step/start") and self.batches[-1]:
            self.batches.append([])
        self.clock += 137
        event = {"type": etype, "seq": len(self.events), "time": self.clock, "data": data, **envelope}
        self.events.append(event)
        self.batches[-1].append(event)
        return event["seq"]

    def prompt(self, text: str) -> int:
        self.turn += 1
        self.step = 0
        self.add("turn/start", {"turn": self.turn})
        message = {"id": f"{self.header['id']}-u{len(self.events)}", "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}}
        return self.add("user/message", message, surfaceOp="append")

    def reply(self, text: str, calls: list[tuple[str, str, dict[str, Any]]] | None = None) -> list[str]:
        self.step += 1
        self.add("step/start", {"turn": self.turn, "step": self.step})
        chunk_seqs = []
        words = text.split(" ")
        for i in range(0, len(words), 3):
            piece = " ".join(words[i : i + 3]) + (" " if i + 3 < len(words) else "")
            chunk_seqs.append(self.add("assistant/chunk", {"turn": self.turn, "step": self.step, "chunk": {"type": "text-delta", "index": 0, "text": piece}}))
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        call_ids = []
        for n, (name, _, args) in enumerate(calls or []):
            call_id = f"call-{self.turn}-{self.step}-{n}"
            call_ids.append(call_id)
            content.append({"type": "tool-call", "id": call_id, "name": name, "arguments": json.dumps(args, separators=(",", ":"))})
        message = {"id": f"{self.header['id']}-a{len(self.events)}", "role": "assistant", "content": content, "source": {"kind": "model", "provider": "demo", "model": "demo-coder"}}
        self.add("assistant/message", {"turn": self.turn, "step": self.step, "message": message}, sourceEventSeqs=chunk_seqs, surfaceOp="append")
        return call_ids

    def run_tool(self, call_id: str, name: str, args: dict[str, Any], output: str, *, finish: bool = True) -> None:
        arguments = json.dumps(args, separators=(",", ":"))
        call_seq = self.add("tool/call", {"turn": self.turn, "step": self.step, "callId": call_id, "name": name, "arguments": arguments})
        if not finish:
            return
        block = {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": output}]}
        message = {"id": f"{self.header['id']}-r{len(self.events)}", "role": "user", "content": [block], "source": {"kind": "tool", "callId": call_id}}
        self.add("tool/result", {"turn": self.turn, "step": self.step, "message": message}, sourceEventSeqs=[call_seq], surfaceOp="append")

    def end_step(self) -> None:
        self.add("step/end", {"turn": self.turn, "step": self.step})

    def end_turn(self, reason: dict[str, Any] | None = None) -> None:
        self.add("turn/end", {"turn": self.turn, "reason": reason or {"kind": "completed"}})

    def title(self, text: str, seqs: list[int]) -> None:
        self.add("session/title", {"title": text, "messageSeqs": seqs, "source": {"kind": "fallback"}})

    def write(self, root: Path, *, torn_tail: bool = False) -> str:
        writer = LogWriter.in_root(root, self.header, Compression.ZSTD)
        writer.write_session(self.header, [b for b in self.batches if b])
        if torn_tail:
            with open(writer.path, "ab") as fh:
                fh.write(writer.encode(b'{"type":"step/end","seq":' + str(len(self.events)).encode())[:-7])
        return writer.path


def _calls(session: _Session, text: str, tools: list[tuple[str, dict[str, Any], str]]) -> None:
    ids = session.reply(text, [(name, "", args) for name, args, _ in tools])
    for call_id, (name, args, output) in zip(ids, tools):
        session.run_tool(call_id, name, args, output)
    session.end_step()


def build_sample_root(root: Path) -> list[str]:
    """Write the demo sessions under ``root``; returns their transcript paths."""
    root.mkdir(parents=True, exist_ok=True)
    paths = []

    parser = _Session("demo-config-parser", "/home/demo/config-tool", _BASE_TIME)
    first = parser.prompt("Why does the TOML config parser reject inline tables with trailing commas?")
    parser.title("TOML parser rejects trailing commas", [first])
    _calls(parser, "Let me look at the tokenizer first.", [("read_file", {"path": "src/tokenizer.py"}, "def next_token(self):\n    if ch == ',' and self.peek() == '}':\n        raise ParseError('trailing comma')")])
    parser.reply("The tokenizer raises ParseError on a comma before a closing brace; TOML 1.0 forbids trailing commas in inline tables, so the behaviour is correct.")
    parser.end_step()
    parser.end_turn()
    second = parser.prompt("Make the error message mention the TOML spec section.")
    _calls(parser, "I will update the message.", [("edit_file", {"path": "src/tokenizer.py", "old": "trailing comma", "new": "trailing comma in inline table (TOML 1.0 §inline-tables)"}, "edited 1 line")])
    parser.reply("Done: the ParseError now names the inline-table rule.")
    parser.end_step()
    parser.end_turn()
    compaction = parser.add("compaction/start", {"compactionId": "cmp-1", "turn": None})
    summary_seq = parser.add(
        "compaction/summary",
        {"compactionId": "cmp-1", "summary": [{"type": "text", "text": "Explained the trailing comma rule."}], "shadowedRange": {"start": first, "end": second - 1}, "shadowedSeqs": [], "shadowedTokenCount": 420, "provider": "demo", "model": "demo-coder"},
    )
    shadowed = [e["seq"] for e in parser.events if e.get("surfaceOp") == "append" and first <= e["seq"] < second]
    parser.events[summary_seq]["data"]["shadowedSeqs"] = shadowed
    checkpoint = {"id": "demo-config-parser-checkpoint", "role": "user", "content": [{"type": "text", "text": "Summary so far: the tokenizer correctly rejects trailing commas in inline tables (TOML 1.0)."}], "source": {"kind": "plugin", "plugin": "compact", "compactionId": "cmp-1"}}
    parser.add("user/message", checkpoint, sourceEventSeqs=[compaction, summary_seq, *shadowed], surfaceOp={"op": "replace", "start": shadowed[0], "end": shadowed[-1]})
    parser.add("compaction/end", {"compactionId": "cmp-1", "turn": None})
    paths.append(parser.write(root))

    child = _Session("demo-config-parser-review", "/home/demo/config-tool", _BASE_TIME + 60_000, parentSession="demo-config-parser", origin="subagent", delegationDepth=1)
    child.add("subagent/descriptor", {"version": 2, "mode": "one-shot", "provider": "spawn", "label": "Review the tokenizer change"})
    child.prompt("Review the tokenizer change for regressions.")
    _calls(child, "Running the test suite.", [("bash", {"cmd": "pytest -q tests/test_tokenizer.py"}, "12 passed in 0.31s")])
    child.reply("No regressions: all 12 tokenizer tests pass.")
    child.end_step()
    child.end_turn()
    paths.append(child.write(root))

    deploy = _Session("demo-deploy-pipeline", "/home/demo/infra", _BASE_TIME + 120_000)
    ask = deploy.prompt("Deploy the staging stack and report the health check status.")
    deploy.title("Deploy staging and check health", [ask])
    _calls(deploy, "Starting the deployment.", [("bash", {"cmd": "make deploy ENV=staging"}, "error: health check timed out after 30s")])
    deploy.end_turn({"kind": "error", "error": {"message": "provider rate limit exceeded", "code": "RATE_LIMIT"}})
    deploy.prompt("Retry, and roll back if the health check fails again.")
    ids = deploy.reply("Retrying the deployment with rollback armed.", [("bash", "", {"cmd": "make deploy ENV=staging ROLLBACK=1"})])
    deploy.run_tool(ids[0], "bash", {"cmd": "make deploy ENV=staging ROLLBACK=1"}, "", finish=False)
    paths.append(deploy.write(root, torn_tail=True))

    notes = _Session("demo-scratch-notes", None, _BASE_TIME + 180_000)
    notes.prompt("検索インデックスの設計メモを書いて (write design notes for the search index)")
    notes.reply("索引は SQLite FTS5 を使い、セッションごとに文書を保存します。")
    notes.end_step()
    notes.end_turn()
    paths.append(notes.write(root))
    return paths
