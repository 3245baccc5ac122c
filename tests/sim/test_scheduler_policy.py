"""Engine profiles' admission rules in the one engine step, by hand-worked examples."""

from __future__ import annotations

import pytest
from sim_helpers import make_plan

from servecap.errors import ServecapError
from servecap.sim import Engine, EngineRequest, engine_setup_from_plan
from servecap.sim.scheduler_policy import RETRACT_DECODE_STEPS, AdmissionPolicy, admission_policy
from servecap.specs import RequestShape
from servecap.specs.engines import SGLANG, engine_id_for_source, engine_profile

KV_BYTES_PER_TOKEN = 131_072  # Llama-3.1-8B, BF16: 2 x 8 KV heads x 128 x 2 B x 32 layers


def _engine(engine: str, *, blocks: int, block_size: int) -> Engine:
    plan = make_plan(
        engine=engine,
        kv_cache_memory_bytes=blocks * block_size * KV_BYTES_PER_TOKEN,
        max_model_len=512,
        block_size=block_size,
        request=RequestShape(100, 300),
    )
    assert plan.num_gpu_blocks == blocks
    return Engine(engine_setup_from_plan(plan, enable_prefix_caching=False))


def _run(e: Engine, n: int) -> int:
    """Add n requests of 100 + 300 tokens at t = 0, run them all; the first step's batch."""
    for i in range(n):
        e.add_request(EngineRequest(i, 100, 300), 0.0)
    first = e.step(0.0)
    t = first.duration_s
    while e.has_work():
        t += e.step(t).duration_s
        e.check_invariants()
    return first.num_running


def test_guaranteed_no_evict_admits_what_fits_to_completion_and_never_preempts() -> None:
    # 100 blocks of 32 tokens; a request reserves ceil((100 + 300) / 32) = 13 blocks: 100 // 13 = 7
    trt = _engine("trtllm", blocks=100, block_size=32)
    assert _run(trt, 20) == 7
    assert trt.preemptions == 0
    # vLLM admits on the prompt's 4 blocks (all 20: 80 blocks) and recomputes when they grow
    vllm = _engine("vllm", blocks=100, block_size=32)
    assert _run(vllm, 20) == 20
    assert vllm.preemptions > 0


def test_max_utilization_schedules_as_vllm() -> None:
    a, b = _engine("trtllm-max-utilization", blocks=100, block_size=32), _engine("vllm", blocks=100, block_size=32)
    assert _run(a, 20) == _run(b, 20)
    # the same schedule; each step is priced by its engine (TensorRT-LLM fuses its activation
    # kernels and keeps the global step overhead: core/activation_traffic.py, specs/perf.py)
    assert (a.preemptions, a.steps) == (b.preemptions, b.steps)


def test_sglang_reserves_its_share_of_the_output() -> None:
    # 1,000 one-token pages; each request takes its 100 prompt tokens now and reserves
    # 0.7 x 300 = 210 more; the k-th fits while 100 + 210 + 210 (k - 1) <= 1000 - 100 (k - 1):
    # k = 1: 310 <= 1000, k = 2: 520 <= 900, k = 3: 730 <= 800, k = 4: 940 > 700
    e = _engine("sglang", blocks=1000, block_size=1)
    assert _run(e, 20) == 3


def test_sglang_ratio_decays_resets_and_is_re_estimated() -> None:
    p = admission_policy(SGLANG)
    assert p.reserves and p.ratio == pytest.approx(0.7)
    p.on_decode_steps(300)
    assert p.ratio == pytest.approx(0.7 - 300 * (0.7 - 0.098) / 600)
    p.on_decode_steps(10_000)
    assert p.ratio == pytest.approx(0.098) and not p.decaying
    p.on_idle()
    assert p.ratio == pytest.approx(0.7)
    # retract_decode: (decoded + 20 x running) / (Σ max new + 1) = (100 + 100) / 1001
    p.on_retract(100, 1000, 5)
    assert RETRACT_DECODE_STEPS == 20
    assert p.ratio == pytest.approx(200 / 1001)
    assert p.retractions == 1


def test_trtllm_ratio_is_constant() -> None:
    p = admission_policy(engine_profile("trtllm"))
    p.on_decode_steps(1000)
    p.on_retract(10, 20, 1)
    assert p.ratio == 1.0 and p.whole_blocks


def test_bad_names_and_ratios_get_clear_errors() -> None:
    with pytest.raises(ServecapError, match=r"engine.*trtllm"):
        engine_profile("tensorrt")
    with pytest.raises(ValueError, match="reserve ratios"):
        AdmissionPolicy(True, 0.5, 0.7, 10, 100)


def test_corpus_engine_names_map_to_profiles() -> None:
    assert engine_id_for_source("TensorRT-LLM") == "trtllm"
    assert engine_id_for_source("SGLang 0.4") == "sglang"
    assert engine_id_for_source("vLLM (ROCm, 2024)") == "vllm"


@pytest.mark.parametrize(("engine", "decoded"), [("vllm", {0, 1}), ("sglang", {1})])
def test_sglang_runs_a_prefill_step_before_the_decoders(engine: str, decoded: set[int]) -> None:
    """A arrives alone and decodes; B arrives: vLLM's next step decodes A beside B's prefill,
    SGLang's prefills B alone (A waits a step: no mixed batches by default)."""
    e = _engine(engine, blocks=1000, block_size=1 if engine == "sglang" else 16)
    e.add_request(EngineRequest(0, 100, 10), 0.0)
    t = e.step(0.0).duration_s  # A's prefill and first token
    t += e.step(t).duration_s  # A's second token
    e.add_request(EngineRequest(1, 100, 10), t)
    out = e.step(t)
    assert set(out.decoded) == decoded
    assert out.first_tokens == (1,)
    e.check_invariants()
