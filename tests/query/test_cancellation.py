"""Cancellation (query-spec §2.11; catalogue T-CL-1..6, T-CX-1..11, T-EX-7..9).

The Python engine is synchronous: an :class:`AbortSignal` is checked at the
reference's points and the caller's reason object itself is raised.  The
reference's "in-flight" cases (the backend observes the abort, the call stays
pending until the backend settles) map to a hook that aborts the signal while
the index call runs: the call always completes first, then the engine raises
the reason, whether the index call failed or returned normally.  The
reference's "signal forwarded to the backend" observations have no
counterpart: index calls are not cancellable, which is exactly why the engine
waits for them before raising.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from readmodel.core.cancel import AbortController, AbortError, aborted_signal
from readmodel.core.errors import SessionQueryError
from readmodel.live import InMemoryLiveSource
from readmodel.query import SessionQuery
from tests.logfactory import header as log_header
from tests.projection.builders import title as title_event
from tests.projection.surface_builders import user
from tests.query.support import Corpus, HookedStore


class Reason(Exception):
    """The caller's abort reason (identity is what the tests check)."""


LISTINGS: dict[str, Callable[[SessionQuery, Any], Any]] = {
    "listSessions": lambda q, s: q.list_sessions(s),
    "filterSessions": lambda q, s: q.filter_sessions([], s),
}
EXACT: dict[str, Callable[[SessionQuery, Any], Any]] = {
    "traceSession": lambda q, s: q.trace_session("durable", s),
    "traceEvent": lambda q, s: q.trace_event({"sessionId": "durable", "seq": 0}, s),
    "readEvent": lambda q, s: q.read_event({"sessionId": "durable", "seq": 0}, s),
}


@pytest.fixture
def durable(corpus: Corpus) -> Corpus:
    corpus.write(log_header("durable"), [user(0, "x"), title_event(1, "T")])
    corpus.write(log_header("other"), [title_event(0, "O")])
    corpus.index()
    return corpus


def abort_during(kind: str, controller: AbortController, reason: BaseException, *, fail: bool) -> Callable[..., None]:
    """A hook that aborts while a ``kind`` call runs, then fails it or lets it return."""

    def hook(call_kind: str, _name: str, _args: tuple[Any, ...]) -> None:
        if call_kind == kind:
            controller.abort(reason)
            if fail:
                raise RuntimeError("backend observed the abort")

    return hook


def raises_reason(call: Callable[[], Any], reason: BaseException) -> None:
    with pytest.raises(BaseException) as info:
        call()
    assert info.value is reason


@pytest.mark.parametrize("operation", sorted(LISTINGS))
def test_pre_aborted_listing_never_calls_the_index(durable: Corpus, operation: str) -> None:
    # T-CL-1 / T-CL-4
    query, store = durable.hooked()
    reason = Reason()
    raises_reason(lambda: LISTINGS[operation](query, aborted_signal(reason)), reason)
    assert store.calls == []


@pytest.mark.parametrize("fail", [True, False], ids=["backend-fails", "backend-ignores-signal"])
@pytest.mark.parametrize("operation", sorted(LISTINGS))
def test_abort_during_listing_raises_the_reason_after_the_call(durable: Corpus, operation: str, fail: bool) -> None:
    # T-CL-2 / T-CL-5 (the call fails after observing the abort) and
    # T-CL-3 / T-CL-6 (the call ignores the signal and returns normally).
    query, store = durable.hooked()
    controller, reason = AbortController(), Reason()
    store.hook = abort_during("list", controller, reason, fail=fail)
    raises_reason(lambda: LISTINGS[operation](query, controller.signal), reason)
    assert store.count("list") == 1


@pytest.mark.parametrize("operation", sorted(EXACT))
def test_pre_aborted_exact_reads_never_call_the_index(durable: Corpus, operation: str) -> None:
    # T-CX-1..3
    query, store = durable.hooked()
    reason = Reason()
    raises_reason(lambda: EXACT[operation](query, aborted_signal(reason)), reason)
    assert store.calls == []


@pytest.mark.parametrize("fail", [True, False], ids=["backend-fails", "backend-ignores-signal"])
@pytest.mark.parametrize("operation", sorted(EXACT))
def test_abort_during_the_listing_of_an_exact_read(durable: Corpus, operation: str, fail: bool) -> None:
    # T-CX-4..6 and T-CX-7 (traceSession with a listing that ignores the signal)
    query, store = durable.hooked()
    controller, reason = AbortController(), Reason()
    store.hook = abort_during("list", controller, reason, fail=fail)
    raises_reason(lambda: EXACT[operation](query, controller.signal), reason)
    assert store.count("inspect") == 0


@pytest.mark.parametrize("fail", [True, False], ids=["backend-fails", "backend-ignores-signal"])
@pytest.mark.parametrize("operation", ["traceEvent", "readEvent"])
def test_abort_during_the_inspection_of_an_exact_read(durable: Corpus, operation: str, fail: bool) -> None:
    # T-CX-8..9 (inspection ignores the signal) and T-CX-10..11 (inspection fails after the abort)
    query, store = durable.hooked()
    controller, reason = AbortController(), Reason()
    store.hook = abort_during("inspect", controller, reason, fail=fail)
    raises_reason(lambda: EXACT[operation](query, controller.signal), reason)
    assert store.count("list") == 1 and store.count("inspect") >= 1


def test_title_batch_abort_during_an_inspection_stops_the_batch(durable: Corpus) -> None:
    # T-EX-7 and T-EX-8: the batch rejects with the reason; queued ids are never inspected.
    query, store = durable.hooked()
    controller, reason = AbortController(), Reason()
    store.hook = abort_during("inspect", controller, reason, fail=False)
    raises_reason(lambda: query.read_title_snapshots(["durable", "other"], controller.signal), reason)
    assert store.inspected() == ["durable"]
    store.calls.clear()
    controller, reason = AbortController(), Reason()
    store.hook = abort_during("inspect", controller, reason, fail=True)
    raises_reason(lambda: query.read_title_snapshot("other", controller.signal), reason)


def test_title_batch_abort_during_the_listing(durable: Corpus) -> None:
    # T-EX-9
    query, store = durable.hooked()
    controller, reason = AbortController(), Reason()
    store.hook = abort_during("list", controller, reason, fail=True)
    raises_reason(lambda: query.read_title("durable", controller.signal), reason)
    assert store.count("inspect") == 0
    assert store.count("list") == 1


def test_pre_aborted_title_batch_and_live_only_reads(live: InMemoryLiveSource) -> None:
    live.create({"version": 0, "id": "live", "createdAt": 1}, [title_event(0, "L")])
    query = SessionQuery(None, live)
    reason = Reason()
    raises_reason(lambda: query.read_title_snapshots(["live"], aborted_signal(reason)), reason)
    raises_reason(lambda: query.read_event({"sessionId": "live", "seq": 0}, aborted_signal(reason)), reason)
    # A window error is raised before the abort check (§2.7 step 1).
    with pytest.raises(SessionQueryError):
        query.read_event({"sessionId": "live", "seq": 0, "before": -1}, aborted_signal(reason))


def test_abort_controller_semantics() -> None:
    controller = AbortController()
    assert not controller.signal.aborted and controller.signal.reason is None
    controller.abort()
    assert isinstance(controller.signal.reason, AbortError)
    first = controller.signal.reason
    controller.abort(Reason())
    assert controller.signal.reason is first  # the first reason wins
    with pytest.raises(TypeError):
        AbortController().abort("not an exception")


def test_the_hooked_store_is_a_real_store(durable: Corpus) -> None:
    query, store = durable.hooked()
    assert isinstance(store, HookedStore)
    assert [r.header["id"] for r in query.list_sessions()] == ["durable", "other"]
    assert store.count("list") == 1
