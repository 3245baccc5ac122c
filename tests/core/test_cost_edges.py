"""Edges of the cost arithmetic (found by benchmarks/mutation.py): a replica of several GPUs pays
for each of them, and no demand needs no replica whatever a replica serves."""

from __future__ import annotations

import pytest

from servecap.core.cost import cost_breakdown, replicas_needed


def test_a_replica_of_several_gpus_pays_for_each() -> None:
    c = cost_breakdown(
        rent_usd_per_gpu_hour=2.5,
        purchase_usd_per_gpu=30_000.0,
        num_gpus=4,
        users=100,
        output_tokens_per_s=1000.0,
        lifetime_years=3,
    )
    assert c.usd_per_hour == 10.0 and c.purchase_usd == 120_000.0
    assert c.usd_per_user_month == pytest.approx(10.0 * 730 / 100)
    assert c.usd_per_million_tokens == pytest.approx(10.0 / (1000 * 3600) * 1e6)
    assert c.usd_per_user_lifetime == pytest.approx(1200.0)
    assert c.usd_per_user_month_owned == pytest.approx(1200.0 / 36)


def test_no_users_or_no_tokens_leave_those_figures_out() -> None:
    c = cost_breakdown(
        rent_usd_per_gpu_hour=2.5,
        purchase_usd_per_gpu=30_000.0,
        num_gpus=1,
        users=0,
        output_tokens_per_s=0.0,
        lifetime_years=3,
    )
    assert c.usd_per_hour == 2.5 and c.purchase_usd == 30_000.0
    assert (c.usd_per_user_month, c.usd_per_million_tokens, c.usd_per_user_lifetime) == (None, None, None)
    assert c.usd_per_user_month_owned is None
    slow = cost_breakdown(
        rent_usd_per_gpu_hour=3.6,
        purchase_usd_per_gpu=None,
        num_gpus=1,
        users=1,
        output_tokens_per_s=0.5,
        lifetime_years=3,
    )
    assert slow.usd_per_million_tokens == pytest.approx(3.6 / (0.5 * 3600) * 1e6)  # 2,000 $/M tokens
    assert slow.usd_per_user_month == pytest.approx(3.6 * 730)  # one user pays it all
    assert slow.purchase_usd is None and slow.usd_per_user_lifetime is None


def test_no_demand_needs_no_replica() -> None:
    assert replicas_needed(0, 675) == 0
    assert replicas_needed(0, 0) == 0  # nothing to carry: not an error
    assert replicas_needed(675, 675) == 1 and replicas_needed(676, 675) == 2
    assert replicas_needed(3, 1) == 3 and replicas_needed(1, 0.5) == 2  # small replicas are replicas
    with pytest.raises(ValueError, match="serves nothing"):
        replicas_needed(1, 0)


def test_a_gpu_without_a_rent_price_is_warned_about_and_priced_by_a_given_one() -> None:
    """The catalog has no rent for the A100 40 GB: the plan says so and prices nothing per hour;
    a rent passed in is used (1 GPU x $1.50)."""
    from servecap.catalog import lookup_gpu, resolve_model
    from servecap.core.defaults import build_deployment
    from servecap.core.plan import plan
    from servecap.specs.perf import CostInputs

    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("A100-40GB-SXM"))
    bare = plan(dep)
    assert bare.cost.usd_per_hour is None
    assert "no rent price for A100-40GB-SXM in the catalog: pass --price-per-hour" in bare.warnings
    priced = plan(dep, costs=CostInputs(rent_usd_per_gpu_hour=1.5))
    assert priced.cost.usd_per_hour == 1.5
    assert not [w for w in priced.warnings if "rent" in w]
