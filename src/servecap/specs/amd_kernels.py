"""What AMD publishes about its GPUs' GEMMs, and the one factor servecap fits on top of it, for the
step as operations (``core.ops``) on AMD GPUs, where NVIDIA's measured kernel tables do not reach.

``MAX_ACHIEVABLE_TFLOPS[gpu][dtype]``: AMD's Max-Achievable FLOPs (MAF), hipBLASLt-bench on one
large, evenly tiled GEMM (M 4,096, N 4,864 or 3,648, K 32,896) at the clock the chip holds under
that load; AMD, "Measuring Max-Achievable FLOPs - Part 2", ROCm blogs (2025), Table 1 (ROCm
6.3.0, hipBLASLt db8e93b4fd6): MI300X 708 BF16 / 1,273 FP8 TFLOP/s, MI325X 843 / 1,519 (54% and
49% of the MI300X's 1,307 / 2,615 dense peaks: the dense-tensor clock under load is 1.2 GHz, not
the 2.1 GHz boost the peaks assume).

``GEMM_SHARE_OF_MAF``: the share of MAF an LLM step's GEMMs reach on an MI300X at tensor
parallelism 8, fitted on the training rows of the corpus's MI300X sources only
(oracle-mi300x-llama31-405b, rocm-vllm-devdocker-mi300x, vllm-recipes-pr431-mi300x;
``benchmarks/amd_gemm_fit.py`` recomputes it). A TP8 shard of a 70B-405B model's GEMMs
(``n x k`` of 8-220 M weights) at 1-256 tokens covers a few of the MI300X's 304 compute units
per tile wave; MAF's one large GEMM covers all of them evenly. No published per-shape MI300X GEMM
timings were found to measure this directly (docs/validation.md, "What the operations model still
gets wrong").
"""

from __future__ import annotations

MAF_SOURCE = 'AMD MAF ("Measuring Max-Achievable FLOPs - Part 2", ROCm blogs 2025, Table 1)'

MAX_ACHIEVABLE_TFLOPS: dict[str, dict[str, float]] = {
    "MI300X": {"bf16": 708.0, "fp16": 654.0, "fp8": 1273.0},
    "MI325X": {"bf16": 843.0, "fp16": 794.0, "fp8": 1519.0},
}

GEMM_SHARE_OF_MAF = 0.35
"""Fitted (see the module docstring)."""
