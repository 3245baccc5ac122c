"""Headroom: the observed load against the planned capacity of one replica.

- Load per replica ``L`` = requests in the server (running + waiting), fleet total / replicas up.
- Capacity per replica ``C`` = the plan's batch: the most concurrent requests served within the
  KV pool, ``max_num_seqs`` and the TTFT/TPOT SLOs (``servecap.core.plan.plan``'s ``batch``).
  Without a model, from ``vllm:cache_config_info`` alone: the KV limit
  ``num_gpu_blocks // ceil(tokens per request / block_size)`` (vLLM's "maximum concurrency"
  rule, docs/formulas.md), which says nothing about the SLOs.
- Utilization ``L / C``; traffic headroom ``C / L - 1``: by Little's law ``L = lambda * W``, at an
  unchanged time in the server the count in the server grows in proportion to the arrival rate,
  so traffic can grow by that factor before the batch that still meets the SLOs is full (after
  that requests queue and TTFT grows without bound). Worked example (tests): L = 18, C = 25 ->
  72% of capacity, +39% traffic.

The result carries the replicas as :class:`servecap.policy.view.ReplicaView` values
(:mod:`servecap.monitor.views`) so that the fleet's autoscaler policies can give their advice
from the very same inputs they see in the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servecap.errors import ServecapError
from servecap.monitor.snapshot import CacheConfig
from servecap.monitor.window import WindowStats


@dataclass(frozen=True, slots=True)
class Capacity:
    """Concurrent requests one replica serves, and where the number comes from."""

    requests_per_replica: float
    source: str  # "plan" or "cache_config_info"
    limited_by: str
    kv_usage_at_capacity: float | None = None


@dataclass(frozen=True, slots=True)
class Headroom:
    replicas_up: int
    load_per_replica: float
    capacity: Capacity
    utilization: float
    traffic_headroom: float | None  # +0.30 = 30% more traffic; None when nothing is in flight
    queueing: bool  # requests are waiting now: past capacity already

    def summary(self) -> str:
        at = f"at {self.utilization:.0%} of capacity ({self.load_per_replica:.1f} of {self.capacity.requests_per_replica:.0f} requests per replica, {self.capacity.limited_by})"
        if self.traffic_headroom is None:
            return at + "; idle"
        if self.traffic_headroom <= 0 or self.queueing:
            return at + "; past the SLO batch: requests queue, TTFT grows"
        if self.capacity.source == "plan":
            return at + f"; the SLOs break at about +{self.traffic_headroom:.0%} traffic"
        return at + (
            f"; the KV cache fills at about +{self.traffic_headroom:.0%} traffic (the KV pool's bound only: "
            "latency limits it sooner; give the deployment, --model/--gpu, for the SLOs' headroom)"
        )


def capacity_from_plan(batch: int, limited_by: str) -> Capacity:
    if batch <= 0:
        raise ServecapError("batch", batch, "the plan serves no request within the SLOs: no capacity to compare with")
    return Capacity(float(batch), "plan", f"plan batch, limited by {limited_by}")


def capacity_from_cache_config(cache: CacheConfig, tokens_per_request: int) -> Capacity:
    """vLLM's maximum concurrency: ``num_gpu_blocks // ceil(tokens / block_size)``."""
    if cache.num_gpu_blocks is None or cache.block_size is None or cache.block_size <= 0:
        raise ServecapError(
            "cache_config_info", cache, "has no num_gpu_blocks/block_size: give the deployment (--model/--gpu)"
        )
    if tokens_per_request < 1:
        raise ServecapError("tokens_per_request", tokens_per_request, "must be >= 1")
    blocks = math.ceil(tokens_per_request / cache.block_size)
    n = cache.num_gpu_blocks // blocks
    return Capacity(
        float(n),
        "cache_config_info",
        f"KV pool of {cache.num_gpu_blocks} blocks x {cache.block_size} tokens at {tokens_per_request} tokens/request",
        1.0,
    )


def headroom(fleet: WindowStats, replicas_up: int, capacity: Capacity) -> Headroom:
    """Compare the fleet's load with ``capacity`` per replica (see the module docstring)."""
    if replicas_up < 1:
        raise ServecapError("replicas_up", replicas_up, "no replica answered: nothing to compare")
    load = ((fleet.running or 0.0) + (fleet.waiting or 0.0)) / replicas_up
    c = capacity.requests_per_replica
    util = load / c
    room = c / load - 1.0 if load > 0 else None
    return Headroom(replicas_up, load, capacity, util, room, (fleet.waiting or 0.0) > 0 and util >= 1.0)
