"""A bounded, thread-safe cache of values derived from a stored form (least recently used dropped).

Used where a value is costly to derive from what the index stores (a packed
text decoded, a text prepared for counting) and the same stored rows come back
often.  Each entry remembers the stored form it was derived from and answers
only for that form, byte for byte: a key reused for other content (a text id
after its text was dropped, a checksum that collides) is never answered with
the old value.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class CheckedCache(Generic[K, V]):
    """Values by key, each valid for one stored form; at most ``capacity`` in ``weight`` units."""

    def __init__(self, capacity: int, weight: Callable[[V], int]) -> None:
        self.capacity = capacity
        self.weight = weight
        self.size = 0
        self.entries: OrderedDict[K, tuple[Any, V]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: K, stored: Any) -> V | None:
        """The value derived from ``stored`` under ``key``, or ``None``."""
        with self.lock:
            entry = self.entries.get(key)
            if entry is None or entry[0] != stored:
                return None
            self.entries.move_to_end(key)
            return entry[1]

    def put(self, key: K, stored: Any, value: V) -> None:
        """Keep ``value`` as derived from ``stored`` (an immutable copy: it is compared later)."""
        with self.lock:
            old = self.entries.pop(key, None)
            if old is not None:
                self.size -= self.weight(old[1])
            self.entries[key] = (stored, value)
            self.size += self.weight(value)
            while self.size > self.capacity and self.entries:
                self.size -= self.weight(self.entries.popitem(last=False)[1][1])
