"""What a web process reads once and keeps: a study's item ids, its metric's label source.

Every entry is keyed by what makes it stale-proof (a study's id *and* its ``created_at``: a
rolled-back import's ids can come back with another study), so nothing is ever invalidated;
the cache is only bounded, and emptied whole when full (a process serves a handful of studies).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

Value = TypeVar("Value")

ENTRIES_MAX = 64


class ProcessCache(Generic[Value]):
    """A bounded per-process map from a stale-proof key to a value loaded on first use.

    Two threads may load the same key at once; both loads give the same value, and the lock only
    keeps the map itself consistent (loading under it would serialise the process's requests).
    """

    def __init__(self, entries_max: int = ENTRIES_MAX) -> None:
        self._entries: dict[Hashable, Value] = {}
        self._guard = threading.Lock()
        self._entries_max = entries_max

    def get(self, key: Hashable, load: Callable[[], Value]) -> Value:
        found = self._entries.get(key)
        if found is None:
            found = load()
            with self._guard:
                if len(self._entries) >= self._entries_max:
                    self._entries.clear()
                self._entries[key] = found
        return found

    def holds(self, key: Hashable) -> bool:
        return key in self._entries

    def keys(self) -> list[Hashable]:
        return list(self._entries)

    def clear(self) -> None:
        """Forget everything, as a new process would (tests)."""
        with self._guard:
            self._entries.clear()
