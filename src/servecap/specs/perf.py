"""Inputs of the performance, capacity and cost model: efficiency factors, request shape, SLOs."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_BANDWIDTH_EFFICIENCY = 0.59
"""Global bandwidth efficiency, fitted (0.80 before, a planning assumption): see
:class:`Efficiency`."""

DEFAULT_BANDWIDTH_EFFICIENCY_BY_GPU_FAMILY: dict[str, float] = {
    "A100": 0.621,
    "H100": 0.89,
    "H200": 0.714,
    "MI300X": 0.418,
    "RTX-4090": 0.834,
}
"""Per-GPU-family bandwidth efficiencies, fitted where the corpus supports one: see
:class:`Efficiency`."""

DEFAULT_COMPUTE_EFFICIENCY = 0.60
"""BF16/FP16 GEMMs: kept, not identified by the corpus (see :class:`Efficiency`)."""

DEFAULT_LOW_PRECISION_COMPUTE_EFFICIENCY = 0.42
"""FP8/FP4 GEMMs, fitted: see :class:`Efficiency`."""

BANDWIDTH_EFFICIENCY_BY_ENGINE: dict[str, dict[str, float]] = {}
"""Per-engine, per-GPU-family bandwidth efficiencies, for values fitted on one engine's training
rows with its own scheduler and KV budget (``benchmarks/fit_engine.py``); an engine or family
not listed takes :data:`DEFAULT_BANDWIDTH_EFFICIENCY_BY_GPU_FAMILY`. None is adopted: the
TensorRT-LLM refits (H100 0.74-0.82, H200 0.55-0.66 by the objective) did not lower the
held-out error (docs/validation.md, "Engine profiles"), the rule for adopting a value."""

LOW_PRECISION_COMPUTE_EFFICIENCY_BY_ENGINE: dict[str, float] = {}
"""Per-engine FP8/FP4 GEMM efficiencies, likewise; none adopted (TensorRT-LLM's fitted 0.37-0.46
made its held-out rows worse); every engine takes
:data:`DEFAULT_LOW_PRECISION_COMPUTE_EFFICIENCY`."""

FP4_TO_FP8_GEMM_EFFICIENCY_BY_ENGINE: dict[str, float] = {
    "vllm": 0.918,
    "sglang": 0.931,
    "trtllm": 0.743,
    "trtllm-max-utilization": 0.743,
}
"""How much of its peak an FP4 GEMM reaches relative to an FP8 GEMM on the same GPU, by engine:
the median achieved fraction of the tensor peak over every GEMM of at least 4,096 x 4,096 x
4,096 in the kernel timings NVIDIA measured on B200 and ships with AIConfigurator 0.12.0
(Apache-2.0; ``systems/data/b200_sxm/gemm/<engine>/<version>/gemm_perf.parquet``, peaks from
``systems/b200_sxm.yaml``: FP8 4,500, FP4 9,000 TFLOP/s): vLLM 0.24.0 nvfp4 0.436 / fp8 0.475,
SGLang 0.5.14 0.443 / 0.476, TensorRT-LLM 1.3.0rc20 0.392 / 0.527. FP4 kernels use half the
FP8 time per FLOP at best, and reach a smaller share of it; the FP8/FP4 efficiency fitted on
FP8 rows (:data:`DEFAULT_LOW_PRECISION_COMPUTE_EFFICIENCY`) is scaled by this for FP4 weights
(``benchmarks/gemm_efficiency.py`` recomputes the ratios from the package's tables)."""

DEFAULT_STEP_OVERHEAD_S = 0.00207
"""The per-step cost not hidden by CUDA graphs, fitted on every engine's training rows: see
:class:`Efficiency`."""

STEP_OVERHEAD_S_BY_ENGINE: dict[str, dict[str, float]] = {"vllm": {"H100": 0.00113, "H200": 0.00145}}
"""Per-engine, per-GPU-family step overheads, fitted on one engine's training rows on one family
(``benchmarks/fit_engine.py --parameter step_overhead``: golden section on the median absolute
log error of their throughput, TPOT and E2E values, the family's bandwidth efficiency fixed)
where they carry at least ``MIN_FAMILY_VALUES`` such values; elsewhere
:data:`DEFAULT_STEP_OVERHEAD_S`. vLLM on H100: the first-party vLLM 0.26.0 training rows
(servecap-vllm-h100-sweep c16, c64, c256, Poisson 8/s and 24/s; 35 values). The global 2.07 ms
was set by the single-stream rows of older engines beside bandwidths fitted on TensorRT-LLM; vLLM
0.26.0 replays whole decode steps as CUDA graphs, and its measured single-stream step (6.50 ms)
is the bare weight stream of the same GPU (5.42 ms, ``benchmarks/data/gpu_ceilings_h100.json``)
plus about 1.1 ms (docs/validation.md, "First-party vLLM rows"); AIConfigurator's measured vLLM
0.24 kernels give 1.37 ms for the same deployments (``validation/aic_steps.json``). vLLM on H200
1.448 ms: the first-party vLLM 0.26.0 training rows the default step model runs on the roofline
(``fit_engine.py --engine vllm --family H200 --parameter step_overhead --chosen-rows-only``:
servecap-vllm-h200-sweep Llama-3.1-70B FP8 c4, c16 and c256, Llama-3.1-8B FP8 c16, Qwen3-30B-A3B
c4, c64 and Poisson 8/s; 49 values, median |log error| 0.1345 fitted; the
DeepSeek-R1 rows run on the operations, whose overhead keeps 2.07 ms,
:data:`OPERATIONS_STEP_OVERHEAD_S_BY_ENGINE`)."""

OPERATIONS_STEP_OVERHEAD_S_BY_ENGINE: dict[str, dict[str, float]] = {"vllm": {"H100": 0.00071, "H200": 0.00071}}
"""The per-step CPU cost of the step-as-operations model (``Efficiency.step_model =
"operations"``), where it differs from the roofline's: the measured kernels carry their own launch
and tail latencies, which the roofline's overhead had absorbed. Fitted by the same rule
(``benchmarks/fit_engine.py --parameter step_overhead --step-model operations``: golden section on
the median |log error| of an engine's training rows on a family with at least ``MIN_FAMILY_VALUES``
values): vLLM on H100 0.713 ms (the 35 values of the five first-party training rows; median |log
error| 0.062). TensorRT-LLM on H100 and H200 ran to the 0.2 ms bound (not identified: the
measured TensorRT-LLM 1.3 kernels are slower than the 1.0 rows), so they keep the roofline's.
vLLM on H200 0.713 ms, H100's value carried over: since ``auto`` runs the dense vLLM H200 class on
the operations (``specs.step_choice``, the chip level), the operations' H200 overhead is that of
the first-party vLLM 0.26.0 rows, whose whole decode step is one CUDA-graph replay on either Hopper
chip (the CPU's cost per step does not depend on the HBM); the H200 fit itself on the training
rows the operations run (``fit_engine.py --engine vllm --family H200 --parameter step_overhead
--step-model operations --chosen-rows-only``: six rows, 34 values) runs to the 0.2 ms bound (not
identified: their median |log error| falls from 10.0% at the global 2.07 ms to 5.9% at 0.71 ms and
3.6% at the bound — the measured FP8 GEMM lines already carry a per-GEMM fixed cost,
docs/validation.md, "The step as operations, third round"), so the identified Hopper value is
taken, not the bound."""

MOE_TO_DENSE_GEMM_EFFICIENCY_BY_ENGINE: dict[str, float] = {
    "vllm": 0.473,
    "sglang": 0.483,
    "trtllm": 0.559,
    "trtllm-max-utilization": 0.559,
}
"""The share of the tensor peak an MoE layer's grouped expert GEMMs reach relative to a dense GEMM
of the same GPU, engine and dtype, by engine: routed expert FLOPs run at the compute efficiency
times this. The median over H100, H200 and B200 and every dtype and kernel of the ratio of the
expert layers' achieved share of peak (128 experts, 8 per token, hidden 2,048 and 4,096 as in
Qwen3-30B-A3B and Qwen3-235B-A22B, balanced routing, at least 4,096 tokens) to the large dense
GEMMs' (m, n, k >= 4,096), both from the kernel timings NVIDIA measured and ships with
AIConfigurator 0.12.0 (Apache-2.0; ``systems/data/<system>/{moe,gemm}/<engine>/<version>/``;
``benchmarks/moe_gemm_efficiency.py`` recomputes them): grouped GEMMs over a few hundred tokens
per expert, with the routing's gather and scatter, reach about half a dense GEMM's share."""

DEFAULT_REQUEST_OVERHEAD_S = 0.0065
"""The server's per-request cost outside the engine's steps, fitted: see :class:`Efficiency`."""


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Achievable fractions of the spec sheet and fixed costs of one engine step.

    The defaults are fitted to the training half of servecap's corpus of published measurements
    (``src/servecap/validation/data``; the 40 rows whose ``split_of`` is ``train``, which
    ``servecap validate --split train`` lists; docs/validation.md, "Adopted defaults", gives the
    sources and row counts behind each value): least squares of the log errors of their 62
    throughput, TPOT/ITL and E2E values, Nelder-Mead (``validation/fit.py``,
    ``benchmarks/validate_fit.py``). ``servecap calibrate`` replaces them with coefficients fitted
    to one real server (the same fields, in a calibration file). A value given explicitly holds
    for every GPU and dtype; ``None`` (the default) means the fitted default below.

    - ``bandwidth_efficiency`` (``None``: the GPU family's fitted value, else 0.59). The global
      0.59 (0.80 before, a planning assumption) is set mostly by the memory-bound rows: the vLLM
      single-stream TPOTs on A100-80GB (tenstorrent-issue340-a100: Qwen3-14B and Qwen3-1.7B),
      MI300X (oracle-mi300x-llama31-405b batch 1 and 4, vllm-recipes-pr431-mi300x) and the
      TensorRT-LLM H100/H200 rows of trtllm-perf-overview. It is the achieved fraction of peak
      HBM bandwidth *including* what the roofline leaves out (kernel launch gaps between layers,
      imperfect overlap of weight streaming with compute, activation traffic), which is why it
      sits below the 80-90% a single streaming kernel reaches. Refitted per GPU family (every
      other value held at the global fit; golden section, ``fit_bandwidth_by_family``) where
      the family's training rows carry at least 8 throughput/TPOT/E2E values (the fixed rule,
      ``validation.fit.MIN_FAMILY_VALUES``); other families (B200, L40S, ...) use 0.59. Each
      absorbs its sources' engine as well as the chip (docs/validation.md):

      * A100 0.621: tenstorrent-issue340-a100 (vLLM; Qwen3-1.7B and Qwen3-14B, concurrency 1);
      * H100 0.89: trtllm-perf-overview (Llama-3.1-8B FP8, Llama-3.3-70B FP8 TP2) and
        trtllm-performance-v061 (Llama-2-70B FP8, TP2/TP4 static batches), TensorRT-LLM;
      * H200 0.714: trtllm-perf-overview (Llama-3.1-8B and Llama-3.3-70B FP8, Qwen3-235B-A22B
        FP8 TP8), TensorRT-LLM;
      * MI300X 0.418: oracle-mi300x-llama31-405b (vLLM ROCm 2024, Llama-3.1-405B FP8 TP8,
        batches 1-256) and vllm-recipes-pr431-mi300x (Qwen3-8B, concurrency 32);
      * RTX-4090 0.834: mushfiqrahman-rtx4090-mistral7b (concurrency 8-32) and
        databasemart-rtx4090 (7-9B offline), vLLM.
    - ``compute_efficiency`` (``None``: 0.60 for BF16/FP16 GEMMs, 0.42 for FP8/FP4 ones, by
      the weights' ``WeightDtype.compute``). 0.60 is kept: the training rows are almost all
      memory-bound at BF16, so the fit does not identify it (it runs to its bound of 1.0);
      large prefill GEMMs reach about 60% of dense tensor peak. 0.42 is fitted, on the FP8/FP4
      training rows with FP8 weights: trtllm-perf-overview (H100-SXM, H200-SXM; Llama-3.1-8B,
      Llama-3.3-70B, Qwen3-235B-A22B), trtllm-performance-v061 (H100, Llama-2-70B),
      oracle-mi300x-llama31-405b (MI300X) and vllm-pr43232-b200 (Qwen3-235B-A22B): FP8 GEMMs
      reach a smaller share of their doubled peak than BF16 ones (activation quantisation,
      per-block scales).
    - ``step_overhead_s`` (``None``: the engine's value on the GPU family,
      :data:`STEP_OVERHEAD_S_BY_ENGINE`, else 0.00207): fitted (2 ms before): the per-step
      scheduler, sampling and launch cost not hidden by CUDA graphs; set by the single-stream TPOT
      rows above, whose step is this overhead plus the weight-streaming time.
    - ``allreduce_latency_s`` 10e-6: the fixed cost of one tensor-parallel all-reduce
      (NCCL's small-message latency within one NVLink node is of this order).
    - ``prefill_s_per_token``: an extra per-prompt-token cost (tokenisation, input processing)
      that calibration can fit; 0 by default.
    - ``request_overhead_s`` 0.0065: the API server's cost per request outside the engine's
      steps (HTTP, tokenisation, handing the request to the engine, detokenising and streaming
      the first token), added to every TTFT and E2E the client sees: the planner adds it to its
      TTFT, the simulator lets the engine see each request this long after the client sent it
      (docs/simulator.md); the emulator charges it less its own ~1 ms HTTP path (``emulator.driver``). Fitted by
      the closed form of the TTFT stage (``validation.fit.ttft_overhead``: minimises the squared
      relative TTFT error) on the training half's low-load rows only (one request in flight:
      concurrency 1 or a batch of 1), where no queueing can stand in for it
      (``validation.fit.fit_request_overhead``): the 10 TTFT values of six
      tenstorrent-issue340-a100 rows (Qwen3-1.7B and Qwen3-14B, vLLM), two
      trtllm-performance-v061 rows (Llama-2-70B on A100, TensorRT-LLM) and the tuned FP8
      Llama-3.3-70B batch-1 row of trtllm-tuning-guide-h100 (TensorRT-LLM 0.16.0 on 4x H100);
      6.47 ms, given as 6.5 (6.73 ms, given as 6.7, on the 9 values before that row; 7.45 ms
      before the prefill's activation kernels were priced, core/activation_traffic.py).
      A calibration file that does not give it takes this default (calibrate fits step times).
    - ``step_model``: ``roofline`` (the default: one ``max(memory, compute)`` over the whole step,
      ``core/roofline.py``) or ``operations`` (the step as the sum of its operations, each from
      NVIDIA's measured kernel tables where they cover it and the roofline elsewhere,
      ``core/ops``; docs/simulator.md, "The step as operations").
    """

    bandwidth_efficiency: float | None = None
    compute_efficiency: float | None = None
    step_overhead_s: float | None = None
    allreduce_latency_s: float = 10e-6
    prefill_s_per_token: float = 0.0
    request_overhead_s: float = DEFAULT_REQUEST_OVERHEAD_S
    step_model: str = "roofline"

    def bandwidth_efficiency_on(self, gpu_family: str, engine: str = "vllm") -> float:
        """The bandwidth efficiency on a GPU family (``specs.gpu.gpu_family``) for an engine
        profile (``specs.engines``)."""
        if self.bandwidth_efficiency is not None:
            return self.bandwidth_efficiency
        by_family = BANDWIDTH_EFFICIENCY_BY_ENGINE.get(engine, {})
        if gpu_family in by_family:
            return by_family[gpu_family]
        return DEFAULT_BANDWIDTH_EFFICIENCY_BY_GPU_FAMILY.get(gpu_family, DEFAULT_BANDWIDTH_EFFICIENCY)

    def step_overhead_on(self, gpu_family: str, engine: str = "vllm") -> float:
        """The per-step overhead on a GPU family for an engine profile."""
        if self.step_overhead_s is not None:
            return self.step_overhead_s
        return STEP_OVERHEAD_S_BY_ENGINE.get(engine, {}).get(gpu_family, DEFAULT_STEP_OVERHEAD_S)

    def operations_step_overhead_on(self, gpu_family: str, engine: str = "vllm") -> float:
        """The per-step overhead of the step-as-operations model (an explicit value holds)."""
        if self.step_overhead_s is not None:
            return self.step_overhead_s
        by_family = OPERATIONS_STEP_OVERHEAD_S_BY_ENGINE.get(engine, {})
        if gpu_family in by_family:
            return by_family[gpu_family]
        return self.step_overhead_on(gpu_family, engine)

    def compute_efficiency_at(self, rate: str, engine: str = "vllm") -> float:
        """The compute efficiency of GEMMs at ``rate`` (``bf16``, ``fp8`` or ``fp4``) for an engine."""
        if self.compute_efficiency is not None:
            return self.compute_efficiency
        if rate == "bf16":
            return DEFAULT_COMPUTE_EFFICIENCY
        low = LOW_PRECISION_COMPUTE_EFFICIENCY_BY_ENGINE.get(engine, DEFAULT_LOW_PRECISION_COMPUTE_EFFICIENCY)
        if rate == "fp4":
            return low * FP4_TO_FP8_GEMM_EFFICIENCY_BY_ENGINE.get(engine, 1.0)
        return low


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
