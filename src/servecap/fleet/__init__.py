"""The fleet simulator: pools of engine replicas behind a router and autoscalers, on one clock.

``simulate_fleet(fleet, workload, seed) -> FleetResult`` is the library entry; see
``docs/fleet.md``.
"""

from servecap.fleet.run_result import FleetResult, FleetTimeSeries, ReplicaStats
from servecap.fleet.simulate import simulate_fleet
from servecap.fleet.spec import INSTANT, ColdStart, FleetSpec, Phase, Pool

__all__ = [
    "INSTANT",
    "ColdStart",
    "FleetResult",
    "FleetSpec",
    "FleetTimeSeries",
    "Phase",
    "Pool",
    "ReplicaStats",
    "simulate_fleet",
]
