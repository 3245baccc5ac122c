"""The KV block pool by hand: counts, LRU eviction and conservation, with one block per key and
with several (a hybrid model's KV-cache groups: one cached key spans ``blocks_per_key`` blocks)."""

from __future__ import annotations

import pytest

from servecap.sim.kv_pool import KvPool


@pytest.mark.parametrize("per_key", [1, 3])
def test_counts_eviction_and_conservation(per_key: int) -> None:
    pool = KvPool(12 * per_key, blocks_per_key=per_key)
    assert (pool.free, pool.used, pool.evictable, pool.evictions) == (12 * per_key, 0, 0, 0)
    # a request computes 4 blocks' worth and publishes two keys of them
    assert pool.allocate(4 * per_key)
    assert pool.publish(101) and pool.publish(102) and not pool.publish(101)
    pool.release(2 * per_key)  # its 2 private key-spans go back
    pool.drop(101)
    pool.drop(102)  # its cached ones become evictable, 101 first (the LRU head)
    pool.check()
    assert (pool.used, pool.evictable, pool.available()) == (0, 2 * per_key, 12 * per_key)
    assert pool.longest_hit([101, 102, 103], 3) == (2, 2)
    assert pool.longest_hit([101, 102], 1) == (1, 1)
    # a hit takes 102 back out of the LRU list
    pool.acquire(102)
    assert (pool.used, pool.evictable, pool.longest_hit([102], 1)) == (per_key, per_key, (1, 0))
    # an allocation bigger than the free blocks evicts the LRU head (101), not the held 102
    assert pool.allocate(11 * per_key)
    assert pool.evictions == 1 and 101 not in pool.refs and 102 in pool.refs
    assert (pool.free, pool.used, pool.evictable, pool.available()) == (0, 12 * per_key, 0, 0)
    assert not pool.allocate(1)  # nothing free, nothing evictable
    assert pool.allocate(0)  # nothing asked: always granted
    pool.check()


def test_check_catches_a_negative_count_even_when_the_total_adds_up() -> None:
    pool = KvPool(8)
    pool.free, pool.used = -1, 9  # 9 - 1 + 0 == 8: conservation alone would pass
    with pytest.raises(AssertionError):
        pool.check()
