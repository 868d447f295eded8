"""The rules: every planted shape is redacted wherever it sits, nothing else ever changes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from readmodel.projection.secrets import find_secrets, marker, redact, redact_bytes
from tests.secrets.planted import SECRETS

# Prose around a secret: any text, then a separator the secret cannot extend into.
_prose = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=60)
_separator = st.sampled_from([" ", "\n", "\t", "(", "'", ", ", ": ", "\\n"])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SECRETS), _prose, _separator, _separator, _prose)
def test_a_planted_secret_never_gets_through(planted, before, left, right, after) -> None:
    text = before + left + planted.text + right + after
    redacted = redact(text)
    assert planted.secret not in redacted and planted.middle not in redacted
    assert marker(planted.kind) in redacted
    assert redacted.startswith(before) or find_secrets(before + left)  # the words before survive


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SECRETS), _prose, _prose)
def test_a_secret_inside_a_json_string_is_redacted_and_the_json_stays_valid(planted, before, after) -> None:
    line = json.dumps({"text": f"{before} {planted.text} {after}", "args": json.dumps({"cmd": planted.text})})
    redacted = redact_bytes(line.encode()).decode()
    decoded = json.loads(redacted)
    assert planted.secret not in decoded["text"] and planted.secret not in json.loads(decoded["args"])["cmd"]
    assert json.dumps(planted.secret)[1:-1] not in redacted


@settings(max_examples=500, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=300))
def test_text_without_a_detected_shape_is_never_changed(text) -> None:
    spans = find_secrets(text)
    redacted = redact(text)
    assert (redacted == text) == (not spans)
    # Only the reported spans change: the text between them is kept exactly.
    pieces = []
    position = 0
    for span in spans:
        pieces.append(text[position : span.start])
        position = span.end
    pieces.append(text[position:])
    assert all(piece in redacted for piece in pieces)
    assert redact(redacted) == redacted  # idempotent


def test_near_misses_are_left_alone() -> None:
    for text in (
        "disk-0123456789abcdef0123456789abcdef",  # sk- inside a word
        "commit 0123456789abcdef0123456789abcdef01234567 next to AKIAIOSFODNN7EXAMPLE",  # a hex digest
        "https://example.com:8443/path?q=1",  # a port, no password
        "Authorization: Bearer $TOKEN",  # a placeholder
        "eyJhbGciOi",  # half a JWT header
        "-----BEGIN PUBLIC KEY-----",
    ):
        kept = redact(text)
        assert "commit 0123456789abcdef" in kept if text.startswith("commit") else kept == text, text


# --------------------------------------------------------------------------- the literal pre-pass

from readmodel.projection import secrets as _secrets  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_match_of_a_pattern_gate_holds_one_of_its_literals(data: st.DataObject) -> None:
    source, _search = data.draw(st.sampled_from(_secrets._PATTERN_GATES))
    sample = data.draw(st.from_regex(source, fullmatch=True))
    assert any(literal in sample for literal in _secrets._GATE_LITERALS[source]), (source, sample)


_gate_text = st.lists(
    st.one_of(
        st.sampled_from([planted.text for planted in SECRETS] + ["ACCAKIA" + "B" * 16, "xoxb-", "k_live_", "glrt-", "://u:p@h"]),
        st.text(max_size=20),
    ),
    max_size=6,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_gate_text)
def test_the_literal_pre_pass_finds_the_same_gates_as_searching_each(text: str) -> None:
    assert _secrets._gates_present(text) == _secrets._gates_one_by_one(text)


def test_the_literal_pre_pass_is_in_use() -> None:
    # ahocorasick-rs is a dependency; without it the gates are searched one by one (same answers).
    assert _secrets._AUTOMATON is not None


# Pieces of the anchored rules' shapes, near misses included ("sECRET", a 39-character value).
_ANCHORED_PIECES = st.sampled_from(
    ["secret", "Secret", "SECRET", "sECRET", "ecret", "_access_key", "AccessKey", "_KEY", "key", "=", ": ", '\\"', "'", " ", "\n",
     "A" * 40, "aB3/" * 10, "aB3/" * 9 + "aB3", "authorization", "Authorization", "AUTHORIZATION", "uthorization", ": Bearer ", " bearer ",
     "abcdefghijklmnop0123", "x", "="]  # fmt: skip
)


# Whole candidates of both shapes, with the near misses of each part.
_AWS_LIKE = st.tuples(
    st.sampled_from(["secret", "Secret", "SECRET", "sECRET", "xsecret"]),
    st.sampled_from(["_access_key", "AccessKey", "_KEY", "-key", "_token"]),
    st.sampled_from(["=", ": ", ' = \\"', "=>", " "]),
    st.sampled_from(["aB3/" * 10, "A" * 40, "aB3/" * 9 + "aB3", "aB3/" * 11]),
).map("".join)
_BEARER_LIKE = st.tuples(
    st.sampled_from(["authorization", "Authorization", "AUTHORIZATION", "aUTHORIZATION"]),
    st.sampled_from([": ", "=", ' : \\"', " "]),
    st.sampled_from(["Bearer ", "bearer  ", "BEARER\n", "Token "]),
    st.sampled_from(["abcdefghijklmnop0123", "short", "a.b~c+d/e-f_ghijklmnop=="]),
).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.lists(_AWS_LIKE | _BEARER_LIKE | _ANCHORED_PIECES | _prose, max_size=12))
def test_an_anchored_rule_finds_exactly_the_matches_of_its_pattern(pieces: list[str]) -> None:
    from readmodel.projection.secrets import RULES

    text = "".join(pieces)
    anchored = [rule for rule in RULES if rule.anchors]
    assert {rule.kind for rule in anchored} == {"aws-secret-key", "bearer-token"}
    for rule in anchored:
        assert [match.span() for match in rule.matches(text)] == [match.span() for match in rule.pattern.finditer(text)]
