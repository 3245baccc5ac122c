"""A replica's service rate in its pool's role, for the fleet's "load (of capacity)" column: per
role (:func:`role_capacity_req_s`) and per pool of a fleet file (:func:`pool_capacities`)."""

from __future__ import annotations

from pathlib import Path

from servecap.core.capacity import decode_only_req_s, prefill_only_req_s
from servecap.core.plan import Plan
from servecap.fleet.file_schema import FleetFile, plan_pool
from servecap.workload import WorkloadSpec, dist_mean


def role_capacity_req_s(the_plan: Plan, role: str, workload: WorkloadSpec) -> float:
    """A replica's service rate in its role: co-located, the planner's output tokens/s at its batch
    over the mean output; a P/D prefill replica, prompts back to back; a decode replica, pure
    decode steps at its batch (core/capacity.py)."""
    out_tokens = dist_mean(workload.output_tokens) if workload.output_tokens is not None else 128.0
    prompt_tokens = dist_mean(workload.prompt_tokens) if workload.prompt_tokens is not None else 1024.0
    eng = the_plan.deployment.engine
    dp = the_plan.deployment.parallelism.dp
    if role == "prefill":
        rate = prefill_only_req_s(the_plan.step, round(prompt_tokens), the_plan.efficiency, eng.max_num_batched_tokens)
        return rate * dp
    if role == "decode":
        per_step = the_plan.step.spec_tokens_per_step
        return decode_only_req_s(the_plan.batch, the_plan.decode_step_time_s, out_tokens, per_step)
    return the_plan.output_tokens_per_s_total / max(1.0, out_tokens)


def pool_capacities(fleet: FleetFile, workload: WorkloadSpec, base_dir: Path | None = None) -> dict[str, float]:
    """Each pool's service rate per replica, as ``simulate``'s load check reads it: the planner's
    output tokens/s at its batch over the workload's mean output tokens (a P/D pool: in its role)."""

    caps = {}
    for p in fleet.pools:
        the_plan, _ = plan_pool(p, base_dir)
        caps[p.name] = role_capacity_req_s(the_plan, p.role, workload)
    return caps
