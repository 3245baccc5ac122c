"""A fleet pool's parallel layout and speculative decoding (the deployment fields pools carry)
flow into its plan and engine; a bad one names the pool's field."""

from __future__ import annotations

import pytest

from servecap.errors import ServecapError
from servecap.fleet.file_schema import PoolModel, plan_pool
from servecap.sim import engine_setup_from_plan

BASE = {"name": "dep16", "model": "deepseek-v3", "gpu": "H200", "weights_dtype": "fp8", "max_model_len": 16384}


def test_wide_ep_pool_with_mtp() -> None:
    pool = PoolModel(**BASE, tp=1, dp=16, ep=16, redundant_experts=32, two_batch_overlap=True, speculative="mtp")
    plan, _ = plan_pool(pool)
    dep = plan.deployment
    assert dep.num_gpus == 16 and dep.parallelism.nodes == 2
    assert dep.speculative is not None and dep.speculative.method == "mtp"
    setup = engine_setup_from_plan(plan)
    assert setup.num_gpu_blocks == 16 * plan.num_gpu_blocks
    assert setup.spec_acceptance == (0.875,)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"tp": 1, "dp": 16, "ep": 3}, "pools.dep16.ep"),
        ({"tp": 1, "dp": 16, "ep": 16, "nodes": 3}, "pools.dep16.nodes"),
        ({"tp": 8, "speculative": "draft"}, "pools.dep16.draft_model"),
        ({"tp": 8, "num_gpus": 16}, "pools.dep16.num_gpus"),
    ],
)
def test_bad_pool_layouts_name_the_pool_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ServecapError) as err:
        plan_pool(PoolModel(**BASE, **kw))  # type: ignore[arg-type]
    assert err.value.field == field
