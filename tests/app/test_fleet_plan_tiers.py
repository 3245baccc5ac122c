"""fleet plan's KV-tier levers on agent sessions: the row's price is the fleet's rent plus the
tier's (DRAM at $0.004237/GiB-hour x 730 h, core/kv_tiers.py), with the hit rates per tier
before and with the tier."""

from __future__ import annotations

from typing import Any

import pytest

from servecap.app.fleet_plan import fleet_plan, plan_request_from_dict
from servecap.errors import ServecapError


def _raw(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-8B",
        # a small KV pool (30% of the GPU's memory): the sessions' contexts outgrow it
        "candidates": [{"gpu": "H100", "max_model_len": 16384, "gpu_memory_utilization": 0.3}],
        "traffic": {
            "workload": {
                "arrival": {
                    "kind": "agentic",
                    "sessions": 100,
                    "session_rate_per_s": 0.5,
                    "turns_mean": 4,
                    "turn_gap_s": 5,
                    "max_context_tokens": 12000,
                }
            }
        },
        "tail_samples": 5,
        "levers": ["cpu-tier", "shared-store"],
        "cpu_tier_gib": 32,
        "shared_store_tib": 0.0625,
    }
    raw.update(over)
    return raw


def test_tier_levers_price_and_hit_rates() -> None:
    r = fleet_plan(plan_request_from_dict(_raw()))
    rows = {lv.name: lv for lv in r.levers}
    cpu, store = rows["cpu-tier"], rows["shared-store"]
    assert cpu.replicas is not None and cpu.usd_per_month is not None
    per_replica = r.chosen.usd_per_month / r.chosen.replicas  # type: ignore[operator]
    # 32 GiB x $0.004237 x 730 h = $98.98 per replica
    assert cpu.usd_per_month == pytest.approx(cpu.replicas * (per_replica + 32 * 0.004237 * 730))
    # one store for the fleet: 64 GiB x $0.004237 x 730 h = $197.95
    assert store.replicas is not None and store.usd_per_month is not None
    assert store.usd_per_month == pytest.approx(store.replicas * per_replica + 64 * 0.004237 * 730)
    assert cpu.hit_rates_before == {"gpu": r.fleet.prefix_cache_hit_rate}
    assert cpu.hit_rates is not None and cpu.hit_rates["cpu"] > 0.02
    assert store.hit_rates is not None and store.hit_rates["remote"] > 0.02
    assert "tier rent" in cpu.note


def test_tier_levers_are_asked_for_by_name() -> None:
    from servecap.planning.levers import DEFAULT_LEVERS, LEVERS

    assert {"cpu-tier", "shared-store"} <= set(LEVERS)
    assert not {"cpu-tier", "shared-store"} & set(DEFAULT_LEVERS)


@pytest.mark.parametrize(
    ("key", "levers"), [("cpu_tier_gib", ["shared-store"]), ("shared_store_tib", None), ("cpu_tier_gib", [])]
)
def test_a_tier_size_without_its_lever_is_refused_by_name(key: str, levers: list[str] | None) -> None:
    """A size the plan would not use (its lever is asked for by name only) is an error, not ignored."""
    raw = _raw(levers=levers)
    del raw["shared_store_tib" if key == "cpu_tier_gib" else "cpu_tier_gib"]
    if levers is None:
        del raw["levers"]
    with pytest.raises(ServecapError, match=rf"^plan\.{key}=.*which is not asked for"):
        plan_request_from_dict(raw)
