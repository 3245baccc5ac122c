"""A traffic mix's session ids reach the router: the session router keeps each session on one
replica in an open-loop fleet run (with and without a gateway in front)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from fleet_helpers import fleet

from servecap.fleet import simulate_fleet
from servecap.workload import generate_arrays, workload_from_dict

MIX = {
    "arrival": {"kind": "poisson", "rate_per_s": 20},
    "prompt_tokens": 256,
    "output_tokens": 32,
    "num_requests": 400,
    "tenants": [{"name": "app", "share": 1.0, "sessions": {"count": 25}}],
}


def test_session_router_keeps_each_session_on_one_replica() -> None:
    arrays = generate_arrays(workload_from_dict(MIX), np.random.default_rng(0))
    sessions = arrays.session_id.tolist()
    assert len(set(sessions)) == 25 and min(sessions) >= 0
    res = simulate_fleet(fleet(4, "session"), arrays, 0)
    assert res.outcomes == {"ok": 400}
    where: dict[int, set[int]] = defaultdict(set)
    for rid, replica in enumerate(res.replica_of):
        where[sessions[rid]].add(replica)
    assert all(len(r) == 1 for r in where.values())  # one replica per session
    assert len({next(iter(r)) for r in where.values()}) == 4  # and the sessions spread over all four
    # round-robin, by contrast, spreads every session over the replicas
    rr = simulate_fleet(fleet(4, "round-robin"), arrays, 0)
    spread: dict[int, set[int]] = defaultdict(set)
    for rid, replica in enumerate(rr.replica_of):
        spread[sessions[rid]].add(replica)
    assert min(len(r) for r in spread.values()) > 1
