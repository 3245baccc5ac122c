"""KV tiers at the cache-replay fidelity (fleet/cache_replay_tiers.py): a case worked by hand, a
small reference (GPU LRU -> CPU LRU -> SSD LRU) written here, the full simulation's per-tier hit
rates within the stated tolerance, and the tiers' sizes bounded by their capacities."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict

import numpy as np
import pytest
from cache_replay_helpers import BS, replay_fleet, sessions
from cache_replay_helpers import setup as setup  # the fixture

from servecap.core.kv_tiers import KvTier, default_tier
from servecap.fleet import simulate_fleet
from servecap.fleet.cache_replay_run import cache_replay
from servecap.fleet.stream_source import chunked
from servecap.sim import EngineSetup
from servecap.sim.kv_tiers import TierSetup
from servecap.workload import RequestArrays
from servecap.workload.block_hash import _MIX, _signed64


def _unit_tiers(setup: EngineSetup, gpu_blocks: int, *blocks: tuple[str, int]) -> EngineSetup:
    """``setup`` with ``gpu_blocks`` GPU blocks and tiers of the given blocks each (one byte a block:
    the capacities are the block counts; loads and writes take nanoseconds)."""
    tiers = tuple(KvTier(name, float(n), 63.0e9) for name, n in blocks)
    return dataclasses.replace(
        setup,
        num_gpu_blocks=gpu_blocks,
        max_num_seqs=1,
        max_num_batched_tokens=131072,
        kv_tiers=TierSetup(tiers, key_bytes_per_gpu=1, gpus=1, num_layers=32),
    )


def _one_block_trace(rows: list[list[int]], prompts: list[int]) -> RequestArrays:
    """Requests 1000 s apart, one output token, one trace block per engine block (16 tokens)."""
    n = len(rows)
    lens = np.array([len(r) for r in rows], dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return RequestArrays(
        arrival_s=np.arange(n, dtype=np.float64) * 1000.0,
        prompt_tokens=np.array(prompts, dtype=np.int64),
        output_tokens=np.ones(n, dtype=np.int64),
        prefix_group=np.full(n, -1, dtype=np.int64),
        prefix_tokens=np.zeros(n, dtype=np.int64),
        hash_ids=np.array([x for r in rows for x in r], dtype=np.int64),
        hash_offsets=offsets,
        trace_block_tokens=BS,
    )


def test_hand_worked_gpu_cpu_ssd(setup: EngineSetup) -> None:
    """GPU 4 blocks, CPU 1, SSD 1; one block per hash, each request's answer one private block.

    A [1,2,3] (49 tokens): misses; GPU holds 3,2,1 (oldest first) + A's private block = 4.
    B [4,5] (33 tokens): misses; publishing 5,4 evicts 3 then 2: CPU takes 3, then 2 pushes 3 to
    the SSD. GPU: 1,5,4.
    C [1,2,3]: GPU hit 1 block (16 tokens), then 2 from the CPU, 3 from the SSD (16 tokens each,
    promoted: both tiers empty). Publishing 3,2 evicts 5 (CPU), then 4 (CPU; 5 to the SSD).
    D [4,5]: GPU miss, 4 from the CPU, 5 from the SSD; publishing 5,4 evicts 3 (CPU), then 2
    (CPU; 3 to the SSD): each tier ends holding one block.
    Prompt tokens 49 + 33 + 49 + 33 = 164; gpu 16, cpu 32, ssd 32."""
    s = _unit_tiers(setup, 4, ("cpu", 1), ("ssd", 1))
    arrays = _one_block_trace([[1, 2, 3], [4, 5], [1, 2, 3], [4, 5]], [49, 33, 49, 33])
    got = cache_replay(replay_fleet(s), [arrays])
    assert got.prefix_cache_query_tokens == 164
    assert got.kv_tier_hit_tokens == {"gpu": 16, "cpu": 32, "ssd": 32}
    assert got.prefix_cache_hit_tokens == 16  # the GPU's own, as the full simulation counts it
    assert [(n, held) for n, held, _ in got.kv_tier_occupancy] == [("cpu", 1), ("ssd", 1)]
    # the same without tiers: only C's first block hits
    plain = cache_replay(replay_fleet(dataclasses.replace(s, kv_tiers=None)), [arrays])
    assert plain.prefix_cache_hit_tokens == 16 and plain.kv_tier_hit_tokens is None


def _reference(arrays: RequestArrays, gpu: int, cpu: int, ssd: int) -> dict[str, int]:
    """One request at a time: GPU LRU of runs (whole blocks here) -> CPU LRU -> SSD LRU, exclusive."""
    g: OrderedDict[int, None] = OrderedDict()
    tiers: list[OrderedDict[int, None]] = [OrderedDict(), OrderedDict()]
    caps = [cpu, ssd]
    hits = {"gpu": 0, "cpu": 0, "ssd": 0}

    def demote(k: int) -> None:
        for t, cap in zip(tiers, caps, strict=True):
            t[k] = None
            if len(t) <= cap:
                return
            k = t.popitem(last=False)[0]

    for r in range(len(arrays)):
        ids = arrays.hash_ids[arrays.hash_offsets[r] : arrays.hash_offsets[r + 1]].tolist()
        prompt = int(arrays.prompt_tokens[r])
        keys = [_signed64(h * _MIX + b) for b, h in enumerate(ids)][: prompt // BS]
        top = (prompt - 1) // BS
        h = 0
        while h < min(len(keys), top) and keys[h] in g:
            h += 1
        hits["gpu"] += h * BS
        b = h
        while b < min(len(keys), top):
            t = next((t for t in tiers if keys[b] in t), None)
            if t is None:
                break
            del t[keys[b]]
            hits["cpu" if t is tiers[0] else "ssd"] += BS
            b += 1
        for k in reversed(keys):
            g[k] = None
            g.move_to_end(k)
        private = -(-(prompt + 1) // BS) - len(keys)
        while len(g) + private > gpu:
            demote(g.popitem(last=False)[0])
    return hits


def test_equals_a_small_reference_lru_chain(setup: EngineSetup) -> None:
    rng = np.random.default_rng(7)
    rows: list[list[int]] = []
    for _ in range(300):  # prompts drawn from 6 prefixes of 2-6 blocks, some blocks extended
        base = int(rng.integers(0, 6))
        rows.append([base * 100 + j for j in range(int(rng.integers(2, 7)))] + [1000 + len(rows)])
    prompts = [BS * len(r) - int(rng.integers(0, BS)) for r in rows]
    arrays = _one_block_trace(rows, prompts)
    s = _unit_tiers(setup, 12, ("cpu", 6), ("ssd", 10))
    got = cache_replay(replay_fleet(s), chunked(arrays, 37))
    want = _reference(arrays, 12, 6, 10)
    assert got.kv_tier_hit_tokens == want
    assert want["cpu"] > 0 and want["ssd"] > 0 and want["gpu"] > 0


@pytest.mark.parametrize(("gpu_blocks", "cpu_gib", "remote_gib"), [(3000, 4, 0), (6000, 2, 8)])
def test_per_tier_hit_rates_within_the_stated_tolerance_of_the_full_simulation(
    setup: EngineSetup, gpu_blocks: int, cpu_gib: int, remote_gib: int
) -> None:
    """8 replicas behind precise-prefix, 600 multi-turn requests, a GPU of 3,000 or 6,000 blocks a
    replica (~3 or ~6 prompts), a CPU tier (2 MiB a block: 4 GiB = 2,048 blocks) and a shared
    store: each tier's share of the prompt tokens within 3 points of the full simulation's (the
    tolerance the GPU-only replay states). They differ where the replay approximates
    (cache_replay_run's module doc): it evicts whole runs at admission (the engine block by block
    as it allocates, pinning blocks a running request shares) and its tiers' clock is the arrival,
    so blocks reach and leave the tiers in a slightly different order and time, and the router's
    choices follow. (With 3,000 blocks, a 2 GiB CPU tier and the store, the split moves most:
    gpu 66.7% vs 71.1%, cpu 7.7% vs 4.8%, the sum of the tiers within 1.3 points.)"""
    arrays = sessions(600, 16.0, 0)
    tiers = (default_tier("cpu", cpu_gib * 2**30),) + (
        (default_tier("remote", remote_gib * 2**30),) if remote_gib else ()
    )
    setup_tiers = TierSetup(
        tiers, key_bytes_per_gpu=setup.layout.bytes_per_block * len(setup.layout.groups), gpus=1, num_layers=32
    )
    small = dataclasses.replace(setup, num_gpu_blocks=gpu_blocks, kv_tiers=setup_tiers)
    full = simulate_fleet(replay_fleet(small, 8, "precise-prefix"), arrays, 0).summary
    fast = cache_replay(replay_fleet(small, 8, "precise-prefix"), chunked(arrays, 100))
    assert full.kv_tier_hit_tokens is not None and fast.kv_tier_hit_tokens is not None
    names = ["gpu", "cpu", *(["remote"] if remote_gib else [])]
    assert list(fast.kv_tier_hit_tokens) == list(full.kv_tier_hit_tokens) == names
    for name, n in full.kv_tier_hit_tokens.items():
        want = n / full.kv_tier_query_tokens
        got = fast.kv_tier_hit_tokens[name] / fast.prefix_cache_query_tokens
        assert got == pytest.approx(want, abs=0.03), name
    assert fast.kv_tier_hit_tokens["cpu"] / fast.prefix_cache_query_tokens > 0.01
    assert fast.kv_tier_load_s > 0.0


def test_tiers_never_hold_more_than_their_capacities(setup: EngineSetup) -> None:
    arrays = sessions(800, 32.0, 3)
    s = _unit_tiers(setup, 2000, ("cpu", 700), ("ssd", 900), ("remote", 1500))
    s = dataclasses.replace(s, max_num_seqs=64)
    got = cache_replay(replay_fleet(s, 4, "precise-prefix"), chunked(arrays, 64))
    occ = got.kv_tier_occupancy
    assert [n for n, _, _ in occ] == ["cpu", "ssd"] * 4 + ["remote"]
    assert all(0 < held <= cap for _, held, cap in occ)
    assert [cap for _, _, cap in occ] == [700, 900] * 4 + [1500]
    assert got.kv_tier_hit_tokens is not None and got.kv_tier_hit_tokens["remote"] > 0
