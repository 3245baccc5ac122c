"""The fleet-plan use case's entry point, :func:`fleet_plan` (the steps: :mod:`servecap.planning.model`).

It sits above the modules of the plan, so none of them imports back up: the request, response
and context (:mod:`~servecap.planning.model`) <- the search and the daily curve
(:mod:`~servecap.planning.run`) <- the levers (:mod:`~servecap.planning.levers`) <-
this module (an import-linter contract keeps ``servecap.app`` free of import circles).
"""

from __future__ import annotations

from servecap.app.fleet_plan.flags import load_plan_file
from servecap.app.limits import WorkLimits, check_fleet_plan_work, cli_limits
from servecap.errors import ServecapError, did_you_mean
from servecap.planning.levers import LEVERS, run_levers
from servecap.planning.model import (
    Context,
    FleetPlanRequest,
    FleetPlanResponse,
    plan_request_from_dict,
)
from servecap.planning.run import run_plan
from servecap.progress import ProgressFn

__all__ = [
    "Context",
    "FleetPlanRequest",
    "FleetPlanResponse",
    "check_lever_names",
    "fleet_plan",
    "load_plan_file",
    "plan_request_from_dict",
]


def check_lever_names(request: FleetPlanRequest) -> None:
    """Refuse a lever name the planner does not know (the CLI before its search, the API before
    it queues the job)."""
    for name in request.levers or []:
        if name not in LEVERS:
            raise ServecapError("levers", name, f"one of {', '.join(LEVERS)}" + did_you_mean(name, LEVERS))


def fleet_plan(
    request: FleetPlanRequest,
    progress: ProgressFn | None = None,
    *,
    limits: WorkLimits | None = None,
    executor: str = "auto",
    workers: int | None = None,
    ray_address: str | None = None,
) -> FleetPlanResponse:
    """Plan the cheapest fleet (see :mod:`servecap.planning.model`); raises ServecapError (one
    line) on bad input, on more work than ``limits`` allow (default: the CLI's), or when no
    candidate meets the SLOs. ``executor`` (``auto``, ``serial``, ``process``, ``ray``) and
    ``workers`` say where the simulations run (:class:`Context`); the answer is the same."""
    check_lever_names(request)  # before the search: a typo costs no simulation
    check_fleet_plan_work(request, limits if limits is not None else cli_limits())
    ctx = Context(request, progress, executor=executor, workers=workers, ray_address=ray_address)
    try:
        response = run_plan(request, ctx, run_levers)
    finally:
        ctx.close()
    if ctx.speculated:
        note = f"{ctx.speculated} simulations run ahead on {ctx.executor_kind} workers were not needed"
        response = response.model_copy(update={"notes": [*response.notes, note]})
    return response
