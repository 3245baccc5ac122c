"""The SLO batch search (``core.capacity.slo_batch``) guides its probes by TPOT but keeps
bisection's bracket: it must return exactly what plain bisection returns."""

from __future__ import annotations

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.capacity import SloBatch, slo_batch, steady_tpot_s, ttft_s
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.specs.perf import Efficiency, RequestShape, Slo


def _bisection(plan_, request: RequestShape, eff: Efficiency, slo: Slo) -> SloBatch:
    """The search as it was: check the upper limit, then bisect."""
    eng = plan_.deployment.engine
    upper = min(plan_.kv_batch_limit, eng.max_num_seqs)
    limited_by = "kv_cache" if plan_.kv_batch_limit <= eng.max_num_seqs else "max_num_seqs"

    def ok(b: int) -> str | None:
        if (
            slo.tpot_s is not None
            and steady_tpot_s(plan_.step, b, request, eff, eng.max_num_batched_tokens) > slo.tpot_s
        ):
            return "tpot_slo"
        if slo.ttft_s is not None and ttft_s(plan_.step, b, request, eff, eng.max_num_batched_tokens) > slo.ttft_s:
            return "ttft_slo"
        return None

    if upper <= 0:
        return SloBatch(0, limited_by)
    failed = ok(upper)
    if failed is None:
        return SloBatch(upper, limited_by)
    lo, hi = 0, upper
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid) is None:
            lo = mid
        else:
            hi = mid
    return SloBatch(lo, failed)


@pytest.mark.parametrize(
    ("model", "gpu", "weights"),
    [
        ("meta-llama/Llama-3.1-8B", "H100", "bf16"),
        ("meta-llama/Llama-3.1-70B", "H200", "fp8"),
        ("Qwen/Qwen3-30B-A3B", "H100", "bf16"),
        ("google/gemma-3-27b-it", "A100-80GB-SXM", "bf16"),
        ("Qwen/Qwen3-0.6B", "L40S", "bf16"),
    ],
)
def test_the_same_batch_as_bisection(model: str, gpu: str, weights: str) -> None:
    dep = build_deployment(resolve_model(model), lookup_gpu(gpu), weights_dtype=weights, max_model_len=8192)
    eff = Efficiency()
    base = plan(dep)
    checked = 0
    for prompt, output in ((128, 128), (1024, 128), (4000, 500), (7000, 1000)):
        request = RequestShape(prompt, output)
        for tpot_ms in (None, 8, 12, 20, 35, 50, 80, 150):
            for ttft_ms in (None, 100, 500, 2000):
                slo = Slo(
                    ttft_s=None if ttft_ms is None else ttft_ms / 1e3, tpot_s=None if tpot_ms is None else tpot_ms / 1e3
                )
                eng = dep.engine
                got = slo_batch(
                    base.step,
                    request,
                    eff,
                    slo,
                    kv_limit=base.kv_batch_limit,
                    max_num_seqs=eng.max_num_seqs,
                    max_num_batched_tokens=eng.max_num_batched_tokens,
                )
                assert got == _bisection(base, request, eff, slo), (prompt, output, tpot_ms, ttft_ms)
                checked += 1
    assert checked == 4 * 8 * 4


def test_compiled_efficiency_rules_are_efficiencys() -> None:
    """The roofline's copies of Efficiency's two lookups (kept in the compiled module for
    speed) give Efficiency's own answers."""
    from servecap.core import roofline
    from servecap.specs.perf import DEFAULT_BANDWIDTH_EFFICIENCY_BY_GPU_FAMILY

    for eff in (Efficiency(), Efficiency(bandwidth_efficiency=0.7, compute_efficiency=0.5)):
        for fam in (*DEFAULT_BANDWIDTH_EFFICIENCY_BY_GPU_FAMILY, "L40S", ""):
            assert roofline._bandwidth_efficiency(eff, fam) == eff.bandwidth_efficiency_on(fam)
        for rate in ("bf16", "fp8", "fp4"):
            assert roofline._compute_efficiency(eff, rate) == eff.compute_efficiency_at(rate)
