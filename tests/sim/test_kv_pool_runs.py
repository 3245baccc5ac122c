"""The pool's segments of key runs behave block for block like a pool with one entry per block.

The reference below is the per-block pool the simulator used before runs (a dict of reference
counts and an LRU list of single keys). Random requests with shared block-hash prefixes (trace
blocks of 512 tokens on engine blocks of 16, 48 and 128, prompts ending inside a trace block)
are admitted, published in chunks and released in random interleavings in a small pool, so
hits split segments, evictions shorten them and holes appear; after every operation the two
pools agree on the hits, the evictable hits, the counts and the LRU list block by block."""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field

import pytest

from servecap.sim.kv_pool import KvPool
from servecap.workload.block_hash import KeyRuns, engine_block_keys, engine_block_runs


class _BlockPool:
    """One entry per block (the reference)."""

    def __init__(self, total: int) -> None:
        self.total = self.free = total
        self.used = 0
        self.refs: dict[int, int] = {}
        self.lru: OrderedDict[int, None] = OrderedDict()
        self.evictions = 0

    def allocate(self, n: int) -> bool:
        if n > self.free + len(self.lru):
            return False
        while self.free < n:
            key, _ = self.lru.popitem(last=False)
            del self.refs[key]
            self.free += 1
            self.evictions += 1
        self.free -= n
        self.used += n
        return True

    def longest_hit(self, keys: tuple[int, ...], max_blocks: int) -> tuple[int, int]:
        hits = idle = 0
        for k in keys[:max_blocks]:
            c = self.refs.get(k)
            if c is None:
                break
            hits += 1
            idle += c == 0
        return hits, idle

    def acquire(self, key: int) -> None:
        if self.refs[key] == 0:
            del self.lru[key]
            self.used += 1
        self.refs[key] += 1

    def publish(self, key: int) -> bool:
        if key in self.refs:
            return False
        self.refs[key] = 1
        return True

    def drop(self, key: int) -> None:
        self.refs[key] -= 1
        if self.refs[key] == 0:
            self.lru[key] = None
            self.used -= 1


@dataclass
class _Running:
    runs: KeyRuns
    keys: tuple[int, ...]
    held: int  # blocks it holds
    done: int  # keyed blocks published (or hit) so far
    ranges: list[int] = field(default_factory=list)  # the pool's held ranges
    ref_held: list[int] = field(default_factory=list)  # the reference's held keys


def _lru_blocks(pool: KvPool) -> list[int]:
    """The pool's LRU list as per-block keys, oldest first (a segment evicts from hi down)."""
    out = []
    for key, lo, hi in pool.lru:
        for i in range(hi - 1, lo - 1, -1):
            x = (key + i) & ((1 << 64) - 1)
            out.append(x - (1 << 64) if x >> 63 else x)
    return out


def _prompts(rng: random.Random, bs: int) -> list[tuple[KeyRuns, tuple[int, ...], int]]:
    """Prompts as a tree of shared trace-block prefixes (agent turns resending a context)."""
    out = []
    roots = [[rng.randrange(1 << 40)] for _ in range(3)]
    for _ in range(40):
        ids = list(rng.choice(roots))
        ids += [rng.randrange(1 << 40) for _ in range(rng.randrange(0, 4))]
        if rng.random() < 0.5:
            roots.append(ids)
        prompt = (len(ids) - 1) * 512 + rng.randrange(1, 513)
        runs = engine_block_runs(ids, 512, bs, prompt)
        keys = engine_block_keys(ids, 512, bs, prompt)
        if runs is not None:
            assert tuple(runs) == keys
            out.append((runs, keys, prompt))
    return out


@pytest.mark.parametrize("bs", [16, 48, 128])
@pytest.mark.parametrize("seed", range(6))
def test_segments_match_a_pool_of_single_blocks(bs: int, seed: int) -> None:
    rng = random.Random(seed * 100 + bs)
    prompts = _prompts(rng, bs)
    total = rng.choice([60, 120, 400]) * 16 // bs + 8
    pool, ref = KvPool(total), _BlockPool(total)
    running: list[_Running] = []
    for _ in range(400):
        op = rng.random()
        if op < 0.45 or not running:
            runs, keys, prompt = rng.choice(prompts)
            cap = (prompt - 1) // bs
            got = pool.longest_hit_runs(runs, cap)
            assert got == ref.longest_hit(keys, cap)
            hits, idle = got
            need = -(-prompt // bs) - hits  # its private blocks, beside the hits
            if need + idle > pool.available():
                continue
            ranges: list[int] = []
            pool.acquire_runs(runs, hits, ranges)
            ref_held = list(keys[:hits])
            for k in ref_held:
                ref.acquire(k)
            assert pool.allocate(need) and ref.allocate(need)
            running.append(_Running(runs, keys, hits + need, hits, ranges, ref_held))
        elif op < 0.75:
            r = rng.choice(running)
            step = min(len(r.keys), r.done + rng.randrange(1, 40))  # a chunk of its prefill
            if step > r.done:
                got_n = pool.publish_blocks(r.runs, r.done, step, r.ranges)
                ref_n = 0
                for k in r.keys[r.done : step]:
                    if ref.publish(k):
                        r.ref_held.append(k)
                        ref_n += 1
                assert got_n == ref_n
                r.done = step
        else:
            r = running.pop(rng.randrange(len(running)))
            ranges, ref_held, held = r.ranges, r.ref_held, r.held
            cached = sum(ranges[p + 2] - ranges[p + 1] for p in range(0, len(ranges), 3))
            assert cached == len(ref_held)
            pool.release(held - cached)
            pool.drop_held(ranges)
            ref.used -= held - cached
            ref.free += held - cached
            for k in reversed(ref_held):
                ref.drop(k)
        pool.check()
        assert (pool.used, pool.free, pool.evictable, pool.evictions) == (
            ref.used,
            ref.free,
            len(ref.lru),
            ref.evictions,
        )
        assert _lru_blocks(pool) == list(ref.lru)


def test_eviction_hook_sees_every_evicted_block_in_order() -> None:
    pool = KvPool(64)
    seen: list[tuple[int, int, int]] = []
    pool.on_evict = lambda key, lo, hi: seen.append((key, lo, hi))
    runs = KeyRuns((1000, 2000), (32, 40))
    held: list[int] = []
    assert pool.allocate(40)
    assert pool.publish_blocks(runs, 0, 40, held) == 40
    pool.drop_held(held)  # run 2000's 8 blocks enter the list first, then run 1000's 32
    assert pool.lru == [(2000, 0, 8), (1000, 0, 32)]
    assert pool.allocate(24 + 10)  # 24 free, then 10 evicted: run 2000's 8, then 1000's blocks 31 and 30
    assert seen == [(2000, 0, 8), (1000, 30, 32)]
    assert pool.lru == [(1000, 0, 30)] and pool.evictions == 10
    assert pool.longest_hit_runs(runs, 40) == (30, 30)
    pool.check()
