"""Closed-loop users on several replicas: a user's next turn finds its replica exactly as it stood
at the turn's arrival. The fleet runs its replicas' events in time order and stops at each
finish, so no replica has run past a turn before the turn is routed to it."""

from __future__ import annotations

import numpy as np
from fleet_helpers import fleet

from servecap.fleet import simulate_fleet
from servecap.workload import workload_from_flags


def test_a_turn_joins_the_first_step_after_its_arrival() -> None:
    # light load (no queueing for seats or blocks): every turn must be admitted at the start of
    # its replica's first step at or after its arrival, at most one step (well under 100 ms
    # here) after it; a replica that had run ahead would admit it only at the end of the
    # steps it ran past the arrival
    users = workload_from_flags(
        users=24, think_time_s=0.3, num_requests=600, prompt_tokens=256, output_tokens=96, output_sigma=0.8
    )
    res = simulate_fleet(fleet(4, "round-robin"), users, 7)
    assert res.outcomes == {"ok": 600}
    queue = res.columns.queue_time_s
    ttft = res.columns.first_token_s - res.columns.arrival_s
    assert float(np.max(queue)) < 0.1, float(np.max(queue))
    assert float(np.percentile(ttft, 99)) < 0.2
    # and the run is deterministic
    again = simulate_fleet(fleet(4, "round-robin"), users, 7)
    assert np.array_equal(again.columns.end_s, res.columns.end_s)
