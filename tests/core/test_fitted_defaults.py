"""The step-time defaults fitted to the corpus (specs/perf.py) and how an explicit value overrides them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servecap.calibration import load_calibration
from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.capacity import decode_batch
from servecap.core.defaults import build_deployment
from servecap.core.roofline import step_cost
from servecap.specs.gpu import gpu_family
from servecap.specs.perf import Efficiency


def test_defaults_by_gpu_family_and_dtype() -> None:
    e = Efficiency()
    assert e.bandwidth_efficiency_on("H100") == 0.89
    assert e.bandwidth_efficiency_on("A100") == 0.621
    assert e.bandwidth_efficiency_on("MI300X") == 0.418
    assert e.bandwidth_efficiency_on("B200") == 0.59  # one training value: the global fit
    assert e.bandwidth_efficiency_on("L40S") == 0.59  # not in the corpus
    assert e.compute_efficiency_at("bf16") == 0.60
    assert e.compute_efficiency_at("fp8") == 0.42
    # FP4 GEMMs at the FP4/FP8 ratio of NVIDIA's B200 kernel timings: 0.42 x 0.918 (vLLM)
    assert e.compute_efficiency_at("fp4") == pytest.approx(0.42 * 0.918)
    assert e.compute_efficiency_at("fp4", "trtllm") == pytest.approx(0.42 * 0.743)
    assert e.compute_efficiency_at("fp8", "trtllm") == 0.42  # no per-engine value adopted
    assert e.step_overhead_s is None  # the engine's value on the family, else the global fit
    assert e.step_overhead_on("H100") == 0.00113  # vLLM on H100: fitted on its training rows
    assert e.step_overhead_on("H100", "trtllm") == 0.00207
    # vLLM on H200: fitted on the first-party training rows the default (auto) runs on the roofline
    assert e.step_overhead_on("H200") == 0.00145
    assert e.step_overhead_on("H200", "trtllm") == 0.00207
    # the operations on H200: H100's vLLM 0.26.0 value (the H200 fit runs to its bound; specs.perf)
    assert e.operations_step_overhead_on("H200") == 0.00071
    assert e.step_overhead_on("A100") == 0.00207
    assert Efficiency(step_overhead_s=0.003).step_overhead_on("H100") == 0.003  # explicit wins


def test_an_explicit_value_holds_for_every_gpu_and_dtype() -> None:
    e = Efficiency(bandwidth_efficiency=0.5, compute_efficiency=0.7)
    assert {e.bandwidth_efficiency_on(f) for f in ("H100", "A100", "L40S")} == {0.5}
    assert {e.compute_efficiency_at(r) for r in ("bf16", "fp8", "fp4")} == {0.7}


def test_gpu_family_of_catalog_ids() -> None:
    assert gpu_family("H100-SXM") == lookup_gpu("H100").family == "H100"
    assert gpu_family("A100-80GB-PCIe") == "A100"
    assert gpu_family("RTX-4090") == "RTX-4090"


def test_h100_decode_step_uses_the_family_bandwidth() -> None:
    """Llama-3.1-8B BF16 on one H100, one sequence of 1,000 tokens: (16,060,522,496 weight bytes
    + 1,000 x 131,072 KV bytes) / (3.35e12 B/s x 0.89) = 5.431 ms, then the token's 5,767,168
    activation bytes (core/activation_traffic.py) at the same bandwidth, 1.934 us, and vLLM's
    1.13 ms step overhead on an H100 (2.07 ms under TensorRT-LLM, whose activation kernels are
    fused: 2,097,152 bytes, the norms')."""
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    cost = step_cost(dep, stage_weights_bytes=8_030_261_248 * 2)
    st = cost.step_time(decode_batch(1, 1000, None), Efficiency())
    assert st.memory_s == pytest.approx((16_060_522_496 + 1000 * 131_072) / (3.35e12 * 0.89))
    assert st.activation_s == pytest.approx(5_767_168 / (3.35e12 * 0.89))
    assert st.total_s == pytest.approx(st.memory_s + st.activation_s + 0.00113)
    trt = build_deployment(
        resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192, engine="trtllm"
    )
    st_trt = step_cost(trt, stage_weights_bytes=8_030_261_248 * 2).step_time(decode_batch(1, 1000, None), Efficiency())
    assert st_trt.activation_s == pytest.approx(2_097_152 / (3.35e12 * 0.89))
    assert st_trt.total_s == pytest.approx(st_trt.memory_s + st_trt.activation_s + 0.00207)


def test_fp8_weights_compute_at_the_fp8_efficiency() -> None:
    """FP8 weights run FP8 GEMMs on an H100, at 0.42 of the FP8 dense peak (ideal time / 0.42)."""
    dep = build_deployment(
        resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), weights_dtype="fp8", max_model_len=8192
    )
    cost = step_cost(dep, stage_weights_bytes=8_030_261_248)
    assert cost.compute_rate == "fp8"
    big = decode_batch(512, 1000, None)
    ideal = cost.step_time(big, Efficiency(bandwidth_efficiency=1.0, compute_efficiency=1.0, step_overhead_s=0.0))
    assert cost.step_time(big, Efficiency()).compute_s == pytest.approx(ideal.compute_s / 0.42)


def test_a_calibration_file_replaces_every_default(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text(
        json.dumps(
            {
                "model": "any",
                "gpu": "any",
                "coefficients": {"bandwidth_efficiency": 0.7, "compute_efficiency": 0.5, "step_overhead_s": 0.003},
            }
        )
    )
    e = load_calibration(path).efficiency()
    assert e.bandwidth_efficiency_on("H100") == 0.7
    assert e.compute_efficiency_at("fp8") == 0.5
    assert e.step_overhead_s == 0.003
