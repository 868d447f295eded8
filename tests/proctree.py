"""The processes below a process, read from ``/proc`` (Linux): for tests of worker processes."""

from __future__ import annotations

import os


def children_by_parent() -> dict[int, list[int]]:
    """Every live process's children, by parent pid."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # gone meanwhile
        # The command name is parenthesised and may hold spaces: the fields after it are plain.
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children, their children, ...), not ``pid`` itself."""
    tree = children_by_parent()
    found: list[int] = []
    pending = list(tree.get(pid, []))
    while pending:
        child = pending.pop()
        found.append(child)
        pending += tree.get(child, [])
    return found


def command_line(pid: int) -> str:
    """The process's arguments joined by spaces ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] != b"Z"


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set so far (``VmHWM``), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for row in fh:
                if row.startswith(b"VmHWM:"):
                    return int(row.split()[1])
    except OSError:
        pass
    return 0
