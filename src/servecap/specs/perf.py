"""Inputs of the performance, capacity and cost model: efficiency factors, request shape, SLOs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Achievable fractions of the spec sheet and fixed costs of one engine step.

    The defaults are planning assumptions, not measurements; ``servecap calibrate`` replaces
    them with coefficients fitted to a real server (the same fields, in a calibration file).

    - ``bandwidth_efficiency`` 0.80: decode GEMV/attention kernels stream weights and KV at
      roughly 80% of peak HBM bandwidth on current GPUs.
    - ``compute_efficiency`` 0.60: large prefill GEMMs reach about 60% of dense tensor peak
      (model FLOPs utilisation of a serving engine, attention and norms included).
    - ``step_overhead_s`` 0.002: the per-step scheduler, sampling and launch cost not hidden by
      CUDA graphs.
    - ``allreduce_latency_s`` 10e-6: the fixed cost of one tensor-parallel all-reduce
      (NCCL's small-message latency within one NVLink node is of this order).
    - ``prefill_s_per_token``: an extra per-prompt-token cost (tokenisation, input processing)
      that calibration can fit; 0 by default.
    """

    bandwidth_efficiency: float = 0.80
    compute_efficiency: float = 0.60
    step_overhead_s: float = 0.002
    allreduce_latency_s: float = 10e-6
    prefill_s_per_token: float = 0.0


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
