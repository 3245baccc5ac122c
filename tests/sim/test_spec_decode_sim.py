"""Speculative decoding and attention DP in the simulator: accepted bursts drawn per sequence and
step from an RNG passed in, the requests' token counts kept, the non-speculative path unchanged."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sim_helpers import make_plan

from servecap.catalog import resolve_model
from servecap.core.plan import plan
from servecap.core.spec_decode import spec_config_from_flags
from servecap.sim import engine_setup_from_plan, simulate
from servecap.specs import RequestShape
from servecap.specs.deployment import SpecDecodeConfig
from servecap.workload import RequestSpec

LLAMA = resolve_model("meta-llama/Llama-3.1-8B")


def _requests(n: int, rate: float, output: int = 128) -> list[RequestSpec]:
    return [RequestSpec(request_id=i, arrival_s=i / rate, prompt_tokens=512, output_tokens=output) for i in range(n)]


def _spec_plan(acceptance: tuple[float, ...] | None = None):  # type: ignore[no-untyped-def]
    base = make_plan()
    spec = spec_config_from_flags(LLAMA, "eagle3", None, None, None)
    if acceptance is not None:
        spec = SpecDecodeConfig("eagle3", len(acceptance), acceptance)
    return plan(replace(base.deployment, speculative=spec), request=RequestShape(512, 128))


def test_spec_decode_keeps_tokens_and_cuts_tpot_at_low_load() -> None:
    reqs = _requests(40, 0.5)
    plain = simulate(engine_setup_from_plan(make_plan()), reqs, np.random.default_rng(1))
    spec_setup = engine_setup_from_plan(_spec_plan())
    fast = simulate(spec_setup, reqs, np.random.default_rng(1))
    assert [r.output_tokens for r in fast.records()] == [128] * 40
    assert fast.summary.completed == 40
    tpot0, tpot1 = plain.summary.tpot_s.p50, fast.summary.tpot_s.p50
    assert tpot0 is not None and tpot1 is not None
    # 2.79 tokens a step for a step that costs more (4 verified tokens, 3 draft passes)
    assert 1.4 < tpot0 / tpot1 < 2.79
    again = simulate(spec_setup, reqs, np.random.default_rng(1))
    assert again.summary == fast.summary  # the same seed, the same draws
    other = simulate(spec_setup, reqs, np.random.default_rng(2))
    assert other.summary.tpot_s.p50 != fast.summary.tpot_s.p50


def test_full_acceptance_takes_the_fewest_steps() -> None:
    """Every draft accepted (k = 3): 128 tokens = the prefill's + ceil(127 / 4) = 32 bursts."""
    setup = engine_setup_from_plan(_spec_plan((1.0, 1.0, 1.0)))
    res = simulate(setup, _requests(1, 1.0), np.random.default_rng(0))
    rec = res.records()[0]
    assert rec.output_tokens == 128
    step = setup.step.step_time  # a lone decode step's time, at its context
    assert rec.end_s is not None and rec.first_token_s is not None
    decode_s = rec.end_s - rec.first_token_s
    from servecap.core.roofline import decode_batch

    one = step(decode_batch(1, 600.0, None), setup.efficiency).total_s
    assert decode_s == pytest.approx(32 * one, rel=0.05)


def test_attention_dp_pools_the_ranks() -> None:
    dsv3 = make_plan("deepseek-v3", "H200", tp=1, dp=8, ep=8, weights_dtype="fp8", max_model_len=8192)
    setup = engine_setup_from_plan(dsv3)
    assert setup.num_gpu_blocks == 8 * dsv3.num_gpu_blocks
    assert setup.max_num_seqs == 8 * dsv3.deployment.engine.max_num_seqs
    res = simulate(setup, _requests(30, 4.0, output=32), np.random.default_rng(0))
    assert res.summary.completed == 30
