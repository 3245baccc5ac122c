"""The vectorised sweep agrees with plan() point by point (same blocks, concurrency, step time)."""

from __future__ import annotations

import pytest

from servecap.app.sweep import sweep
from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.capacity import decode_step
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan

pytest.importorskip("numpy")


@pytest.mark.parametrize(
    ("model", "gpu", "tp", "wd", "kv", "length"),
    [
        ("meta-llama/Llama-3.1-8B", "H100", 1, "bf16", "auto", 8192),
        ("Qwen/Qwen3-30B-A3B", "L40S", 2, "fp8", "fp8", 32768),
        ("google/gemma-3-27b-it", "H200", 1, "bf16", "auto", 16384),
        ("openai/gpt-oss-120b", "B200", 2, "bf16", "fp8", 131072),
    ],
)
def test_sweep_matches_plan(model: str, gpu: str, tp: int, wd: str, kv: str, length: int) -> None:
    m, g = resolve_model(model), lookup_gpu(gpu)
    r = sweep([m], [g], weights_dtypes=[wd], kv_dtypes=[kv], tps=[tp], lengths=[length])
    p = plan(build_deployment(m, g, tp=tp, weights_dtype=wd, kv_cache_dtype=kv, max_model_len=length))
    assert r.num_blocks[0, 0, 0] == p.stage.kv.num_blocks
    assert r.max_concurrency[0, 0, 0] == pytest.approx(p.stage.kv.max_concurrency)
    batch = max(min(int(p.stage.kv.max_concurrency), p.deployment.engine.max_num_seqs), 1)
    expected = decode_step(p.step, batch, length / 2, p.efficiency).total_s
    assert r.decode_step_s[0, 0, 0] == pytest.approx(expected, rel=1e-9)
