"""Decompression bombs: real zstd frames that expand far past the frame plaintext bound,
and a way to measure the peak memory of a command (and of its worker processes).

``python -m tests.bombs CMD...`` runs CMD, polls the peak resident set (``VmHWM``)
of every process below it while it runs, and prints one JSON object: the exit
status, the output, the command's own peak (``RUSAGE_CHILDREN`` of this fresh
process, exact) and the largest peak seen anywhere in its process tree.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import zstandard

from tests.logfactory import header, simple_turn, write_log
from tests.proctree import descendants, peak_rss_kib

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
RLE_BLOCK_BYTES = 128 << 10  # the largest block (Block_Maximum_Size)
_WINDOW_1MIB = bytes([(20 - 10) << 3])  # window descriptor: 2**20 bytes


def rle_frame(size: int, byte: bytes = b"\0", declared: int | None = None) -> bytes:
    """One valid frame of RLE blocks regenerating ``size`` copies of ``byte`` (four bytes per 128 KiB).

    ``declared`` is the content size the header states (``None``: none, as a
    streaming writer leaves it); it may be false, which only a decoder finds out.
    """
    full, rest = divmod(size, RLE_BLOCK_BYTES)
    if full and not rest:
        full, rest = full - 1, RLE_BLOCK_BYTES

    def block(length: int, last: bool) -> bytes:
        return (int(last) | (1 << 1) | (length << 3)).to_bytes(3, "little") + byte

    blocks = block(RLE_BLOCK_BYTES, False) * full + block(rest, True)
    if declared is None:
        head = bytes([0x00]) + _WINDOW_1MIB
    else:
        head = bytes([0xC0]) + _WINDOW_1MIB + declared.to_bytes(8, "little")  # 8-byte content size field
    return ZSTD_MAGIC + head + blocks


def compressed_bomb(size: int, byte: bytes = b"\0") -> bytes:
    """``size`` copies of ``byte`` through a real streaming compressor (no content size in the header)."""
    compressor = zstandard.ZstdCompressor(level=1, write_checksum=True).compressobj()
    chunk = byte * (1 << 20)
    whole, rest = divmod(size, len(chunk))
    parts = [compressor.compress(chunk) for _ in range(whole)]
    parts += [compressor.compress(chunk[:rest]), compressor.flush()]
    return b"".join(parts)


def root_with_bomb(root: Path, bomb: bytes, healthy: int = 3, bomb_id: str = "bomb") -> Path:
    """``healthy`` well-formed sessions and one whose log ends with the ``bomb`` frame; returns the bomb log."""
    for index in range(healthy):
        write_log(root, header(f"healthy-{index}"), [simple_turn(), simple_turn(9, "a second turn")])
    path = write_log(root, header(bomb_id), [simple_turn()])
    with open(path, "ab") as fh:
        fh.write(bomb)
    return path


class Measured(msgspec.Struct):
    """What ``python -m tests.bombs`` reports about one command."""

    returncode: int
    stdout: str
    stderr: str
    peak_mib: float  # the command process itself
    tree_peak_mib: float  # the largest of the command and every process below it


def run_measured(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120) -> Measured:
    """Run ``args`` under a fresh measuring process (see the module docstring)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    repo = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-m", "tests.bombs", *args], capture_output=True, text=True, cwd=cwd or repo, env=full_env, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"the measuring process failed: {result.stderr}")
    return msgspec.json.decode(result.stdout, type=Measured)


def _tree_peak_kib(root_pid: int) -> int:
    return max(peak_rss_kib(pid) for pid in [root_pid, *descendants(root_pid)])


def _main(args: list[str]) -> None:
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = 0
    # The pipes could fill while we poll: read them on threads, not at the end.
    outputs: dict[str, bytes] = {}

    def drain(name: str, stream: Any) -> None:
        outputs[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(name, stream)) for name, stream in (("out", process.stdout), ("err", process.stderr))]
    for reader in readers:
        reader.start()
    while process.poll() is None:
        peak = max(peak, _tree_peak_kib(process.pid))
        time.sleep(0.01)
    for reader in readers:
        reader.join()
    own = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    report = {
        "returncode": process.returncode,
        "stdout": outputs["out"].decode(errors="replace"),
        "stderr": outputs["err"].decode(errors="replace"),
        "peak_mib": own / 1024,
        "tree_peak_mib": max(own, peak) / 1024,
    }
    sys.stdout.write(json.dumps(report))


if __name__ == "__main__":
    _main(sys.argv[1:])
