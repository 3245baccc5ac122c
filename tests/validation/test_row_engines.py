"""Every corpus row runs its source's engine profile (issue 21: TensorRT-LLM rows simulated with
vLLM's scheduler were one of the named causes of error)."""

from __future__ import annotations

from servecap.sim.scheduler_policy import admission_policy
from servecap.specs.engines import engine_profile
from servecap.validation.corpus import load_corpus
from servecap.validation.predict import _deployment


def test_tensorrt_llm_rows_run_its_no_evict_scheduler() -> None:
    rows = [r for r in load_corpus() if r.source.engine.lower().startswith("tensorrt")]
    assert len(rows) == 42  # trtllm-perf-overview (29), trtllm-performance-v061 (8), trtllm-tuning-guide-h100 (5)
    for r in rows:
        assert r.engine == "trtllm", r.full_id
        dep = _deployment(r, None)
        assert (dep.engine.engine, dep.engine.block_size) == ("trtllm", 32), r.full_id
        policy = admission_policy(engine_profile(dep.engine.engine))
        # GUARANTEED_NO_EVICT: a request reserves its prompt and its whole output on admission
        assert policy.reserves and policy.whole_blocks and policy.ratio == 1.0, r.full_id


def test_vllm_rows_run_vllms_recompute_scheduler() -> None:
    rows = [r for r in load_corpus() if r.source.engine.lower().startswith("vllm")]
    assert rows and all(r.engine == "vllm" for r in rows)
    assert not admission_policy(engine_profile("vllm")).reserves
