"""The fleet core's layouts (:mod:`servecap.fleet.pools`) and which one a spec describes: the
co-located fleet (every pool ``both``) or the disaggregated one (prefill and decode pools)."""

from __future__ import annotations

from servecap.fleet.fleet import Fleet
from servecap.fleet.pd.fleet import PdFleet
from servecap.fleet.pools import Pools
from servecap.fleet.spec import FleetSpec

LAYOUTS: dict[str, type[Pools]] = {"co-located": Fleet, "disaggregated": PdFleet}


def make_fleet(spec: FleetSpec, seed: int, *, ordered: bool = False, keep_ids: bool = True) -> Pools:
    """The fleet ``spec`` describes, on one simulated clock from ``seed``: ``ordered`` runs its
    replicas' events in time order (closed-loop traffic); ``keep_ids`` keeps the requests each
    replica served (the exact sink's; the sketch sink keeps none)."""
    if spec.is_disaggregated:
        return PdFleet(spec, seed, ordered=ordered, keep_ids=keep_ids)
    return Fleet(spec, seed, ordered=ordered, keep_ids=keep_ids)
