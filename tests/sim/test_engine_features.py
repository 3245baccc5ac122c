"""Scheduler features: preemption order, priority, queue limit, prefix caching, hybrid models,
calibrated step times, and clear errors for impossible settings."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sim_helpers import make_plan

from servecap.calibration import CalibrationFile
from servecap.core.plan import Plan
from servecap.core.roofline import decode_batch
from servecap.errors import ServecapError
from servecap.sim import Engine, EngineRequest, engine_setup_from_plan, simulate
from servecap.workload import RequestSpec, workload_from_dict, workload_from_flags


def _drain(engine: Engine, now: float = 0.0) -> list[tuple[int, ...]]:
    preempted = []
    while engine.has_work():
        out = engine.step(now)
        engine.check_invariants()
        if out.preempted:
            preempted.append(out.preempted)
        now += out.duration_s
    return preempted


def test_preemption_takes_the_youngest_running_request(small_pool_plan: Plan) -> None:
    # 400 blocks of 16 tokens; three requests that each grow to 2,400 tokens (150 blocks)
    engine = Engine(engine_setup_from_plan(small_pool_plan))
    for i in range(3):
        engine.add_request(EngineRequest(i, 400, 2000), 0.0)
    preempted = _drain(engine)
    assert preempted and preempted[0] == (2,)  # the last admitted goes first
    assert engine.stats.preemptions >= 1


def test_priority_policy_admits_the_lowest_value_first(llama8b_plan: Plan) -> None:
    setup = engine_setup_from_plan(make_plan(max_num_batched_tokens=600, max_num_seqs=4), scheduling_policy="priority")
    engine = Engine(setup)
    engine.add_request(EngineRequest(0, 500, 2, priority=5), 0.0)
    engine.add_request(EngineRequest(1, 500, 2, priority=1), 0.0)
    out = engine.step(0.0)
    assert out.first_tokens == (1,)


def test_waiting_queue_limit_rejects(llama8b_plan: Plan) -> None:
    setup = engine_setup_from_plan(llama8b_plan, waiting_queue_limit=2)
    engine = Engine(setup)
    assert [engine.add_request(EngineRequest(i, 100, 10), 0.0) for i in range(4)] == [True, True, False, False]
    w = workload_from_flags(rate=500.0, prompt_tokens=2000, output_tokens=200, num_requests=400)
    res = simulate(engine_setup_from_plan(llama8b_plan, waiting_queue_limit=5), w, np.random.default_rng(0))
    assert res.summary.rejected > 0
    assert res.summary.errors["rejected"] == res.summary.rejected
    assert res.summary.completed + res.summary.rejected == 400


def test_prefix_cache_hits_skip_prefill(llama8b_plan: Plan) -> None:
    setup = engine_setup_from_plan(llama8b_plan)
    w = workload_from_dict(
        {
            "arrival": {"kind": "poisson", "rate_per_s": 2.0},
            "prompt_tokens": 100,
            "output_tokens": 20,
            "prefix": {"groups": 2, "tokens": 1600},
            "num_requests": 40,
        }
    )
    on = simulate(setup, w, np.random.default_rng(0))
    off = simulate(engine_setup_from_plan(llama8b_plan, enable_prefix_caching=False), w, np.random.default_rng(0))
    assert on.summary.prefix_cache_hit_rate is not None and on.summary.prefix_cache_hit_rate > 0.8
    assert off.summary.prefix_cache_hit_rate is None or off.summary.prefix_cache_hit_rate == 0
    # all but the first request of each group hit the 100 full blocks of the prefix
    hits = on.columns.cached_prompt_tokens
    assert int((hits == 1600).sum()) >= 38
    assert on.summary.ttft_s.p50 < off.summary.ttft_s.p50


def test_cached_blocks_are_evicted_lru_when_space_is_needed(small_pool_plan: Plan) -> None:
    engine = Engine(engine_setup_from_plan(small_pool_plan))
    a = tuple(range(100, 150))  # 50 blocks of a shared prefix
    engine.add_request(EngineRequest(0, 800, 1, prefix_key=a), 0.0)
    _drain(engine)
    assert engine.stats.kv_blocks_cached == 50
    # two big requests need more than the free blocks: the cached prefix is evicted
    engine.add_request(EngineRequest(1, 2000, 2000), 1.0)
    engine.add_request(EngineRequest(2, 2000, 2000), 1.0)
    _drain(engine, 1.0)
    assert engine.pool.evictions > 0
    engine.add_request(EngineRequest(3, 800, 1, prefix_key=a), 2.0)
    engine.step(2.0)
    assert engine.stats.prefix_cache_hit_tokens < 50 * 16  # part or all of it was gone


def test_closed_loop_conversations_reuse_their_history(llama8b_plan: Plan) -> None:
    setup = engine_setup_from_plan(llama8b_plan)
    w = workload_from_dict(
        {
            "users": {"count": 8, "think_time_s": {"kind": "lognormal", "median": 2.0, "sigma": 0.5}, "turns": 4},
            "prompt_tokens": 200,
            "output_tokens": 100,
            "duration_s": 60.0,
            "prefix": {"groups": 1, "tokens": 320},
        }
    )
    res = simulate(setup, w, np.random.default_rng(4), check_invariants=True)
    records = res.records()
    later = [r for r in records if r.turn >= 2 and r.error is None]
    assert later and all(r.cached_prompt_tokens >= 320 + 200 for r in later)
    # a user never has two turns in flight: each turn arrives after the previous one ended
    by_user: dict[int, list] = {}
    for r in records:
        assert r.user_id is not None
        by_user.setdefault(r.user_id, []).append(r)
    for turns in by_user.values():
        for prev, nxt in itertools.pairwise(turns):
            assert prev.end_s is not None and nxt.arrival_s >= prev.end_s


@pytest.mark.parametrize("model", ["openai/gpt-oss-20b", "google/gemma-3-12b-it", "Qwen/Qwen3-Next-80B-A3B-Instruct"])
def test_sliding_window_and_hybrid_models_conserve_blocks(model: str) -> None:
    kw: dict[str, object] = {"weights_dtype": "fp8"} if "Next" in model else {}
    p = make_plan(model, "H200", max_model_len=8192, **kw)
    setup = engine_setup_from_plan(p)
    assert not setup.enable_prefix_caching and setup.notes
    w = workload_from_flags(
        rate=10.0, prompt_tokens=1500, output_tokens=400, num_requests=60, prompt_sigma=0.6, output_sigma=0.6
    )
    fast = simulate(setup, w, np.random.default_rng(1), check_invariants=True)
    slow = simulate(setup, w, np.random.default_rng(1), fast_forward=False)
    assert fast.summary.completed == 60
    assert fast.summary.e2e_s == slow.summary.e2e_s


def test_calibrated_efficiency_sets_the_decode_step(llama8b_plan: Plan) -> None:
    cal = CalibrationFile.model_validate(
        {
            "model": "meta-llama/Llama-3.1-8B",
            "gpu": "H100",
            "coefficients": {"bandwidth_efficiency": 0.5, "compute_efficiency": 0.4, "step_overhead_s": 0.004},
        }
    )
    setup = engine_setup_from_plan(llama8b_plan, efficiency=cal.efficiency())
    res = simulate(setup, [RequestSpec(0, 0.0, 100, 3)], record_token_times=True)
    times = res.records()[0].token_times_s
    assert len(times) == 3
    # the token after the first: one decode step at context 101 (the prompt + the first token)
    want = llama8b_plan.step.step_time(decode_batch(1, 101, None), cal.efficiency()).total_s
    assert times[1] - times[0] == pytest.approx(want, rel=1e-12)


def test_impossible_settings_and_requests_get_clear_errors(llama8b_plan: Plan) -> None:
    with pytest.raises(ServecapError, match="max_num_batched_tokens"):
        engine_setup_from_plan(make_plan(max_num_batched_tokens=64, max_num_seqs=256))
    with pytest.raises(ServecapError, match="scheduling_policy"):
        engine_setup_from_plan(llama8b_plan, scheduling_policy="lifo")
    engine = Engine(engine_setup_from_plan(llama8b_plan))
    with pytest.raises(ServecapError, match="max_model_len"):
        engine.add_request(EngineRequest(0, 4000, 500), 0.0)
    res = simulate(engine_setup_from_plan(llama8b_plan), [RequestSpec(0, 0.0, 4000, 500), RequestSpec(1, 0.1, 100, 5)])
    assert res.columns.errors == ("too_long", None)
    with pytest.raises(ServecapError, match="rng"):
        simulate(engine_setup_from_plan(llama8b_plan), workload_from_flags(rate=1.0, num_requests=2))


def test_token_times_and_step_outcome_agree(llama8b_plan: Plan) -> None:
    setup = engine_setup_from_plan(llama8b_plan)
    w = workload_from_flags(rate=30.0, prompt_tokens=300, output_tokens=50, num_requests=50)
    res = simulate(setup, w, np.random.default_rng(0), record_token_times=True)
    for r in res.records():
        assert len(r.token_times_s) == r.output_tokens
        assert r.token_times_s[0] == r.first_token_s and r.token_times_s[-1] == r.end_s
        assert all(b > a for a, b in zip(r.token_times_s, r.token_times_s[1:], strict=False))


def test_an_open_loop_streams_class_priority_reaches_the_engine() -> None:
    """The traffic mix's class priority drives the engine's ``priority`` policy for an open-loop
    stream (docs/workload.md, "Priority: lower is served first"). The open-loop source's requests
    once entered the engine at priority 0 whatever their class, so ``--policy priority`` changed
    nothing. Overloaded (twice what one H100 serves), the interactive class (priority 0) now waits
    far less than the batch class (priority 10); under FCFS both wait alike."""
    from servecap.workload import generate_arrays

    spec = workload_from_dict(
        {
            "arrival": {"kind": "poisson", "rate_per_s": 60},
            "prompt_tokens": 1024,
            "output_tokens": 128,
            "duration_s": 20,
            "tenants": [
                {"name": "interactive", "share": 0.5, "classes": [{"name": "chat"}]},
                {"name": "batch", "share": 0.5, "priority": 10, "classes": [{"name": "bulk"}]},
            ],
        }
    )
    arrays = generate_arrays(spec, np.random.default_rng(1))
    priority = {int(i): int(p) for i, p in enumerate(arrays.priority)}
    mean_ttft: dict[str, dict[int, float]] = {}
    for policy in ("fcfs", "priority"):
        setup = engine_setup_from_plan(make_plan(), scheduling_policy=policy)
        recs = [r for r in simulate(setup, arrays).records() if r.ttft_s is not None]
        by = {p: [r.ttft_s for r in recs if priority[r.request_id] == p] for p in (0, 10)}
        mean_ttft[policy] = {p: float(np.mean(v)) for p, v in by.items()}
    fcfs, prio = mean_ttft["fcfs"], mean_ttft["priority"]
    assert 0.5 < fcfs[0] / fcfs[10] < 2.0  # FCFS: classes wait alike
    assert prio[0] < 0.25 * prio[10]  # priority: the interactive class goes first
