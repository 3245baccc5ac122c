"""The plan cache: bounded, least recently used out first, counts hits."""

from __future__ import annotations

from servecap.api.cache import ResponseCache


def test_lru_bound_and_hits() -> None:
    cache = ResponseCache(maxsize=2)
    cache.put("a", b"1")
    cache.put("b", b"2")
    assert cache.get("a") == b"1"  # a is now the most recent
    cache.put("c", b"3")  # evicts b
    assert cache.get("b") is None
    assert cache.get("a") == b"1" and cache.get("c") == b"3"
    assert (cache.hits, cache.misses) == (3, 1)
