"""A stopped replica's prefix index is dropped (issue 32: a day of autoscaler churn kept every
stopped replica's whole block index; benchmarks/fleet_churn_memory.py measures it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sim_helpers import make_plan

from servecap.fleet import FleetSpec, Pool, simulate_fleet
from servecap.fleet.spec import INSTANT
from servecap.policy.autoscalers import AutoscalerSettings
from servecap.sim import Engine, EngineRequest, engine_setup_from_plan

sys.path.insert(0, str(Path(__file__).parents[1] / "fleet"))
from fleet_helpers import step_arrays

KEYS = (11, 12, 13, 14)


def test_an_idle_engine_drops_its_cached_blocks_and_a_busy_one_keeps_them() -> None:
    engine = Engine(engine_setup_from_plan(make_plan()))
    engine.add_request(EngineRequest(0, 64, 1, prefix_key=KEYS), 0.0)
    now = 0.0
    while engine.has_work():
        now += engine.step(now).duration_s
    engine.add_request(EngineRequest(1, 64, 50, prefix_key=KEYS), now)
    engine.step(now)
    engine.drop_cache()  # a request runs: nothing is dropped
    assert engine.stats.kv_blocks_used > 0 and engine.prefix_hit_blocks(KEYS) > 0
    while engine.has_work():
        now += engine.step(now).duration_s
    cached = engine.stats.kv_blocks_cached
    assert cached == len(KEYS)
    hits, total = engine.stats.prefix_cache_hit_tokens, engine.stats.kv_blocks_total
    engine.drop_cache()
    assert engine.stats.kv_blocks_cached == 0 and engine.prefix_hit_blocks(KEYS) == 0
    # the figures a fleet reports for it stay
    assert engine.stats.prefix_cache_hit_tokens == hits and engine.stats.kv_blocks_total == total


def test_the_fleet_drops_the_cache_of_each_replica_it_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    import inspect

    if not inspect.isfunction(Engine.drop_cache):
        # the mypyc build calls the compiled method directly: a patched class attribute is not seen
        pytest.skip("the engine is compiled (mypyc): the pure-Python run of this test counts the calls")
    dropped: list[int] = []
    real = Engine.drop_cache

    def counting(self: Engine) -> None:
        dropped.append(id(self))
        real(self)

    monkeypatch.setattr(Engine, "drop_cache", counting)
    scaler = AutoscalerSettings(
        signal="inflight", target=8.0, interval_s=5.0, min_replicas=1, max_replicas=4, downscale_stabilization_s=10.0
    )
    pool = Pool("p", engine_setup_from_plan(make_plan()), replicas=1, autoscaler=scaler, cold_start=INSTANT)
    res = simulate_fleet(FleetSpec((pool,)), step_arrays(40.0, 1.0, 30.0, 120.0), 0)
    stopped = [r for r in res.replicas if r.state == "stopped"]
    assert stopped and len(set(dropped)) == len(stopped)
