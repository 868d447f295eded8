"""A planted corpus: one fake but shape-valid secret of every detected kind.

Values are built from a seeded generator (never real credentials) with the
exact shapes :mod:`readmodel.projection.secrets` detects.  Each secret knows
the text a search would try (``query``), a distinctive middle piece and the
marker kind it must become.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from indexer.writer import LogWriter
from readmodel.store.database import open_writer
from tests.logfactory import assistant, chunk, ev, step_end, step_start, tool_call, tool_result, turn_end, turn_start, user

_random = random.Random(22)
ALNUM = string.ascii_letters + string.digits


def _pick(alphabet: str, count: int) -> str:
    return "".join(_random.choice(alphabet) for _ in range(count))


@dataclass(frozen=True)
class Planted:
    kind: str
    text: str  # as it appears in a message
    secret: str  # the part that must never be indexed or shown

    @property
    def middle(self) -> str:
        """A distinctive piece from the middle of the secret."""
        third = len(self.secret) // 3
        return self.secret[third : 2 * third]


def _aws_secret() -> str:
    return _pick(string.ascii_uppercase, 10) + _pick(string.ascii_lowercase, 10) + _pick(ALNUM + "/+", 20)


_AWS_SECRET = _aws_secret()
_BEARER = _pick(ALNUM, 40)
_PASSWORD = "Pw" + _pick(ALNUM, 18)
_KEY_LINES = [_pick(ALNUM + "+/", 64) for _ in range(3)]
_PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(_KEY_LINES) + "\n-----END RSA PRIVATE KEY-----"
_JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJ" + _pick(ALNUM, 30) + "." + _pick(ALNUM + "_-", 43)

SECRETS: tuple[Planted, ...] = (
    Planted("private-key", _PEM, _PEM),
    Planted("aws-access-key", (key := "AKIA" + _pick(string.ascii_uppercase + string.digits, 16)), key),
    Planted("aws-secret-key", f"aws_secret_access_key = {_AWS_SECRET}", _AWS_SECRET),
    Planted("github-token", (key := "ghp_" + _pick(ALNUM, 36)), key),
    Planted("github-token", (key := "github_pat_" + _pick(ALNUM, 22) + "_" + _pick(ALNUM, 59)), key),
    Planted("gitlab-token", (key := "glpat-" + _pick(ALNUM, 20)), key),
    Planted("slack-token", (key := "xoxb-" + _pick(string.digits, 12) + "-" + _pick(ALNUM, 24)), key),
    Planted("openai-api-key", (key := "sk-proj-" + _pick(ALNUM, 60)), key),
    Planted("anthropic-api-key", (key := "sk-ant-api03-" + _pick(ALNUM, 80)), key),
    Planted("deepseek-api-key", (key := "sk-" + _pick("0123456789abcdef", 32)), key),
    Planted("google-api-key", (key := "AIza" + _pick(ALNUM, 35)), key),
    Planted("stripe-key", (key := "sk_live_" + _pick(ALNUM, 24)), key),
    Planted("jwt", _JWT, _JWT),
    Planted("bearer-token", f"Authorization: Bearer {_BEARER}", _BEARER),
    Planted("url-password", f"postgres://admin:{_PASSWORD}@db.example.com/app", _PASSWORD),
)


def search_terms(planted: Planted) -> list[str]:
    """What a user would search for to find the secret: itself, its middle, a key line."""
    terms = [planted.secret, planted.middle]
    if planted.kind == "private-key":
        terms += _KEY_LINES
    return terms


def search_modes() -> tuple[str, ...]:
    """The search modes this build has (``phrase`` alone before search modes, issue 17)."""
    from readmodel.search import requests

    return tuple(getattr(requests, "MATCH_MODES", ("phrase",)))


def in_mode(request: dict[str, Any], mode: str) -> dict[str, Any]:
    """``request`` asking for ``mode`` (no ``match`` field for the reference's phrase mode)."""
    return request if mode == "phrase" else {**request, "match": mode}


def planted_events(planted: Planted, index: int) -> list[dict[str, Any]]:
    """One session's events carrying ``planted`` at the start, middle and end of messages,
    in a tool call's JSON arguments, in tool output and split across assistant chunks."""
    words = f"alphaword{index} betaword{index}"
    half = len(planted.text) // 2
    arguments = '{"command": "echo ' + planted.text.replace("\n", "\\n") + '"}'
    return [
        turn_start(0),
        user(1, f"{planted.text} {words} startplace{index}"),
        step_start(2),
        chunk(3, planted.text[:half]),
        chunk(4, planted.text[half:], index=0),
        assistant(5, f"middleplace{index} {words} {planted.text} {words} trailing", calls=[("c1", "bash", arguments)]),
        tool_call(6, "c1", "bash", arguments),
        tool_result(7, "c1", f"$ env\nHOME=/root\nTOKEN_VALUE={planted.text}\nendplace{index} {words}"),
        step_end(8),
        turn_end(9),
        ev("session/title", 10, {"title": f"title {planted.text}", "messageSeqs": [1], "source": {"kind": "user"}}),
    ]


CWD = "/work/project"


def session_id(index: int) -> str:
    return f"planted-{index:02d}"


def write_root(root: Path) -> list[str]:
    """Every planted session under ``root`` (one per kind); their ids, in :data:`SECRETS` order."""
    ids = []
    for index, planted in enumerate(SECRETS):
        header = {"version": 0, "id": session_id(index), "createdAt": index + 1, "cwd": CWD, "delegationDepth": 0}
        LogWriter.in_root(root, header).create(header, planted_events(planted, index))
        ids.append(header["id"])
    return ids


def build(tmp: Path, policy: str | None = None, *, workers: int = 0, root: Path | None = None) -> tuple[Path, str]:
    """Write the planted root (unless given) and reconcile it into ``tmp/index.db`` under ``policy``."""
    if root is None:
        root = tmp / "root"
        write_root(root)
    db = tmp / "index.db"
    engine = open_writer(str(db))
    try:
        Reconciler(engine, root, Compression.ZSTD, settle_seconds=0, workers=workers, parallel_min_bytes=0, redact=policy).reconcile()  # type: ignore[arg-type]
    finally:
        engine.dispose()
    return root, str(db)


# --------------------------------------------------------------------------- streamed secrets


def leaks(text: str, secret: str, width: int = 8) -> list[str]:
    """Every ``width``-character piece of ``secret`` (as written or JSON-escaped) that occurs in ``text``."""
    import json

    from readmodel.projection.secrets import RULES, marker

    markers = " ".join(marker(rule.kind) for rule in RULES)  # a marker's own words are no leak ("github")
    forms = {secret, json.dumps(secret)[1:-1]}
    windows = {form[k : k + width] for form in forms for k in range(len(form) - width + 1)}
    return sorted(window for window in windows if window in text and window not in markers)


def cut_points(text: str, secret: str, count: int, shift: int) -> list[int]:
    """``count`` cut positions of ``text``, the middle ones inside ``secret`` (offset by ``shift``)."""
    start = text.index(secret)
    inside = [start + max(1, min(len(secret) - 1, (len(secret) * (k + 1)) // (count + 1) + shift)) for k in range(count)]
    return sorted(set(inside))


def _tool_chunk(seq: int, piece: str, call_id: str = "c1") -> dict[str, Any]:
    return ev("assistant/chunk", seq, {"turn": 1, "step": 1, "chunk": {"type": "tool-call-delta", "index": 1, "id": call_id, "name": "bash", "argumentsDelta": piece}})


def streamed_batches(planted: Planted, index: int) -> list[list[dict[str, Any]]]:
    """One session whose assistant text carries ``planted`` streamed in six pieces written in two
    batches (two packed chunk rows, the secret across them) and whose tool call's arguments carry
    it in two verbatim ``tool-call-delta`` chunks; then the assembled message, the call and its result."""
    text = f"streamword{index} {planted.text} tailword{index}"
    cuts = cut_points(text, planted.secret, 5, shift=index % 3)
    bounds = [0, *cuts, len(text)]
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    arguments = '{"command": "echo ' + planted.text.replace("\n", "\\n") + '"}'
    half = arguments.index(planted.secret.replace("\n", "\\n")) + len(planted.secret) // 2
    first = [turn_start(0), user(1, f"question{index}"), step_start(2)]
    seq = 3
    rows: list[list[dict[str, Any]]] = [[], []]
    for number, piece in enumerate(pieces):
        rows[0 if number < len(pieces) // 2 else 1].append(chunk(seq, piece))
        seq += 1
    calls = [_tool_chunk(seq, arguments[:half]), _tool_chunk(seq + 1, arguments[half:])]
    seq += 2
    rest = [
        assistant(seq, text, calls=[("c1", "bash", arguments)]),
        tool_call(seq + 1, "c1", "bash", arguments),
        tool_result(seq + 2, "c1", f"ok resultword{index}"),
        step_end(seq + 3),
        turn_end(seq + 4),
    ]
    return [first + rows[0], rows[1] + calls + rest]


def streamed_id(index: int) -> str:
    return f"streamed-{index:02d}"


def write_streamed_root(root: Path) -> list[str]:
    """A session per planted secret, streamed in pieces (:func:`streamed_batches`)."""
    ids = []
    for index, planted in enumerate(SECRETS):
        header = {"version": 0, "id": streamed_id(index), "createdAt": 100 + index, "cwd": CWD, "delegationDepth": 0}
        LogWriter.in_root(root, header).write_session(header, streamed_batches(planted, index))
        ids.append(header["id"])
    return ids
