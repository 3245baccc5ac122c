"""Small fleets and workloads for the fleet tests (each simulates in well under a second)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.fleet import INSTANT, FleetSpec, Pool
from servecap.sim import EngineSetup, engine_setup_from_plan
from servecap.specs import RequestShape
from servecap.workload import workload_from_flags


@lru_cache(maxsize=None)
def setup_8b(kv_cache_memory_bytes: int | None = None, max_num_seqs: int | None = None) -> EngineSetup:
    kw: dict[str, Any] = {"max_model_len": 8192}
    if kv_cache_memory_bytes is not None:
        kw["kv_cache_memory_bytes"] = kv_cache_memory_bytes
    if max_num_seqs is not None:
        kw["max_num_seqs"] = max_num_seqs
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), **kw)
    return engine_setup_from_plan(plan(dep, request=RequestShape(512, 128)))


def fleet(replicas: int = 4, router: str = "round-robin", setup: EngineSetup | None = None, **kw: Any) -> FleetSpec:
    pool_kw = {k: kw.pop(k) for k in list(kw) if k in ("autoscaler", "cold_start", "mtbf_s", "crash_at_s", "price_per_gpu_hour", "weights_bytes", "gpus_per_replica")}
    pool_kw.setdefault("cold_start", INSTANT)
    pool = Pool("main", setup or setup_8b(), replicas=replicas, **pool_kw)
    return FleetSpec((pool,), router=router, **kw)


def open_loop(rate: float, n: int, prompt: int = 512, output: int = 128, **kw: Any):  # type: ignore[no-untyped-def]
    return workload_from_flags(rate=rate, num_requests=n, prompt_tokens=prompt, output_tokens=output, **kw)
