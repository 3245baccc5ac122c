"""Cost per user and per token, and replicas for a peak.

- rent: ``usd_per_user_month = usd_per_gpu_hour x num_gpus x 730 h / users``;
- own: ``usd_per_user_lifetime = purchase_usd x num_gpus / users`` over ``lifetime_years``
  (and per month: divided by ``12 x lifetime_years``);
- ``usd_per_million_tokens = usd_per_hour / (output_tok_s x 3600) x 1e6`` at the served batch;
- replicas for a peak: ``ceil(peak_users / users_per_replica)`` or
  ``ceil(peak_tok_s / tok_s_per_replica)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servecap.units import HOURS_PER_MONTH, SECONDS_PER_HOUR


@dataclass(frozen=True, slots=True)
class CostBreakdown:
    usd_per_hour: float | None
    usd_per_user_month: float | None
    usd_per_million_tokens: float | None
    purchase_usd: float | None
    usd_per_user_lifetime: float | None
    usd_per_user_month_owned: float | None


def cost_breakdown(
    *,
    rent_usd_per_gpu_hour: float | None,
    purchase_usd_per_gpu: float | None,
    num_gpus: int,
    users: int,
    output_tokens_per_s: float,
    lifetime_years: float,
) -> CostBreakdown:
    hourly = rent_usd_per_gpu_hour * num_gpus if rent_usd_per_gpu_hour is not None else None
    purchase = purchase_usd_per_gpu * num_gpus if purchase_usd_per_gpu is not None else None
    per_user_month = hourly * HOURS_PER_MONTH / users if hourly is not None and users > 0 else None
    per_mtok = (
        hourly / (output_tokens_per_s * SECONDS_PER_HOUR) * 1e6
        if hourly is not None and output_tokens_per_s > 0
        else None
    )
    lifetime = purchase / users if purchase is not None and users > 0 else None
    owned_month = lifetime / (12.0 * lifetime_years) if lifetime is not None else None
    return CostBreakdown(hourly, per_user_month, per_mtok, purchase, lifetime, owned_month)


def replicas_needed(demand: float, per_replica: float) -> int:
    """Replicas to carry ``demand`` (users or tokens/s) at ``per_replica`` each."""
    if demand <= 0:
        return 0
    if per_replica <= 0:
        raise ValueError("a replica that serves nothing cannot meet a demand")
    return math.ceil(demand / per_replica - 1e-9)
