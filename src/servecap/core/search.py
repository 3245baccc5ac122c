"""Rank deployments (GPU x count x weights dtype x KV dtype) of one model by cost per user.

Every candidate is planned in full by :func:`plan`; candidates that cannot start, serve nobody
within the SLOs, or have no price are kept with the reason, ranked after the priced ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from servecap.core.defaults import build_deployment
from servecap.core.plan import Plan, plan, with_duty_cycle
from servecap.errors import ServecapError
from servecap.specs.gpu import GpuSpec
from servecap.specs.model import ModelSpec
from servecap.specs.perf import CostInputs, Efficiency, RequestShape, Slo


@dataclass(frozen=True, slots=True)
class Candidate:
    gpu: str
    num_gpus: int
    weights_dtype: str
    kv_cache_dtype: str
    plan: Plan | None
    problem: str | None

    @property
    def usd_per_user_month(self) -> float | None:
        return self.plan.cost.usd_per_user_month if self.plan is not None else None


def compare(
    model: ModelSpec,
    gpus: Iterable[GpuSpec],
    *,
    gpu_counts: Iterable[int] = (1, 2, 4, 8),
    weights_dtypes: Iterable[str] = ("auto", "fp8", "int4"),
    kv_dtypes: Iterable[str] = ("auto", "fp8"),
    max_model_len: int | None = None,
    request: RequestShape | None = None,
    slo: Slo | None = None,
    efficiency: Efficiency | None = None,
    costs: CostInputs | None = None,
    rent_usd_per_gpu_hour: Mapping[str, float] | None = None,
    duty_cycle_of: Callable[[float], float] | None = None,
) -> list[Candidate]:
    """Every candidate planned; ``rent_usd_per_gpu_hour`` prices GPUs by id (over the catalog's).
    ``duty_cycle_of`` (seconds a request generates, ``TTFT + (O - 1) x TPOT`` at the candidate's
    batch, to its duty cycle) replaces ``costs.duty_cycle`` per candidate: the same user model
    gives a faster deployment a lower duty cycle."""
    out: list[Candidate] = []
    seen: set[tuple[str, int, str, str]] = set()
    base_costs = costs or CostInputs()
    for gpu in gpus:
        price = (rent_usd_per_gpu_hour or {}).get(gpu.id)
        gpu_costs = replace(base_costs, rent_usd_per_gpu_hour=price) if price is not None else base_costs
        for n in gpu_counts:
            for w in weights_dtypes:
                for k in kv_dtypes:
                    try:
                        dep = build_deployment(
                            model, gpu, tp=n, weights_dtype=w, kv_cache_dtype=k, max_model_len=max_model_len
                        )
                    except ServecapError as err:
                        out.append(Candidate(gpu.id, n, w, k, None, str(err)))
                        continue
                    key = (gpu.id, n, dep.weights_dtype.name, dep.kv_dtype.name)
                    if key in seen:
                        continue
                    seen.add(key)
                    try:
                        p = plan(dep, request=request, slo=slo, efficiency=efficiency, costs=gpu_costs)
                        if duty_cycle_of is not None and p.batch > 0:
                            generating = p.ttft_s + max(0, p.request.output_tokens - 1) * p.tpot_s
                            # the duty cycle changes the users and the cost only: no second search
                            p = with_duty_cycle(p, max(duty_cycle_of(generating), 1e-9))
                    except ServecapError as err:
                        out.append(Candidate(*key, None, str(err)))
                        continue
                    problem = None
                    if p.users_served == 0:
                        problem = f"serves no user within the SLOs ({p.batch_limited_by})"
                    elif p.cost.usd_per_user_month is None:
                        problem = "no price for this GPU (pass --price-per-hour)"
                    out.append(Candidate(*key, p, problem))
    return sorted(out, key=_rank)


def _rank(c: Candidate) -> tuple[int, float]:
    if c.plan is None:
        return (3, 0.0)
    if c.problem is not None and c.plan.users_served == 0:
        return (2, 0.0)
    cost = c.usd_per_user_month
    if cost is None:
        return (1, -float(c.plan.users_served) / c.num_gpus)
    return (0, cost)
