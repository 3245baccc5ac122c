"""The simulator (``simulate``: the event loop driving one engine behind the server seam, runs of
decode-only steps advanced at once) against the step-by-step reference (``reference_loop``: one
``Engine.step`` call per event, nothing batched): identical per-request records, summaries,
engine counters and gauges, on workloads that exercise every path of the scheduler."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from reference_loop import reference_simulate
from sim_helpers import make_plan

from servecap.core.plan import Plan
from servecap.sim import EngineSetup, SimResult, engine_setup_from_plan, simulate
from servecap.sim.step_time import StepTimeModel
from servecap.workload import WorkloadSpec, workload_from_dict, workload_from_flags

CHAT: dict[str, Any] = {
    "prompt_tokens": {"kind": "lognormal", "median": 512, "sigma": 0.8, "max": 3000},
    "output_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.7, "max": 1000},
}


def _both(setup: EngineSetup, w: WorkloadSpec, seed: int, **kw: Any) -> tuple[SimResult, SimResult]:
    fast = simulate(setup, w, np.random.default_rng(seed), **kw)
    ref = reference_simulate(setup, w, np.random.default_rng(seed), **kw)
    # every per-request record (TTFT, end, queue time, preemptions, tokens, cached tokens, token
    # times when recorded) compares equal as floats, not approximately
    assert fast.records() == ref.records()
    for name in ("first_token_s", "end_s", "queue_time_s", "preemptions", "cached_prompt_tokens"):
        np.testing.assert_array_equal(getattr(fast.columns, name), getattr(ref.columns, name))
    assert fast.summary == ref.summary  # percentiles, throughput, gauges, time series
    assert fast.engine == ref.engine
    assert fast.token_times_s == ref.token_times_s
    for name in ("horizon_s", "steps", "events", "mean_in_system", "mean_running", "admitted"):
        assert getattr(fast, name) == getattr(ref, name), name
    # and the same loop taking every step on its own (no runs of decode-only steps)
    steps = simulate(setup, w, np.random.default_rng(seed), fast_forward=False, **kw)
    assert steps.decode_runs == 0
    assert steps.records() == fast.records() and steps.summary == fast.summary and steps.engine == fast.engine
    return fast, ref


def test_poisson_chat(llama8b_plan: Plan) -> None:
    w = workload_from_dict({"arrival": {"kind": "poisson", "rate_per_s": 12.0}, **CHAT, "num_requests": 600})
    fast, _ = _both(engine_setup_from_plan(llama8b_plan), w, 0)
    assert fast.summary.completed == 600 and fast.summary.mean_batch_size is not None


def test_bursty_gamma_arrivals(llama8b_plan: Plan) -> None:
    w = workload_from_dict({"arrival": {"kind": "gamma", "rate_per_s": 15.0, "cv": 4.0}, **CHAT, "num_requests": 600})
    fast, _ = _both(engine_setup_from_plan(llama8b_plan), w, 1)
    assert fast.summary.max_queue_depth is not None and fast.summary.max_queue_depth > 5


def test_heavy_tail_with_preemptions(small_pool_plan: Plan) -> None:
    w = workload_from_dict(
        {
            "arrival": {"kind": "poisson", "rate_per_s": 30.0},
            "prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.8, "max": 3000},
            "output_tokens": {
                "kind": "mixture",
                "components": [{"weight": 0.9, "dist": 40}, {"weight": 0.1, "dist": 1500}],
            },
            "num_requests": 300,
        }
    )
    fast, _ = _both(engine_setup_from_plan(small_pool_plan), w, 2)
    assert fast.summary.preemptions > 0


def test_preemptions_under_priority_and_token_times(small_pool_plan: Plan) -> None:
    w = workload_from_flags(
        rate=40.0, prompt_tokens=400, output_tokens=300, num_requests=200, prompt_sigma=0.8, output_sigma=0.8
    )
    setup = engine_setup_from_plan(small_pool_plan, scheduling_policy="priority")
    fast, _ = _both(setup, w, 3, record_token_times=True)
    assert fast.summary.preemptions > 0
    assert fast.token_times_s is not None
    assert all(len(r.token_times_s) == r.output_tokens for r in fast.records() if r.error is None)


def test_prefix_sharing_groups(small_pool_plan: Plan) -> None:
    w = workload_from_dict(
        {
            "arrival": {"kind": "poisson", "rate_per_s": 25.0},
            **CHAT,
            "prefix": {"groups": 4, "tokens": 480, "share": 0.8},
            "num_requests": 300,
        }
    )
    fast, _ = _both(engine_setup_from_plan(small_pool_plan), w, 4)
    assert fast.summary.prefix_cache_hit_rate is not None and fast.summary.prefix_cache_hit_rate > 0.1


def test_queue_limit_rejections(llama8b_plan: Plan) -> None:
    w = workload_from_flags(rate=300.0, prompt_tokens=2000, output_tokens=200, num_requests=300)
    fast, _ = _both(engine_setup_from_plan(llama8b_plan, waiting_queue_limit=4), w, 5)
    assert fast.summary.rejected > 0


def test_closed_loop_users(llama8b_plan: Plan) -> None:
    w = workload_from_dict(
        {
            "users": {"count": 24, "think_time_s": {"kind": "lognormal", "median": 1.0, "sigma": 0.8}, "turns": 5},
            "prompt_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.5},
            "output_tokens": {"kind": "lognormal", "median": 100, "sigma": 0.5},
            "duration_s": 40.0,
            "prefix": {"groups": 2, "tokens": 320},
        }
    )
    fast, _ = _both(engine_setup_from_plan(llama8b_plan), w, 6)
    assert fast.user_ids is not None and fast.summary.completed > 50


@pytest.mark.parametrize(
    "model", ["google/gemma-3-12b-it", "openai/gpt-oss-20b", "Qwen/Qwen3-Next-80B-A3B-Instruct"], ids=str
)
def test_sliding_window_and_hybrid_models(model: str) -> None:
    kw: dict[str, object] = {"weights_dtype": "fp8"} if "Next" in model else {}
    setup = engine_setup_from_plan(make_plan(model, "H200", max_model_len=8192, **kw))
    w = workload_from_flags(
        rate=15.0, prompt_tokens=1500, output_tokens=600, num_requests=150, prompt_sigma=0.7, output_sigma=0.9
    )
    fast, _ = _both(setup, w, 7)
    assert fast.summary.completed == 150


def test_sliding_window_with_preemptions() -> None:
    p = make_plan("google/gemma-3-12b-it", "H200", max_model_len=4096, kv_cache_memory_bytes=2 * 1024**3)
    w = workload_from_flags(
        rate=20.0, prompt_tokens=1200, output_tokens=800, num_requests=120, prompt_sigma=0.7, output_sigma=0.9
    )
    fast, _ = _both(engine_setup_from_plan(p), w, 8)
    assert fast.summary.preemptions > 0


def test_exact_step_time_model(llama8b_plan: Plan) -> None:
    w = workload_from_dict({"arrival": {"kind": "poisson", "rate_per_s": 12.0}, **CHAT, "num_requests": 150})
    _both(engine_setup_from_plan(llama8b_plan), w, 9, exact_step_time=True)


def test_roofline_slopes_give_the_model_time_bit_for_bit(llama8b_plan: Plan) -> None:
    """The engine prices steps from ``roofline_slopes`` and ``base``: equal to ``time``."""
    setup = engine_setup_from_plan(llama8b_plan)
    model = StepTimeModel(setup.step, setup.efficiency)
    slopes = model.roofline_slopes()
    assert slopes is not None
    k, w, p, q, sq = slopes
    assert sq > 0.0  # the LM head's logits: one row per sequence
    rng = np.random.default_rng(0)
    for _ in range(2000):
        n = int(rng.integers(1, 8192))
        seqs = int(rng.integers(1, 256))
        kv = float(rng.integers(0, 10**6))
        pairs = kv + float(rng.integers(0, 10**7))
        b = model.base(n)
        mem = b[0] + k * kv + w * kv
        comp = b[1] + sq * seqs + p * pairs + q * pairs
        assert (mem if mem > comp else comp) + b[2] == model.time(n, seqs, kv, kv, pairs, pairs, n - seqs)
    assert StepTimeModel(setup.step, setup.efficiency, exact=True).roofline_slopes() is None
