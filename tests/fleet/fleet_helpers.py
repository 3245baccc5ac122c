"""Small fleets and workloads for the fleet tests (each simulates in well under a second)."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.fleet import INSTANT, FleetSpec, Pool
from servecap.sim import EngineSetup, engine_setup_from_plan
from servecap.specs import RequestShape
from servecap.workload import RequestArrays, WorkloadSpec, workload_from_flags


@cache
def setup_8b(kv_cache_memory_bytes: int | None = None, max_num_seqs: int | None = None) -> EngineSetup:
    kw: dict[str, Any] = {"max_model_len": 8192}
    if kv_cache_memory_bytes is not None:
        kw["kv_cache_memory_bytes"] = kv_cache_memory_bytes
    if max_num_seqs is not None:
        kw["max_num_seqs"] = max_num_seqs
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), **kw)
    return engine_setup_from_plan(plan(dep, request=RequestShape(512, 128)))


def fleet(replicas: int = 4, router: str = "round-robin", setup: EngineSetup | None = None, **kw: Any) -> FleetSpec:
    pool_keys = (
        "autoscaler",
        "cold_start",
        "mtbf_s",
        "crash_at_s",
        "price_per_gpu_hour",
        "weights_bytes",
        "gpus_per_replica",
    )
    pool_kw = {k: kw.pop(k) for k in list(kw) if k in pool_keys}
    pool_kw.setdefault("cold_start", INSTANT)
    pool = Pool("main", setup or setup_8b(), replicas=replicas, **pool_kw)
    return FleetSpec((pool,), router=router, **kw)


def open_loop(rate: float, n: int, prompt: int = 512, output: int = 128, **kw: Any) -> WorkloadSpec:
    return workload_from_flags(rate=rate, num_requests=n, prompt_tokens=prompt, output_tokens=output, **kw)


def prefix_arrays(
    n: int,
    rate: float,
    groups: int,
    prefix_tokens: int,
    new_tokens: int,
    output_tokens: int,
    *,
    hot: float = 0.0,
    seed: int = 0,
) -> RequestArrays:
    """Poisson arrivals; every request starts with one of ``groups`` shared prefixes (uniform,
    or group 0 with probability ``hot`` and uniform otherwise)."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1 / rate, n))
    g = rng.integers(0, groups, n)
    if hot:
        g = np.where(rng.uniform(size=n) < hot, 0, g)
    return RequestArrays(
        t,
        np.full(n, prefix_tokens + new_tokens, dtype=np.int64),
        np.full(n, output_tokens, dtype=np.int64),
        g.astype(np.int64),
        np.full(n, prefix_tokens, dtype=np.int64),
    )


def step_arrays(rate0: float, rate1: float, t_step_s: float, t_end_s: float, *, seed: int = 0) -> RequestArrays:
    """Poisson at ``rate0`` until ``t_step_s``, then at ``rate1`` until ``t_end_s``; 256-token
    prompts, 64-token answers."""
    rng = np.random.default_rng(seed)
    a = np.cumsum(rng.exponential(1 / rate0, int(rate0 * t_step_s * 1.5) + 10))
    a = a[a < t_step_s]
    b = t_step_s + np.cumsum(rng.exponential(1 / rate1, int(rate1 * (t_end_s - t_step_s) * 1.5) + 10))
    b = b[b < t_end_s]
    t = np.concatenate([a, b])
    n = len(t)
    return RequestArrays(
        t,
        np.full(n, 256, dtype=np.int64),
        np.full(n, 64, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
    )
