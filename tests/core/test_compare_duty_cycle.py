"""compare prices each candidate at its own duty cycle (the time it generates over the user's
request interval): :func:`with_duty_cycle` gives the plan at another duty cycle without a second
batch search, and equals planning again with that duty cycle, field for field."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan, with_duty_cycle
from servecap.specs.perf import CostInputs


@pytest.mark.parametrize(("gpu", "duty"), [("H100", 0.07), ("A100-80GB", 0.5), ("L4", 1e-9)])
def test_a_plan_at_another_duty_cycle_equals_planning_again(gpu: str, duty: float) -> None:
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu(gpu), max_model_len=8192)
    costs = CostInputs(rent_usd_per_gpu_hour=2.0)
    first = plan(dep, costs=costs)
    again = plan(dep, costs=replace(costs, duty_cycle=duty))
    assert with_duty_cycle(first, duty) == again
    assert again.users_served != first.users_served  # the users are what it changes
