"""A replica's lifecycle as the fleet core (:mod:`servecap.fleet.pools`) runs it for every pool:
its states, one draw of a pool's cold start, and which replicas a scale-down stops.

- cold start = ``weights / load bandwidth`` (when the bandwidth is finite) + Σ phases, each
  phase its mean, or a log-normal draw of that mean and coefficient of variation
  (:meth:`servecap.fleet.spec.Phase.log_params`);
- a scale-down by ``n`` cancels starting replicas first, newest first (they cost a cold start
  and serve nothing yet), then drains the ready replicas with the fewest requests (waiting +
  running), the newest first on ties.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, Protocol, TypeVar

import numpy as np

from servecap.fleet.spec import Pool

# a replica's states (starting -> ready -> draining -> stopped, or failed)
STARTING: Final = "starting"
READY: Final = "ready"
DRAINING: Final = "draining"
STOPPED: Final = "stopped"
FAILED: Final = "failed"


class Member(Protocol):
    """What a scale-down reads of a pool's replica."""

    @property
    def replica_id(self) -> int: ...

    @property
    def state(self) -> str: ...

    @property
    def num_waiting(self) -> int: ...

    @property
    def num_running(self) -> int: ...


M = TypeVar("M", bound=Member)


def cold_start_draw_s(pool: Pool, rng: np.random.Generator) -> float:
    """One draw of ``pool``'s cold start: the phases' sum (see :mod:`servecap.fleet.spec`)."""
    cs = pool.cold_start
    total = pool.weights_bytes / cs.load_bandwidth_bytes_s if math.isfinite(cs.load_bandwidth_bytes_s) else 0.0
    for _, phase in cs.phases():
        if phase.mean_s <= 0:
            continue
        if phase.cv <= 0:
            total += phase.mean_s
        else:
            mu, sigma = phase.log_params()
            total += float(rng.lognormal(mu, sigma))
    return total


def scale_down_choice(members: Sequence[M], n: int) -> tuple[list[M], list[M]]:
    """For a scale-down by ``n`` of ``members`` (the pool's starting and ready replicas): the
    starting ones to cancel, newest first, and the ready ones to drain, least loaded first."""
    starting = sorted((r for r in members if r.state == STARTING), key=lambda r: -r.replica_id)[:n]
    ready = sorted(
        (r for r in members if r.state == READY), key=lambda r: (r.num_waiting + r.num_running, -r.replica_id)
    )
    return starting, ready[: n - len(starting)]
