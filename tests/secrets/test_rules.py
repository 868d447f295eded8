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
