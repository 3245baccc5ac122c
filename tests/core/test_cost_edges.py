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


def test_no_demand_needs_no_replica() -> None:
    assert replicas_needed(0, 675) == 0
    assert replicas_needed(0, 0) == 0  # nothing to carry: not an error
    assert replicas_needed(675, 675) == 1 and replicas_needed(676, 675) == 2
    with pytest.raises(ValueError, match="serves nothing"):
        replicas_needed(1, 0)
