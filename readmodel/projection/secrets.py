"""Secret detection and redaction: the rule set every layer shares (a sessionq extension).

Agent transcripts carry credentials (tool outputs print ``.env`` files, cloud
configs, tokens pasted into prompts).  The indexer replaces every detected
secret in a semantic document with a marker ``[REDACTED:<kind>]`` before the
document reaches the index, so no search finds it and no snippet shows it;
the model tools, raw reads and exports reuse the same functions on their
output (see :data:`POLICIES`).

Rules (why a hand-kept set): only high-specificity shapes are detected — a
fixed prefix or a fixed structure plus a long random-looking body — so false
positives stay near zero and nothing else in a document ever changes.
Each rule has *gates*: small regular expressions that start with a
literal, one of which every match contains.  One Aho-Corasick pass over a
document finds the gates' literals (ahocorasick-rs); a document holding none
(nearly all of them) costs that pass and no rule's pattern at all.  detect-secrets' plugins were considered: they
report whole lines or values rather than spans (its private-key plugin flags
the ``BEGIN`` line only, not the key body), run every plugin's regexes on
every line, and lack several of the shapes needed here (Anthropic, DeepSeek,
Google, project-scoped OpenAI keys).

Text forms: the same functions run over plain document text and over JSON
text (raw log lines, the tools' pretty-printed events, JSON inside a tool
call's argument string).  Private-key bodies therefore accept ``\\n`` escape
sequences (any number of backslashes) as line breaks, no match ever ends
inside an escape or crosses a ``"``, and the marker needs no JSON escaping,
so redacting valid JSON text yields valid JSON.  Tokens may follow an escape
such as ``\\n`` directly (``\\nAKIA…``), which is why leading boundaries only
refuse an alphanumeric neighbour when it is not the letter of an escape.

Contract: :func:`redact` replaces exactly the spans :func:`find_secrets`
reports and nothing else; ``redact(text) == text`` exactly when no span is
found; the result never contains a trigger-complete match again (redaction
is idempotent).  :data:`RULES_VERSION` changes whenever a rule changes, and
with it the index fingerprint, so an index built with other rules is
re-derived.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

RULES_VERSION: Final = "2026-12-2"  # 2: the GitHub gate admits fine-grained tokens (github_pat_…)
"""Bumped with every change of :data:`RULES`; part of :func:`index_fingerprint`."""

Policy = Literal["index", "all", "off"]
POLICIES: Final[tuple[Policy, ...]] = ("index", "all", "off")
"""``index`` (default): the index and the model tools are redacted, raw reads
and exports give the log as written.  ``all``: raw reads and exports are
redacted too.  ``off``: nothing is redacted (reference-exact documents)."""
DEFAULT_POLICY: Final[Policy] = "index"
ENV_VAR: Final = "SESSIONQ_REDACT"


@dataclass(frozen=True)
class Rule:
    """One secret shape: its kind (the marker's name), gate and pattern.

    When ``pattern`` has a group named ``secret`` only that group is the
    secret (e.g. the value after ``Authorization: Bearer``); otherwise the
    whole match is.
    """

    kind: str
    gates: tuple[str, ...]  # regular expressions (each starting with a literal); every match contains a match of one
    pattern: re.Pattern[str]
    not_after: frozenset[str] = frozenset()  # characters that may not precede a match (see _starts_token)
    # Literals one of which every match holds one character after its start (see matches).
    anchors: tuple[str, ...] = ()

    def matches(self, text: str) -> Iterator[re.Match[str]]:
        """``pattern.finditer(text)``, the same matches.

        A pattern that starts with an alternation (``secret|SECRET|Secret``) is
        tried by the engine at every position of the text; with ``anchors`` it
        is tried only where a match can start, one character before each
        anchor, in order and past the previous match as ``finditer`` goes.
        """
        if not self.anchors:
            yield from self.pattern.finditer(text)
            return
        starts = sorted({at - 1 for anchor in self.anchors for at in _occurrences(text, anchor) if at >= 1})
        position = 0
        for start in starts:
            if start < position:
                continue
            match = self.pattern.match(text, start)
            if match is not None:
                yield match
                position = max(match.end(), start + 1)


@dataclass(frozen=True, order=True)
class SecretSpan:
    """A detected secret: ``text[start:end]`` of the given kind."""

    start: int
    end: int
    kind: str


_SECRET_KEY_WORD: Final = r"(?:secret|SECRET|Secret)[_-]?(?:(?:access|ACCESS|Access)[_-]?)?(?:key|KEY|Key)"
_URL_USERINFO: Final = r"://[^\s:/?#@\"'\\]{0,256}:(?P<secret>[^\s/?#@\"'\\]{1,256})@"
_KEY_BODY: Final = r"(?:[A-Za-z0-9+/=:,. \t\r\n-]|\\+[nrt])"


def _rule(kind: str, gates: tuple[str, ...], pattern: str, *, not_after: Iterable[str] = (), anchors: tuple[str, ...] = ()) -> Rule:
    return Rule(kind, gates, re.compile(pattern), frozenset(not_after), anchors)


def _occurrences(text: str, literal: str) -> Iterator[int]:
    """Where ``literal`` occurs in ``text`` (overlapping occurrences too)."""
    at = text.find(literal)
    while at >= 0:
        yield at
        at = text.find(literal, at + 1)


def _token(kind: str, gates: tuple[str, ...], pattern: str) -> Rule:
    """A rule whose match must start a token.

    The check is made on each match in Python rather than as a lookbehind at
    the start of the pattern: a pattern that begins with its literal prefix
    is searched for that prefix at memchr speed, one that begins with a
    lookbehind is tried at every position.
    """
    return _rule(kind, gates, pattern, not_after=_TOKEN_CHARACTERS)


_UPPER_DIGITS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_TOKEN_CHARACTERS: Final = _UPPER_DIGITS + "abcdefghijklmnopqrstuvwxyz_"
_ESCAPES: Final = frozenset({"\\n", "\\t", "\\r"})


def _starts_token(text: str, start: int, not_after: frozenset[str]) -> bool:
    """Not preceded by one of ``not_after``, unless that character is the letter
    of a JSON escape (``\\n``, ``\\t``, ``\\r``) written just before the token."""
    return start == 0 or text[start - 1] not in not_after or text[start - 2 : start] in _ESCAPES


RULES: Final[tuple[Rule, ...]] = (
    _rule(
        "private-key",
        ("PRIVATE KEY",),
        # The whole block.  A block cut off before its END line (a truncated tool output) ends
        # with its last line of 16 or more key characters, so the prose after it survives.
        rf"-----BEGIN[A-Z0-9 ]{{0,40}}PRIVATE KEY(?: BLOCK)?-----"
        rf"(?:{_KEY_BODY}{{0,16384}}?-----END[A-Z0-9 ]{{0,40}}PRIVATE KEY(?: BLOCK)?-----"
        rf"|(?:(?:\s|\\+[nrt])+[A-Za-z0-9+/=]{{16,}})*)",
    ),
    _rule(
        "aws-secret-key",
        ("ecret", "ECRET"),
        # ``secret_access_key``, ``aws_secret_key``, ``SecretAccessKey`` … then ``=``/``:`` and the 40-character value.
        rf"{_SECRET_KEY_WORD}(?:\\*[\"'])?\s*[:=]>?\s*(?:\\*[\"'])?(?P<secret>[A-Za-z0-9/+]{{40}})(?![A-Za-z0-9/+])",
        anchors=("ecret", "ECRET"),
    ),
    _rule("aws-access-key", (r"A(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA)[A-Z0-9]{16}",), r"A(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Z0-9])", not_after=_UPPER_DIGITS),
    _token("github-token", (r"g(?:h[pousr]_[A-Za-z0-9]{36}|ithub_pat_)",), r"gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255}"),
    _token("gitlab-token", (r"gl(?:pat|ptt|dt|rt|soat|cbt)-",), r"gl(?:pat|ptt|dt|rt|soat|cbt)-[A-Za-z0-9_-]{20,255}"),
    _token("slack-token", (r"x(?:ox[abposre]|app)-",), r"xox[abposre]-[A-Za-z0-9-]{10,255}|xapp-\d-[A-Za-z0-9-]{10,255}"),
    _rule("slack-webhook", (r"hooks\.slack\.com/",), r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,255}"),
    _token("anthropic-api-key", ("sk-",), r"sk-ant-[A-Za-z0-9_-]{32,255}"),
    _token(
        "openai-api-key",
        ("sk-",),
        r"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,255}|[A-Za-z0-9_-]{8,100}T3BlbkFJ[A-Za-z0-9_-]{8,100})",
    ),
    _token("deepseek-api-key", ("sk-",), r"sk-[0-9a-f]{32}(?![A-Za-z0-9_-])"),
    _token("google-api-key", (r"AIza[0-9A-Za-z_-]{35}",), r"AIza[0-9A-Za-z_-]{35}"),
    _token("stripe-key", (r"k_(?:live|test)_",), r"[sr]k_(?:live|test)_[0-9A-Za-z]{24,255}"),
    _token("jwt", (r"eyJ[A-Za-z0-9_-]{8,}\.eyJ",), r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    _rule(
        "bearer-token",
        ("earer", "EARER"),
        r"(?:[Aa]uthorization|AUTHORIZATION)(?:\\*[\"'])?\s*[:=]\s*(?:\\*[\"'])?\s*(?:[Bb]earer|BEARER)\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)",
        anchors=("uthorization", "UTHORIZATION"),
    ),
    # user:password@ right after a scheme's ``://`` (only the password is the secret).
    _rule("url-password", (_URL_USERINFO,), rf"{_URL_USERINFO}[A-Za-z0-9\[]"),
)

_KINDS: Final = frozenset(rule.kind for rule in RULES)

# The gates, each searched once per text (rules share them).  A text in which none
# matches (nearly all text) has no secret and runs no rule's pattern.  Every gate starts
# with a literal, so the regular expression engine skips to its occurrences at memchr
# speed: ~0.4 ms per gate and MB of text; one alternation of all gates, which the engine
# tries at every position, was ten times slower (measured on the shared corpus).
_GATES: Final = tuple((source, re.compile(source)) for source in dict.fromkeys(gate for rule in RULES for gate in rule.gates))
# Gates that are plain literals are tested with ``in`` (no method call, no match object):
# about a tenth of the gates' cost on the shared corpus; the others stay regular expressions.
_LITERAL: Final = re.compile(r"(?:[A-Za-z0-9 _/-]|\\[./])+")
_LITERAL_GATES: Final = tuple((source, re.sub(r"\\(.)", r"\1", source)) for source, _ in _GATES if _LITERAL.fullmatch(source))
_PATTERN_GATES: Final = tuple((source, gate.search) for source, gate in _GATES if not _LITERAL.fullmatch(source))

# Literals of the pattern gates: every match of such a gate contains one of them (a test
# checks it), so one Aho-Corasick pass over a text (ahocorasick_rs: all literals at
# once, about a third of the cost of the gates one by one) says which gates can match;
# only those are then searched.  Without the package the gates are searched one by one.
_GATE_LITERALS: Final[dict[str, tuple[str, ...]]] = {
    r"A(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA)[A-Z0-9]{16}": ("A3T", "AKIA", "ASIA", "ABIA", "ACCA"),
    r"g(?:h[pousr]_[A-Za-z0-9]{36}|ithub_pat_)": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    r"gl(?:pat|ptt|dt|rt|soat|cbt)-": ("glpat-", "glptt-", "gldt-", "glrt-", "glsoat-", "glcbt-"),
    r"x(?:ox[abposre]|app)-": ("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "xapp-"),
    r"AIza[0-9A-Za-z_-]{35}": ("AIza",),
    r"k_(?:live|test)_": ("k_live_", "k_test_"),
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ": ("eyJ",),
    _URL_USERINFO: ("://",),
}


def _literal_automaton() -> tuple[Any, tuple[str, ...], frozenset[str]] | None:
    """The automaton of every gate's literals, the gate of each literal, and the gates a literal settles."""
    try:
        import ahocorasick_rs
    except ImportError:  # an optional speed-up: the gates are then searched one by one
        return None
    literals = [(literal, source) for source, literal in _LITERAL_GATES]
    literals += [(literal, source) for source, _ in _PATTERN_GATES for literal in _GATE_LITERALS[source]]
    automaton = ahocorasick_rs.AhoCorasick([literal for literal, _ in literals])
    return automaton, tuple(source for _, source in literals), frozenset(source for source, _ in _LITERAL_GATES)


_AUTOMATON: Final = _literal_automaton()
_GATE_SEARCH: Final = dict(_PATTERN_GATES)


def _gates_one_by_one(text: str) -> set[str]:
    """The gates that match somewhere in ``text``, each searched on its own."""
    gated = {source for source, literal in _LITERAL_GATES if literal in text}
    gated.update(source for source, search in _PATTERN_GATES if search(text) is not None)
    return gated


def _gates_present(text: str) -> set[str]:
    """The gates that match somewhere in ``text`` (:func:`_gates_one_by_one`, faster)."""
    if _AUTOMATON is None:
        return _gates_one_by_one(text)
    automaton, gate_of, settled = _AUTOMATON
    # Overlapping: a literal inside another's match ("ACCAKIA…") must not be hidden.
    candidates = {gate_of[index] for index, _start, _end in automaton.find_matches_as_indexes(text, overlapping=True)}
    return {source for source in candidates if source in settled or _GATE_SEARCH[source](text) is not None}


REDACTED_MARK: Final = "[REDACTED:"
"""How every marker starts: a stored document holding it was redacted."""


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


def find_secrets(text: str) -> list[SecretSpan]:
    """The secrets in ``text``, as disjoint spans in ascending order.

    Overlapping matches (a JWT that is also a bearer value) merge into one
    span with the kind of the one starting first (the earlier rule on a tie).
    """
    gated = _gates_present(text)
    if not gated:
        return []
    found: list[tuple[int, int, int, str]] = []
    for order, rule in enumerate(RULES):
        if gated.isdisjoint(rule.gates):
            continue
        for match in rule.matches(text):
            if rule.not_after and not _starts_token(text, match.start(), rule.not_after):
                continue
            start, end = match.span("secret") if "secret" in rule.pattern.groupindex else match.span()
            if end > start:
                found.append((start, -end, order, rule.kind))
    if not found:
        return []
    if any(kind == "aws-access-key" for *_, kind in found):
        found.extend(_paired_aws_secrets(text, found))
    found.sort()
    spans: list[SecretSpan] = []
    for start, negative_end, _order, kind in found:
        end = -negative_end
        if spans and start < spans[-1].end:
            last = spans[-1]
            if end > last.end:
                spans[-1] = SecretSpan(last.start, end, last.kind)
            continue
        spans.append(SecretSpan(start, end, kind))
    return spans


# A secret access key printed next to its key id without a keyword (``aws configure list``,
# CSV credential files): 40 key characters with both letter cases, so hex digests never match.
_PAIRED_SECRET: Final = re.compile(r"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])")
_PAIR_WINDOW: Final = 200


def _paired_aws_secrets(text: str, found: list[tuple[int, int, int, str]]) -> list[tuple[int, int, int, str]]:
    """Secret keys within :data:`_PAIR_WINDOW` characters of a detected access key id."""
    order = next(index for index, rule in enumerate(RULES) if rule.kind == "aws-secret-key")
    paired = []
    for start, negative_end, _order, kind in list(found):
        if kind != "aws-access-key":
            continue
        window_start, window_end = max(0, start - _PAIR_WINDOW), min(len(text), -negative_end + _PAIR_WINDOW)
        for match in _PAIRED_SECRET.finditer(text, window_start, window_end):
            paired.append((match.start(), -match.end(), order, "aws-secret-key"))
    return paired


def redact(text: str) -> str:
    """``text`` with every detected secret replaced by its :func:`marker`."""
    spans = find_secrets(text)
    if not spans:
        return text
    out: list[str] = []
    position = 0
    for span in spans:
        out.append(text[position : span.start])
        out.append(marker(span.kind))
        position = span.end
    out.append(text[position:])
    return "".join(out)


def redact_bytes(data: bytes) -> bytes:
    """:func:`redact` over UTF-8 bytes (a raw log line); unchanged bytes when nothing is found.

    Bytes that are not valid UTF-8 are kept as they were: only the text
    around them is scanned (each undecodable byte is a boundary).
    """
    text = data.decode("utf-8", "surrogateescape")
    redacted = redact(text)
    return data if redacted is text else redacted.encode("utf-8", "surrogateescape")


def parse_policy(value: str | None) -> Policy:
    """A policy name (``None`` or ``""``: the default); raises ``ValueError`` for any other value."""
    if value is None or value == "":
        return DEFAULT_POLICY
    lowered = value.strip().lower()
    if lowered not in POLICIES:
        raise ValueError(f"redaction policy must be one of {', '.join(POLICIES)}, not {value!r}")
    return lowered  # type: ignore[return-value]


def policy_from_env(value: str | None = None) -> Policy:
    """The policy given (a ``--redact`` value), else ``$SESSIONQ_REDACT``, else the default."""
    return parse_policy(value if value is not None else os.environ.get(ENV_VAR))


def redacts_index(policy: Policy) -> bool:
    """Whether documents (and the model tools) are redacted under ``policy``."""
    return policy != "off"


def redacts_raw(policy: Policy) -> bool:
    """Whether raw reads and exports are redacted under ``policy``."""
    return policy == "all"


def index_fingerprint(policy: Policy) -> str:
    """What an index's documents were derived with: the rule set and whether they are redacted.

    ``index`` and ``all`` derive the same documents, so they share a
    fingerprint; a rule change or ``off`` gives another one.
    """
    if not redacts_index(policy):
        return "off"
    digest = hashlib.sha256(RULES_VERSION.encode())
    for rule in RULES:
        digest.update(f"\0{rule.kind}\0{rule.pattern.pattern}\0{rule.gates}".encode())
    return f"redact:{RULES_VERSION}:{digest.hexdigest()[:16]}"


def is_kind(kind: str) -> bool:
    """Whether ``kind`` names a rule (markers of other names are plain text)."""
    return kind in _KINDS
