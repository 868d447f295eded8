"""The search tools' match argument: words by default, a question retried without its function words."""

from __future__ import annotations

from readmodel.query import SessionQuery
from readmodel.tools.errors import INVALID_ARGS
from readmodel.tools.inputs import relaxed_query
from tests.tools.support import caller, err, ok, tools_for


def test_the_default_is_words_and_every_mode_is_reachable(world: SessionQuery) -> None:
    tools = tools_for(world)
    assert "1. Session a" in ok(tools.call("session_search", {"query": "shared alpha"}, caller()))  # any order
    assert ok(tools.call("session_search", {"query": "shared alpha", "match": "phrase"}, caller())).startswith("No earlier session")
    assert "1. Session a" in ok(tools.call("session_search", {"query": "HA BETA SHA", "match": "substring"}, caller()))
    assert "match" in err(tools.call("session_search", {"query": "alpha", "match": "regex"}, caller()), INVALID_ARGS)


def test_a_question_is_retried_without_its_function_words_and_says_so(world: SessionQuery) -> None:
    tools = tools_for(world)
    text = ok(tools.call("session_search", {"query": "why is the gamma"}, caller()))
    assert text.startswith('No event holds every word of "why is the gamma"; these match "gamma"')
    assert "1. Session a" in text
    events = ok(tools.call("session_event_search", {"session_id": "a", "query": "where was gamma"}, caller()))
    assert events.startswith('No event holds every word of "where was gamma"; these match "gamma"')
    # An explicit mode is taken as asked: no retry.
    assert ok(tools.call("session_search", {"query": "why is the gamma", "match": "words"}, caller())).startswith("No earlier session")


def test_relaxed_query_keeps_quoted_phrases_and_meaningful_words() -> None:
    assert relaxed_query("why did the sandbox fail?") == "sandbox fail?"
    assert relaxed_query("sandbox fail") is None
    assert relaxed_query("the why") is None
    assert relaxed_query('why "the sandbox"') is None
