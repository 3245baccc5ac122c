"""Inputs of the performance, capacity and cost model: efficiency factors, request shape, SLOs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Achievable fractions of the spec sheet and fixed costs of one engine step.

    The defaults are fitted to the training half of servecap's corpus of published measurements
    (``src/servecap/validation/data``; the 40 rows whose ``split_of`` is ``train``, listed in
    docs/validation.md, "Adopted defaults"): least squares of the log errors of their 62
    throughput, TPOT/ITL and E2E values, Nelder-Mead (``validation/fit.py``,
    ``benchmarks/validate_fit.py``). ``servecap calibrate`` replaces them with coefficients fitted
    to one real server (the same fields, in a calibration file).

    - ``bandwidth_efficiency`` 0.59: fitted (0.80 before, a planning assumption). Set mostly by
      the memory-bound rows: the vLLM single-stream and small-batch TPOTs on A100-80GB
      (tenstorrent-issue340-a100: Qwen3-14B and Qwen3-1.7B, concurrency 1-32), MI300X
      (oracle-mi300x-llama31-405b single-request rows, vllm-recipes-pr431-mi300x) and RTX 4090
      (mushfiqrahman-rtx4090-mistral7b), and the TensorRT-LLM H100/H200 rows of
      trtllm-perf-overview. It is the achieved fraction of peak HBM bandwidth *including* what
      the roofline leaves out (kernel launch gaps between layers, imperfect overlap of weight
      streaming with compute, activation traffic), which is why it sits below the 80-90% a
      single streaming kernel reaches.
    - ``compute_efficiency`` 0.60 for BF16/FP16 compute: kept (the training rows are almost
      all memory-bound at BF16, so the fit does not identify it and runs to its bound of 1.0);
      large prefill GEMMs reach about 60% of dense tensor peak.
    - ``low_precision_compute_efficiency`` 0.42 for FP8/FP4 compute (weights whose
      ``WeightDtype.compute`` is ``fp8`` or ``fp4``): fitted on the FP8/FP4 saturated rows of
      trtllm-perf-overview (H100-SXM, H200-SXM, B200; Llama-3.1-8B, Llama-3.3-70B, Qwen3 MoE)
      and vllm-issue-20710-b200. FP8 GEMMs reach a smaller share of their (doubled) peak than
      BF16 ones (per-block scaling, quantisation of activations). ``None``: the same as
      ``compute_efficiency`` (what a calibration file gives: it is fitted at one dtype).
    - ``step_overhead_s`` 0.00207: fitted (2 ms before): the per-step scheduler, sampling and
      launch cost not hidden by CUDA graphs; set by the single-stream TPOT rows above, whose
      step is this overhead plus the weight-streaming time.
    - ``allreduce_latency_s`` 10e-6: the fixed cost of one tensor-parallel all-reduce
      (NCCL's small-message latency within one NVLink node is of this order).
    - ``prefill_s_per_token``: an extra per-prompt-token cost (tokenisation, input processing)
      that calibration can fit; 0 by default.
    """

    bandwidth_efficiency: float = 0.59
    compute_efficiency: float = 0.60
    step_overhead_s: float = 0.00207
    allreduce_latency_s: float = 10e-6
    prefill_s_per_token: float = 0.0
    low_precision_compute_efficiency: float | None = 0.42
    bandwidth_efficiency_by_gpu_family: tuple[tuple[str, float], ...] = ()

    def bandwidth_efficiency_on(self, gpu_family: str) -> float:
        """The bandwidth efficiency on a GPU family (``specs.gpu.gpu_family``): its own fitted
        value where the corpus supports one, else ``bandwidth_efficiency``."""
        for family, value in self.bandwidth_efficiency_by_gpu_family:
            if family == gpu_family:
                return value
        return self.bandwidth_efficiency

    def compute_efficiency_at(self, rate: str) -> float:
        """The compute efficiency of GEMMs at ``rate`` (``bf16``, ``fp8`` or ``fp4``)."""
        if rate != "bf16" and self.low_precision_compute_efficiency is not None:
            return self.low_precision_compute_efficiency
        return self.compute_efficiency


@dataclass(frozen=True, slots=True)
class RequestShape:
    """A typical request: the defaults are vLLM's benchmark random-dataset lengths (1024 in / 128 out)."""

    prompt_tokens: int = 1024
    output_tokens: int = 128

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    @property
    def mean_held_tokens(self) -> float:
        """Tokens a request holds on average over its decode phase (prompt + half the output)."""
        return self.prompt_tokens + self.output_tokens / 2.0


@dataclass(frozen=True, slots=True)
class Slo:
    ttft_s: float | None = None
    tpot_s: float | None = None


INTERACTIVE_SLO = Slo(ttft_s=2.0, tpot_s=0.1)
"""The default interactive SLO of ``plan``, ``compare`` and ``capacity``: first token within 2 s
(MLPerf Inference's TTFT bound for the Llama-2-70B server scenario, v4.0 onwards) and 100 ms per
output token, 10 tokens/s: faster than people read (about 4 words, some 5-6 tokens, per second),
half MLPerf's 200 ms server TPOT bound so a chat streams smoothly. ``plan`` checks it against its
steady-state means, ``capacity`` against simulated p99s."""


@dataclass(frozen=True, slots=True)
class CostInputs:
    """Prices (None: the GPU catalog's indicative price) and how users use the service.

    ``duty_cycle`` is the share of a user's session spent generating; chat users read and type
    most of the time (about 80% idle), so one concurrent slot serves 1/duty_cycle users.
    ``lifetime_years`` spreads a purchase price over the hardware's service life.
    """

    rent_usd_per_gpu_hour: float | None = None
    purchase_usd_per_gpu: float | None = None
    duty_cycle: float = 0.2
    lifetime_years: float = 4.0
