"""Predict one corpus row: the planner builds the deployment, the simulator runs the workload.

The source's workload becomes a simulator workload as the source ran it:

- ``offline`` / ``static_batch``: every request arrives at t = 0 (an open loop at 10^6 requests
  per second); a static batch also caps the running batch at its size, so it runs as one wave;
- ``closed``: ``concurrency`` users with no think time and one turn per conversation (a new
  request as soon as one finishes, as ``--max-concurrency`` does);
- ``open``: Poisson arrivals at the source's rate.

Sources often ran thousands of requests; the simulation is capped (``max_requests``, default
:data:`MAX_SIM_REQUESTS`, and never below two full batches of an offline run) so the whole
corpus runs in well under two minutes on one core. Throughput is total output tokens (or
completed requests) over the span from the first arrival to the last token, as benchmark
clients compute it. Seeds are fixed: every row uses ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from servecap.catalog.gpus import lookup_gpu
from servecap.catalog.models import resolve_model
from servecap.core.defaults import build_deployment, default_batch_limits
from servecap.core.plan import plan
from servecap.errors import InfeasibleError, ServecapError
from servecap.results import Percentiles
from servecap.sim import engine_setup_from_plan, simulate
from servecap.specs.deployment import Deployment
from servecap.specs.engines import engine_profile
from servecap.specs.perf import Efficiency, RequestShape
from servecap.validation.corpus import CorpusRow
from servecap.workload import WorkloadSpec
from servecap.workload.load import workload_from_dict

MAX_SIM_REQUESTS = 400
_BURST_RATE_PER_S = 1e6


@dataclass(frozen=True, slots=True)
class Adjustments:
    """What a fit may change without touching core: the step-time efficiencies (applied through
    :class:`~servecap.specs.perf.Efficiency`, as ``--calibration`` applies them), FP8/FP4 compute
    efficiency (used for rows whose weights compute at 8 or 4 bits), and a fixed per-request
    server cost added to TTFT and E2E (HTTP, tokenisation, detokenisation, streaming)."""

    efficiency: Efficiency = field(default_factory=lambda: Efficiency(step_model="auto"))  # servecap's default
    compute_efficiency_low_precision: float | None = None
    ttft_overhead_s: float = 0.0

    def efficiency_for(self, weights_dtype: str) -> Efficiency:
        """The efficiency a row runs with: ``compute_efficiency_low_precision`` (when given) for
        weights that compute at 8 or 4 bits, as the step-time model's defaults do."""
        low = weights_dtype in ("fp8", "int8", "nvfp4", "mxfp4")
        if low and self.compute_efficiency_low_precision is not None:
            return replace(self.efficiency, compute_efficiency=self.compute_efficiency_low_precision)
        return self.efficiency


@dataclass(frozen=True, slots=True)
class Prediction:
    values: dict[str, float]  # "metric.statistic" -> SI value (s, tok/s, req/s)
    simulated_requests: int
    notes: tuple[str, ...] = ()


def _deployment(crow: CorpusRow, max_model_len: int | None) -> Deployment:
    row, lim = crow.row, crow.limits
    wl = row.workload
    seqs = lim.max_num_seqs
    if wl.mode == "static_batch":
        seqs = wl.concurrency
    tokens = lim.max_num_batched_tokens
    gpu = lookup_gpu(row.gpu)
    if seqs is not None:
        profile_tokens = engine_profile(crow.engine).max_num_batched_tokens
        tokens = max(tokens or profile_tokens or default_batch_limits(gpu)[0], seqs)
    return build_deployment(
        resolve_model(row.model),
        gpu,
        tp=row.tp,
        pp=row.pp,
        weights_dtype=row.weights_dtype,
        kv_cache_dtype=row.kv_cache_dtype,
        max_model_len=max_model_len or lim.max_model_len,
        gpu_memory_utilization=lim.gpu_memory_utilization,
        max_num_seqs=seqs,
        max_num_batched_tokens=tokens,
        engine=crow.engine,
    )


def _workload(crow: CorpusRow, n: int) -> WorkloadSpec:
    wl = crow.row.workload
    raw: dict[str, object] = {"prompt_tokens": wl.prompt_tokens, "output_tokens": wl.output_tokens, "num_requests": n}
    if wl.mode in ("offline", "static_batch"):
        raw["arrival"] = {"kind": "constant", "rate_per_s": _BURST_RATE_PER_S}
    elif wl.mode == "open":
        raw["arrival"] = {"kind": "poisson", "rate_per_s": wl.rate_per_s}
    else:
        raw["users"] = {
            "count": wl.concurrency,
            "think_time_s": 0.0,
            "turns": 1,
            "start_spread_s": 0.0,
            "max_context_tokens": wl.prompt_tokens + wl.output_tokens + 1,
        }
    return workload_from_dict(raw)


def _pick(p: Percentiles, statistic: str) -> float | None:
    return {"mean": p.mean, "median": p.p50, "p90": p.p90, "p99": p.p99}.get(statistic)


def predict_row(
    crow: CorpusRow, adj: Adjustments | None = None, *, seed: int = 0, max_requests: int = MAX_SIM_REQUESTS
) -> Prediction:
    """Plan and simulate one row; raises ServecapError (naming the row) when it cannot run."""
    adj = adj or Adjustments()
    row, wl = crow.row, crow.row.workload
    notes: list[str] = []
    try:
        dep = _deployment(crow, None)
        try:
            pl = plan(
                dep,
                request=RequestShape(wl.prompt_tokens, wl.output_tokens),
                efficiency=adj.efficiency_for(row.weights_dtype),
            )
        except InfeasibleError:
            # the model's full context does not fit: the source must have run a shorter one
            need = -(-(wl.prompt_tokens + wl.output_tokens) // 1024) * 1024
            dep = _deployment(crow, need)
            pl = plan(
                dep,
                request=RequestShape(wl.prompt_tokens, wl.output_tokens),
                efficiency=adj.efficiency_for(row.weights_dtype),
            )
            notes.append(f"max_model_len {need}: the model's full context does not fit")
        setup = engine_setup_from_plan(pl, enable_prefix_caching=False)
    except ServecapError as err:
        raise ServecapError(f"row {crow.full_id}", err.value, f"{err.field}: {err.problem}") from None
    n = wl.num_requests
    if wl.mode in ("offline", "closed", "open"):
        floor = 2 * min(setup.max_num_seqs, wl.num_requests) if wl.mode == "offline" else 0
        n = min(wl.num_requests, max(max_requests, floor))
    if n < wl.num_requests:
        notes.append(f"simulated {n} of the source's {wl.num_requests} requests")
    res = simulate(setup, _workload(crow, n), np.random.default_rng(seed))
    cols = res.columns
    ends = cols.end_s[~np.isnan(cols.end_s)]
    span = float(ends.max() - cols.arrival_s.min()) if len(ends) else 0.0
    out_tokens = float(np.sum(cols.output_tokens[~np.isnan(cols.end_s)]))
    s = res.summary
    values: dict[str, float] = {}
    if span > 0:
        values["output_throughput.total"] = out_tokens / span
        values["output_throughput_per_gpu.total"] = out_tokens / span / row.num_gpus
        values["request_throughput.total"] = len(ends) / span
    for metric, pct in (("ttft", s.ttft_s), ("tpot", s.tpot_s), ("itl", s.itl_s), ("e2e", s.e2e_s)):
        for stat in ("mean", "median", "p90", "p99"):
            v = _pick(pct, stat)
            if v is not None:
                extra = adj.ttft_overhead_s if metric in ("ttft", "e2e") else 0.0
                values[f"{metric}.{stat}"] = v + extra
    return Prediction(values=values, simulated_requests=n, notes=tuple(notes))
