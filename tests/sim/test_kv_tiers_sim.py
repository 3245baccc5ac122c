"""KV tiers in the engine (sim/kv_tiers.py), worked by hand and against a reference LRU written
here.

The replay runs the shipped agentic sample one request at a time (``max_num_seqs=1``, the whole
prompt in one step, one output token) with a small GPU pool, so the reference sees the requests
in file order: a request's GPU hits are the leading keys in the GPU's LRU list, its tier hits
the keys right after them found in the CPU list then the SSD list (each taken out: promotion);
its blocks then take room in GPU memory, and every block the GPU evicts goes to the CPU list's
tail, the CPU list's oldest to the SSD list, the SSD list's oldest away (demotion)."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.kv_tiers import KvTier, default_tier, with_load_s
from servecap.core.plan import Plan, plan
from servecap.errors import ServecapError
from servecap.sim import engine_setup_from_plan
from servecap.sim.engine import Engine
from servecap.sim.kv_tiers import LruTier, TierSetup, TierStore
from servecap.sim.simulate import simulate
from servecap.specs import RequestShape
from servecap.workload.block_hash import engine_block_keys
from servecap.workload.generate import trace_arrays
from servecap.workload.spec import TraceArrival
from servecap.workload.trace import load_trace

SAMPLE = Path(__file__).parents[2] / "src/servecap/workload/data/agentic_sessions.jsonl"
BS = 16
GPU_BLOCKS = 3000


def _plan() -> Plan:
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=131072)
    return plan(dep, request=RequestShape(512, 128))


def test_load_of_n_blocks_by_hand() -> None:
    """Llama-3.1-8B BF16 on one GPU: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131,072
    bytes per token, 2,097,152 per 16-token block. 100 blocks from CPU DRAM over PCIe Gen5 x16
    (63.015e9 B/s) with a 1 ms latency: 0.001 + 209,715,200 / 63.015e9 = 4.328 ms; 30 of them from
    an SSD (13e9 B/s, no latency): 62,914,560 / 13e9 = 4.840 ms; the two in sequence: 9.168 ms."""
    block = 131_072 * 16
    setup = TierSetup(
        (KvTier("cpu", 1e12, 16 * 32e9 * 128 / 130 / 8, 0.001), default_tier("ssd", 1e12)),
        key_bytes_per_gpu=block,
        gpus=1,
        num_layers=32,
    )
    store = TierStore(setup)
    keys = list(range(130))
    for k in keys[100:]:  # 30 blocks in the SSD, 100 in CPU DRAM
        store.private[1].put(k)
    for k in keys[:100]:
        store.private[0].put(k)
    assert store.find(keys, 0, 130) == [100, 30]
    t = store.promote(keys, 0, 130, BS)
    assert t == pytest.approx(0.001 + 209_715_200 / 63.0154e9 + 62_914_560 / 13e9, rel=1e-5)
    assert t == pytest.approx(0.009168, rel=1e-3)
    assert store.hit_tokens() == {"cpu": 1600, "ssd": 480}
    assert store.find(keys, 0, 130) == [0, 0]  # promoted: the private tiers gave them up
    # layer by layer over 32 layers, against a 20 ms prefill: 9.168/32 + 31 x 20/32 + 20/32 = 20.29 ms
    assert store.step_s(t, 0.020) == pytest.approx(t / 32 + 31 * 0.020 / 32 + 0.020 / 32, rel=1e-12)
    assert with_load_s(t, 0.020, 32, layerwise=False) == pytest.approx(t + 0.020)


def test_demotion_cascades_lru_per_tier() -> None:
    """A 2-block CPU tier over a 3-block SSD tier, fed evictions 1..6: the CPU keeps the newest
    two (5, 6), the SSD the three before (2, 3, 4), block 1 is gone; a read of 3 moves it out."""
    block = 1000
    setup = TierSetup((KvTier("cpu", 2 * block, 1e9), KvTier("ssd", 3 * block, 1e9)), block, 1, 1)
    store = TierStore(setup)
    for k in range(1, 7):
        store.demote(k)
    assert list(store.private[0].lru) == [5, 6]
    assert list(store.private[1].lru) == [2, 3, 4]
    store.now_s = 1.0  # every write ended (a block is readable once written)
    assert store.find([3, 4, 1], 0, 3) == [0, 2]  # 3 and 4 in the SSD, then 1 is missing
    store.promote([3], 0, 1, 1)
    assert list(store.private[1].lru) == [2, 4]


def test_shared_remote_keeps_what_a_replica_reads() -> None:
    block = 1000
    setup = TierSetup((KvTier("remote", 4 * block, 1e9),), block, 1, 1)
    shared = LruTier(setup.tiers[0], setup.capacity_keys(setup.tiers[0]))
    a, b = TierStore(setup, shared), TierStore(setup, shared)
    a.demote(7)
    a.demote(8)
    a.now_s = b.now_s = 2e-6  # both written (1,000 bytes at 1e9 B/s each, one after the other)
    assert b.find([7, 8], 0, 2) == [2]  # replica b reads what replica a's GPU evicted
    b.promote([7, 8], 0, 2, 16)
    assert a.find([7, 8], 0, 2) == [2]  # inclusive: still there for the others
    assert b.hit_tokens() == {"remote": 32} and a.hit_tokens() == {"remote": 0}


def test_tier_setup_refuses_a_bad_order() -> None:
    with pytest.raises(ServecapError, match="kv_tiers"):
        TierSetup((default_tier("ssd", 1e9), default_tier("cpu", 1e9)), 1000, 1, 1)


def _rows() -> list[tuple[list[int], int]]:
    trace = load_trace(SAMPLE)
    return [(trace.hashes_of(i).tolist(), int(trace.prompt_tokens[i])) for i in range(len(trace))]


def _reference(cpu_blocks: int, ssd_blocks: int) -> dict[str, int]:
    gpu: OrderedDict[int, None] = OrderedDict()
    cpu: OrderedDict[int, None] = OrderedDict()
    ssd: OrderedDict[int, None] = OrderedDict()
    hits = {"gpu": 0, "cpu": 0, "ssd": 0}
    for ids, prompt in _rows():
        keys = engine_block_keys(ids, 512, BS, prompt)
        most = min(len(keys), (prompt - 1) // BS)
        h = 0
        while h < most and keys[h] in gpu:
            h += 1
        for k in keys[:h]:
            del gpu[k]
        hits["gpu"] += h * BS
        i = h
        while i < most:
            k = keys[i]
            if k in cpu:
                del cpu[k]
                hits["cpu"] += BS
            elif k in ssd:
                del ssd[k]
                hits["ssd"] += BS
            else:
                break
            i += 1
        held = -(-prompt // BS)
        while len(gpu) + held > GPU_BLOCKS:
            out: int | None = gpu.popitem(last=False)[0]
            for tier, cap in ((cpu, cpu_blocks), (ssd, ssd_blocks)):
                if out is None:
                    break
                if out in tier:
                    tier.move_to_end(out)
                    out = None
                    break
                tier[out] = None
                out = tier.popitem(last=False)[0] if len(tier) > cap else None
        for k in reversed(keys):
            if k not in gpu:
                gpu[k] = None
    return hits


@pytest.mark.parametrize(("cpu_blocks", "ssd_blocks"), [(400, 0), (1000, 0), (300, 1500)])
def test_replay_hits_per_tier_equal_a_reference_lru(cpu_blocks: int, ssd_blocks: int) -> None:
    p = _plan()
    key_bytes = len(p.layout.groups) * p.layout.bytes_per_block
    assert key_bytes == 131_072 * 16
    # writes at 10 TB/s: every block readable at once, as in the reference LRU (the tiers' write
    # bandwidth delays a block's first read: test_writes_take_the_tiers_write_bandwidth_by_hand)
    tiers = [dataclasses.replace(default_tier("cpu", cpu_blocks * key_bytes), write_bytes_per_s=1e13)]
    if ssd_blocks:
        tiers.append(dataclasses.replace(default_tier("ssd", ssd_blocks * key_bytes), write_bytes_per_s=1e13))
    setup = engine_setup_from_plan(p, kv_tiers=tuple(tiers))
    setup = dataclasses.replace(setup, max_num_seqs=1, max_num_batched_tokens=131072, num_gpu_blocks=GPU_BLOCKS)
    arrays = trace_arrays(TraceArrival(path=str(SAMPLE)))
    one_token = dataclasses.replace(arrays, output_tokens=np.ones(len(arrays), dtype=np.int64))
    result = simulate(setup, one_token)
    assert result.summary.completed == len(arrays) and result.summary.preemptions == 0
    ref = _reference(cpu_blocks, ssd_blocks)
    got = result.summary.kv_tier_hit_tokens
    assert got is not None
    assert {k: got.get(k, 0) for k in ref} == ref
    assert ref["cpu"] > 0
    if ssd_blocks:
        assert ref["ssd"] > 0
    # every hit below the GPU was loaded at the tier's bandwidth, no latency
    want_s = sum(ref[t] / BS * key_bytes / default_tier(t, 1.0).read_bytes_per_s for t in ("cpu", "ssd"))
    assert result.engine.tier_load_s == pytest.approx(want_s, rel=1e-9)


def test_tiers_cut_ttft_on_the_agentic_sample() -> None:
    p = _plan()
    arrays = trace_arrays(TraceArrival(path=str(SAMPLE)))
    base = dataclasses.replace(engine_setup_from_plan(p), num_gpu_blocks=GPU_BLOCKS)
    tiered = dataclasses.replace(
        engine_setup_from_plan(p, kv_tiers=(default_tier("cpu", 64 * 2**30),)), num_gpu_blocks=GPU_BLOCKS
    )
    a, b = simulate(base, arrays, check_invariants=True), simulate(tiered, arrays, check_invariants=True)
    assert b.summary.ttft_s.mean is not None and a.summary.ttft_s.mean is not None
    assert b.summary.ttft_s.mean < a.summary.ttft_s.mean
    assert b.summary.kv_tier_hit_tokens is not None and b.summary.kv_tier_hit_tokens["cpu"] > 0


def _preempting_run(tiers: tuple[KvTier, ...]) -> tuple[Engine, int]:
    """Two 300-token prompts decoding 500 tokens each in a 64-block pool (1,024 tokens): the
    younger is preempted when both outgrow it."""
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=4096)
    setup = dataclasses.replace(
        engine_setup_from_plan(plan(dep, request=RequestShape(512, 128)), kv_tiers=tiers), num_gpu_blocks=64
    )
    e = Engine(setup)
    e.add(0, 300, 500, None, 0, 0.0)
    e.add(1, 300, 500, None, 0, 0.0)
    t, prefill = 0.0, 0
    while e.has_work():
        out = e.step(t)
        t += out.duration_s
        prefill += out.num_prefill_tokens
        e.check_invariants()
    return e, prefill


def test_a_preempted_request_is_loaded_back_not_recomputed() -> None:
    """Without a tier the preempted request recomputes its prompt and the tokens it had produced
    (1,113 prefill tokens in all); with CPU DRAM its 32 full blocks (512 tokens) come back from
    the tier and only the last token is computed again: 300 + 300 + 1 = 601. The load is no
    prefix-cache hit."""
    plain, computed = _preempting_run(())
    tiered, computed_tiered = _preempting_run((default_tier("cpu", 64 * 2**30),))
    assert plain.preemptions == tiered.preemptions == 1
    assert computed == 1113 and computed_tiered == 601
    # a load of its own blocks, no prefix hit (vLLM counts it under preempted_hits, outside its
    # hit rate; nothing else was cached: no hit in all)
    assert tiered.stats.tier_hit_tokens == (("cpu", 0),) and tiered.stats.tier_load_s > 0
    assert tiered.tiers is not None and tiered.tiers.loads == 1
    assert tiered.tiers is not None and not any(t.lru for t in tiered.tiers.private)  # its blocks were taken back


def test_writes_take_the_tiers_write_bandwidth_by_hand() -> None:
    """A CPU tier written at 1e9 B/s, 1,000-byte blocks (1 us each): a run of 4 evicted at t = 0
    is written 0..4 us; a run of 2 evicted at 1 us waits for the channel, written 4..6 us. At
    5 us the first four are readable, the last two not yet; at 6 us all are. A block already
    there is refreshed, not written again."""
    block = 1000
    setup = TierSetup((KvTier("cpu", 100 * block, 1e9, write_bytes_per_s=1e9),), block, 1, 1)
    store = TierStore(setup)
    store.demote_range(100, 0, 4)  # blocks 100..103, the pool's order: 103 first
    assert list(store.private[0].lru) == [103, 102, 101, 100]
    assert store.write_free_s[0] == pytest.approx(4e-6)
    store.now_s = 1e-6
    store.demote_range(200, 0, 2)
    assert store.write_free_s[0] == pytest.approx(6e-6)
    store.now_s = 5e-6
    assert store.find([100, 101, 102, 103, 200, 201], 0, 6) == [4]
    assert store.find([200, 201], 0, 2) == [0]
    store.now_s = 6e-6
    assert store.find([200, 201], 0, 2) == [2]
    store.demote_range(100, 0, 1)  # already there: no write booked
    assert store.write_free_s[0] == pytest.approx(6e-6) and store.written_blocks == [6]


def test_a_dropped_cache_keeps_feeding_the_tiers_and_forgets_the_private_ones() -> None:
    """``Engine.drop_cache`` (a stopped replica): the new pool still demotes into the tiers, the
    pod's own CPU tier is emptied, the shared store keeps its blocks."""
    p = _plan()
    key_bytes = len(p.layout.groups) * p.layout.bytes_per_block
    tiers = (default_tier("cpu", 100 * key_bytes), default_tier("remote", 100 * key_bytes))
    engine = Engine(engine_setup_from_plan(p, kv_tiers=tiers))
    assert engine.tiers is not None
    engine.tiers.demote_range(500, 0, 3)
    assert len(engine.tiers.private[0].lru) == 3 and engine.tiers.remote is not None
    engine.drop_cache()
    assert engine.pool.on_evict == engine.tiers.demote_range
    assert not engine.tiers.private[0].lru and len(engine.tiers.remote.lru) == 3
