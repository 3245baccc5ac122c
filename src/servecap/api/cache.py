"""A bounded LRU cache of closed-form answers (their JSON bytes).

A plan is a pure function of its request body (the catalogs are read-only and an uploaded
config is named by its content), so the same body always gets the same answer: a shared link
opened by a whole team costs one computation. Errors are not cached. Thread-safe (FastAPI runs
sync routes in a thread pool).
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class ResponseCache:
    def __init__(self, maxsize: int = 4096) -> None:
        self.maxsize = maxsize
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> bytes | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: str, value: bytes) -> bytes:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return value
