"""Helpers for the query-engine tests: real index databases, live sessions,
and an instrumented store that counts and intercepts backend calls.

The reference's tests use a fake persistence backend whose ``list`` and
``inspect`` can be counted, delayed, failed or made to attach a live owner.
:class:`HookedStore` gives the same control over the index: every call of the
transaction's reader is classified as *list* (header listing, session lookup)
or *inspect* (everything that reads a session's rows) and passed to a hook.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from indexer.layout import Compression
from indexer.reconcile import Reconciler
from readmodel.store.database import open_writer
from readmodel.live import InMemoryLiveSource
from readmodel.query import SessionQuery
from readmodel.store.interface import IndexReader
from readmodel.store.sqlite import IndexStore
from tests.logfactory import write_log

LISTING_CALLS = frozenset({"list_headers", "list_keyed_headers", "lookup", "lookup_many"})

Hook = Callable[[str, str, tuple[Any, ...]], None]
"""``hook(kind, method, args)``; may raise, abort a signal or attach a live owner."""


def build_index(root: Path, db: Path) -> Path:
    """Reconcile ``root`` into a fresh (or existing) index at ``db``."""
    engine = open_writer(str(db))
    try:
        Reconciler(engine, root, Compression.ZSTD, settle_seconds=0).reconcile()
    finally:
        engine.dispose()
    return db


class Corpus:
    """A tmp root plus its index: write logs, reconcile, open engines."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "root"
        self.db = tmp_path / "index.db"
        self.root.mkdir(parents=True, exist_ok=True)
        self._engines: list[SessionQuery] = []

    def write(self, header: dict[str, Any], events: Sequence[dict[str, Any]]) -> Path:
        """Write one well-formed log (one batch) at its canonical path."""
        return write_log(self.root, header, [list(events)])

    def index(self) -> Path:
        return build_index(self.root, self.db)

    def query(self, live: InMemoryLiveSource | None = None, config: Any = None) -> SessionQuery:
        engine = SessionQuery.open(str(self.db), live=live, config=config)
        self._engines.append(engine)
        return engine

    def hooked(self, live: InMemoryLiveSource | None = None, config: Any = None) -> tuple[SessionQuery, HookedStore]:
        store = HookedStore(IndexStore.open(str(self.db)))
        engine = SessionQuery(store, live, config)
        self._engines.append(engine)
        return engine, store

    def close(self) -> None:
        for engine in self._engines:
            engine.close()


class _HookedReader:
    def __init__(self, inner: IndexReader, store: HookedStore) -> None:
        self._inner = inner
        self._store = store

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        def call(*args: Any) -> Any:
            kind = "list" if name in LISTING_CALLS else "inspect"
            store = self._store
            store.calls.append((kind, name, store.describe(name, args)))
            if store.hook is not None:
                store.hook(kind, name, args)
            result = method(*args)
            if store.after is not None:
                store.after(kind, name, args)
            if name == "lookup" and result is not None:
                store.sids[result.sid] = result.id
            elif name == "lookup_many":
                store.sids.update({row.sid: row.id for row in result.values()})
            return result

        return call


class HookedStore(IndexStore):
    """An :class:`IndexStore` whose reader calls are recorded and hooked."""

    def __init__(self, inner: IndexStore) -> None:
        super().__init__(inner.engine, inner.db)
        self.calls: list[tuple[str, str, Any]] = []
        self.hook: Hook | None = None  # runs before each reader call
        self.after: Hook | None = None  # runs after each reader call returned
        self.sids: dict[int, str] = {}

    def describe(self, name: str, args: tuple[Any, ...]) -> Any:
        """The session id an inspect call concerns (its first argument is a sid)."""
        if name in LISTING_CALLS or not args or type(args[0]) is not int:
            return args
        return self.sids.get(args[0], args[0])

    @contextmanager
    def read(self) -> Iterator[Any]:
        with super().read() as reader:
            yield _HookedReader(reader, self)

    def count(self, kind: str) -> int:
        return sum(1 for call in self.calls if call[0] == kind)

    def inspected(self) -> list[Any]:
        """Session ids of inspect calls, in order, consecutive repeats merged."""
        out: list[Any] = []
        for kind, _name, target in self.calls:
            if kind == "inspect" and (not out or out[-1] != target):
                out.append(target)
        return out


def fail_on(kind: str, error: BaseException) -> Hook:
    """A hook raising ``error`` on every call of ``kind`` (``list`` / ``inspect``)."""

    def hook(call_kind: str, _name: str, _args: tuple[Any, ...]) -> None:
        if call_kind == kind:
            raise error

    return hook


def live_header(session_id: str, created_at: int = 1, **extra: Any) -> dict[str, Any]:
    """A live session header (``{version, id, createdAt}`` plus extras)."""
    header: dict[str, Any] = {"version": 0, "id": session_id, "createdAt": created_at}
    header.update(extra)
    return header
