"""Alert and dashboard thresholds derived from a plan (one replica).

- ``queue_depth``: ``ceil(0.1 x batch)`` waiting requests — a tenth of the SLO batch queued
  means the replica is past the batch the plan sized it for (vLLM queues only when the running
  batch or the KV pool is full);
- ``running``: ``0.9 x batch`` — near the batch that still meets the SLOs;
- ``kv_usage``: ``min(0.95, planned + 0.1)`` where ``planned = batch / kv_batch_limit`` is the
  share of the KV pool the SLO batch holds at the typical request length; above it requests are
  longer or more numerous than planned and preemptions follow when the pool fills;
- ``ttft_p99_s`` / ``itl_p99_s``: the SLOs when given, else twice the plan's predicted TTFT/TPOT;
- ``preemptions_per_s``: 0 — the plan's batch fits the pool, so any sustained preemption means
  the traffic is not the planned one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servecap.errors import ServecapError


@dataclass(frozen=True, slots=True)
class Thresholds:
    model: str
    batch: int
    queue_depth: int
    running: float
    kv_usage: float
    ttft_p99_s: float
    ttft_from_slo: bool
    itl_p99_s: float
    itl_from_slo: bool
    preemptions_per_s: float = 0.0


def thresholds_from_plan(
    plan: Mapping[str, Any], *, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None
) -> Thresholds:
    """From a plan as ``servecap plan --json`` writes it (keys ``model``, ``batch_size``,
    ``kv_batch_limit``, ``ttft_s``, ``tpot_s``)."""
    for key in ("model", "batch_size", "kv_batch_limit", "ttft_s", "tpot_s"):
        if key not in plan:
            raise ServecapError("plan", key, "missing: give a file written by `servecap plan --json`")
    batch, kv_limit = int(plan["batch_size"]), int(plan["kv_batch_limit"])
    if batch < 1 or kv_limit < 1:
        raise ServecapError("batch_size", batch, "the plan serves no request: nothing to alert on")
    planned_kv = min(batch / kv_limit, 1.0)
    return Thresholds(
        model=str(plan["model"]),
        batch=batch,
        queue_depth=max(1, math.ceil(0.1 * batch)),
        running=0.9 * batch,
        kv_usage=round(min(0.95, planned_kv + 0.1), 4),
        ttft_p99_s=ttft_slo_s if ttft_slo_s is not None else 2 * float(plan["ttft_s"]),
        ttft_from_slo=ttft_slo_s is not None,
        itl_p99_s=tpot_slo_s if tpot_slo_s is not None else 2 * float(plan["tpot_s"]),
        itl_from_slo=tpot_slo_s is not None,
    )
