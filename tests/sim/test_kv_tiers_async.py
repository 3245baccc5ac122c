"""vLLM's offloading connector in the engine (sim/kv_tiers.py, "vLLM's offloading connector"):
asynchronous loads (the request waits outside the batch, the next one is scheduled meanwhile)
and stores as computed, worked by hand.

The case: Llama-3.1-8B BF16 on one H100, 2,097,152-byte blocks of 16 tokens (131,072 bytes per
token). Request A has a 528-token prompt (33 blocks) whose first 32 blocks are in CPU DRAM, read
at 3.3554432e9 B/s so that their load is 32 x 2,097,152 / 3.3554432e9 = 20 ms exactly; request B
has a 64-token prompt and no prefix. Each wants one output token."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from servecap.catalog import lookup_gpu, resolve_model
from servecap.cli.main import cli
from servecap.core.defaults import build_deployment
from servecap.core.kv_tiers import KvTier, default_tier
from servecap.core.plan import Plan, plan
from servecap.errors import ServecapError
from servecap.sim import engine_setup_from_plan
from servecap.sim.engine import Engine
from servecap.sim.engine_server import EngineServer
from servecap.sim.kv_tiers import TierSetup, TierStore
from servecap.sim.setup import offload_modes
from servecap.sim.traffic import OpenLoopRequest
from servecap.specs import RequestShape
from servecap.workload.request import block_keys

BLOCK_BYTES = 131_072 * 16
LOAD_S = 0.020
READ_BYTES_S = 32 * BLOCK_BYTES / LOAD_S  # 3.3554432e9: 32 blocks in 20 ms
A_KEYS = list(range(1000, 1033))  # A's 33 blocks


def _plan() -> Plan:
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=4096)
    return plan(dep, request=RequestShape(512, 128))


def _engine(kv_load: str, kv_store: str = "on-evict") -> Engine:
    cpu = KvTier("cpu", 1e12, READ_BYTES_S, write_bytes_per_s=1e13)
    e = Engine(engine_setup_from_plan(_plan(), kv_tiers=(cpu,), kv_load=kv_load, kv_store=kv_store))
    assert e.tiers is not None and e.tiers.setup.key_bytes_per_gpu == BLOCK_BYTES
    for k in A_KEYS[:32]:
        e.tiers.private[0].put(k, 0.0)  # A's prefix, written long ago
    return e


def _prefill_s(e: Engine, tokens: int, start: int = 0) -> float:
    """The step model's price of one prefill of ``tokens`` after ``start`` computed (the engine's
    own arithmetic: causal pairs ``n x s + n (n + 1) / 2``)."""
    n, s = tokens, start
    return e.model.time(n, 1, float(s), float(s), n * s + n * (n + 1) / 2.0, n * s + n * (n + 1) / 2.0, n)


def test_the_request_without_a_cached_prefix_runs_while_the_other_loads() -> None:
    """Step 1 at t = 0: A's 32 blocks are found in CPU DRAM, its load booked 0 .. 20 ms, and it
    leaves the queue holding its 32 blocks (no token budget, no seat); B is admitted next and
    prefilled: B's first token at the end of step 1, ``d_B`` (its 64-token prefill alone). Step 2
    at ``d_B``: nothing to run, the engine waits for the load (wakes at 20 ms). Step 3 at 20 ms:
    A computes only its last 16 tokens; its first token at ``20 ms + d_A``."""
    e = _engine("async")
    e.add(0, 528, 1, A_KEYS, 0, 0.0)
    e.add(1, 64, 1, None, 0, 0.0)
    out = e.step(0.0)
    d_b = _prefill_s(e, 64)
    assert out.first_tokens == (1,) and out.num_prefill_tokens == 64
    assert out.duration_s == pytest.approx(d_b, rel=1e-12)
    assert d_b < LOAD_S
    assert e.num_waiting == 1 and e.num_running == 0  # A waits for its blocks (vLLM counts it waiting)
    assert e.pool.used == 32  # A holds the blocks its load fills
    e.check_invariants()
    wait = e.step(d_b)
    assert wait.num_tokens == 0 and wait.first_tokens == ()
    assert d_b + wait.duration_s == pytest.approx(LOAD_S, rel=1e-12)  # woken when the load ends
    out = e.step(LOAD_S)
    assert out.first_tokens == (0,) and out.num_prefill_tokens == 16
    assert out.duration_s == pytest.approx(_prefill_s(e, 16, 512), rel=1e-12)
    e.check_invariants()
    assert not e.has_work()
    assert e.stats.tier_hit_tokens == (("cpu", 512),)
    assert e.stats.tier_load_s == pytest.approx(LOAD_S, rel=1e-12)


def test_the_old_blocking_mode_makes_both_wait_for_the_load() -> None:
    """``kv_load blocking`` (servecap's first model, kept by that name): A and B are admitted in
    one step that loads A's prefix, then computes A's 16 tokens and B's 64: both first tokens at
    ``20 ms + d(80 tokens)``."""
    e = _engine("blocking")
    e.add(0, 528, 1, A_KEYS, 0, 0.0)
    e.add(1, 64, 1, None, 0, 0.0)
    out = e.step(0.0)
    assert set(out.first_tokens) == {0, 1} and out.num_prefill_tokens == 80
    n = 80
    pairs = 16 * 512 + 16 * 17 / 2.0 + 64 * 65 / 2.0
    compute = e.model.time(n, 2, 512.0, 512.0, pairs, pairs, n)
    assert out.duration_s == pytest.approx(LOAD_S + compute, rel=1e-12)


def test_a_request_arriving_during_the_wait_is_scheduled_at_once() -> None:
    """Through the simulator's server: A (its prefix group's 512 tokens in CPU DRAM) arrives at 0
    and waits for its load (0 .. 20 ms); B arrives at 5 ms to an idle engine and is prefilled at
    once (first token at ``5 ms + d_B``), not at the load's end; A's first token at
    ``20 ms + d_A``."""
    e = _engine("async")
    keys = block_keys(prefix_group=7, prefix_tokens=512, conversation_id=None, total_tokens=529, block_size=16)
    assert keys is not None and len(keys) == 32
    assert e.tiers is not None
    for i in range(32):
        e.tiers.private[0].put(keys[i], 0.0)
    server = EngineServer(e)
    server.add(OpenLoopRequest(0, 0.0, 528, 1, 7, 512), 0.0)
    server.advance_to(0.005)
    assert server.next_event_s() == pytest.approx(LOAD_S, rel=1e-12)  # the wake event
    server.add(OpenLoopRequest(1, 0.005, 64, 1, None, 0), 0.005)
    assert server.next_event_s() == 0.005
    server.advance_to(1.0)
    server.advance_to(1.0)
    done = {r.request_id: r for r in server.take_finished()}
    server.advance_to(1.0)
    done.update({r.request_id: r for r in server.take_finished()})
    assert done[1].first_token_s == pytest.approx(0.005 + _prefill_s(e, 64), rel=1e-12)
    assert done[0].first_token_s == pytest.approx(LOAD_S + _prefill_s(e, 16, 512), rel=1e-12)
    assert done[0].cached_prompt_tokens == 512


def test_stores_as_computed_by_hand() -> None:
    """``kv_store on-compute``: A's 33 blocks, computed in one step ending at ``d``, are written
    from ``d`` at the tier's write bandwidth (63.015e9 B/s, PCIe Gen5 x16): readable at
    ``d + 33 x 2,097,152 / 63.015e9`` = ``d + 1.098 ms``. The GPU's evictions write nothing."""
    p = _plan()
    e = Engine(engine_setup_from_plan(p, kv_tiers=(default_tier("cpu", 1e12),), kv_load="async", kv_store="on-compute"))
    assert e.tiers is not None and e.pool.on_evict is None
    e.add(0, 528, 1, A_KEYS, 0, 0.0)
    out = e.step(0.0)
    d = out.duration_s
    assert d == pytest.approx(_prefill_s(e, 528), rel=1e-12)
    cpu = e.tiers.private[0]
    assert list(cpu.lru) == A_KEYS and e.tiers.written_blocks == [33]
    ready = d + 33 * BLOCK_BYTES / default_tier("cpu", 1.0).write_rate
    assert e.tiers.write_free_s[0] == pytest.approx(ready, rel=1e-12)
    assert ready - d == pytest.approx(0.001098, rel=1e-3)
    e.tiers.now_s = ready - 1e-9
    assert e.tiers.lookup(A_KEYS, 0, 33, set()) is None  # still being stored: try later
    e.tiers.now_s = ready
    assert e.tiers.lookup(A_KEYS, 0, 33, set()) == [33]
    assert e.tiers.lookup(A_KEYS, 0, 33, {A_KEYS[5]}) is None  # another request loads one of them


def test_a_pending_block_passes_the_request_over_and_admits_the_next() -> None:
    """A's prefix is being stored (readable only at 1 s): at t = 0 A is passed over ("try later",
    vLLM's ``HIT_PENDING``) and B, behind it, is admitted; A stays first in the queue."""
    e = _engine("async")
    assert e.tiers is not None
    e.tiers.private[0].lru[A_KEYS[3]] = 1.0  # its store ends at 1 s
    e.add(0, 528, 1, A_KEYS, 0, 0.0)
    e.add(1, 64, 1, None, 0, 0.0)
    out = e.step(0.0)
    assert out.first_tokens == (1,)
    assert e.waiting.peek().request_id == 0 and e.num_waiting == 1 and e.pool.used == 0


def test_an_inclusive_tier_keeps_what_it_loads() -> None:
    setup = TierSetup(
        (KvTier("cpu", 10 * BLOCK_BYTES, 1e9),), BLOCK_BYTES, 1, 1, async_load=True, store_on_compute=True
    )
    store = TierStore(setup)
    store.store_computed([1, 2, 3], 0.0)
    store.now_s = 1.0
    store.promote([1, 2, 3], 0, 3, 16)
    assert list(store.private[0].lru) == [1, 2, 3]
    assert store.book_load(0.5, 1.0) == 1.5 and store.book_load(0.5, 1.2) == 2.0  # one read channel


def test_modes_by_engine() -> None:
    assert offload_modes("vllm") == ("async", "on-compute")
    assert offload_modes("sglang") == ("layerwise", "on-evict")
    assert offload_modes("vllm", "layerwise", "on-evict") == ("layerwise", "on-evict")
    with pytest.raises(ServecapError, match="kv_load"):
        offload_modes("sglang", "async")
    with pytest.raises(ServecapError, match="kv_store"):
        offload_modes("vllm", "auto", "sometimes")


def test_loads_never_hold_the_pool_against_each_other() -> None:
    """A 64-block pool and two 528-token prompts (33 blocks each) whose first 32 blocks are in
    CPU DRAM. Were both loads started, they would hold 64 blocks and each wait for a 33rd for
    ever; the requests loading or loaded together never need more than the pool, so the second
    load starts once the first request is scheduled: A loads 0..20 ms, computes its last 16
    tokens and ends; C then loads 20 ms later, from the end of A's step."""
    e = _engine("async")
    e = Engine(dataclasses.replace(e.setup, num_gpu_blocks=64))
    assert e.tiers is not None
    c_keys = list(range(2000, 2033))
    for k in A_KEYS[:32] + c_keys[:32]:
        e.tiers.private[0].put(k, 0.0)
    e.add(0, 528, 1, A_KEYS, 0, 0.0)
    e.add(1, 528, 1, c_keys, 0, 0.0)
    t, first = 0.0, {}
    while e.has_work():
        out = e.step(t)
        e.check_invariants()
        t += out.duration_s
        for rid in out.first_tokens:
            first[rid] = t
    d = _prefill_s(e, 16, 512)
    assert first[0] == pytest.approx(LOAD_S + d, rel=1e-12)
    assert first[1] == pytest.approx(LOAD_S + d + LOAD_S + d, rel=1e-12)
    assert e.stats.tier_hit_tokens == (("cpu", 1024),)


def test_the_cache_replay_refuses_the_connector_modes() -> None:
    """The cache-replay fidelity does not model asynchronous loads or stores on compute: one line
    naming them, not a silently different model."""
    args = ["fleet", "simulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--replicas", "2"]
    args += ["--trace", "sample:mooncake-conversation", "--fidelity", "cache-replay", "--cpu-kv-gib", "64"]
    for extra in (["--kv-load", "async"], ["--kv-store", "on-compute"]):
        res = CliRunner().invoke(cli, args + extra)
        assert res.exit_code != 0
        assert isinstance(res.exception, ServecapError)
        assert "does not model KV tiers loaded asynchronously or fed on compute" in str(res.exception)
