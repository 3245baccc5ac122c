"""Settings as people give them -> validated specs (one place for the request, SLO and cost values)."""

from __future__ import annotations

from servecap.errors import ServecapError
from servecap.specs.perf import CostInputs, RequestShape, Slo


def request_shape(prompt_tokens: int, output_tokens: int) -> RequestShape:
    if prompt_tokens < 1 or prompt_tokens > 100_000_000:
        raise ServecapError("prompt_tokens", prompt_tokens, "must be between 1 and 1e8")
    if output_tokens < 1 or output_tokens > 100_000_000:
        raise ServecapError("output_tokens", output_tokens, "must be between 1 and 1e8")
    return RequestShape(prompt_tokens, output_tokens)


def slo_from_ms(ttft_ms: float | None, tpot_ms: float | None) -> Slo:
    for name, value in (("ttft_slo_ms", ttft_ms), ("tpot_slo_ms", tpot_ms)):
        if value is not None and not 0 < value <= 3_600_000:
            raise ServecapError(name, value, "must be a positive number of milliseconds")
    return Slo(
        ttft_s=ttft_ms / 1e3 if ttft_ms is not None else None,
        tpot_s=tpot_ms / 1e3 if tpot_ms is not None else None,
    )


def cost_inputs(price_per_hour: float | None, purchase_price: float | None, duty_cycle: float) -> CostInputs:
    if price_per_hour is not None and not 0 < price_per_hour < 10_000:
        raise ServecapError("price_per_hour", price_per_hour, "must be a positive USD per GPU-hour below 10,000")
    if purchase_price is not None and not 0 < purchase_price < 100_000_000:
        raise ServecapError("purchase_price", purchase_price, "must be a positive USD amount")
    if not 0.001 <= duty_cycle <= 1:
        raise ServecapError("duty_cycle", duty_cycle, "must be in [0.001, 1]: the share of time a user is generating")
    return CostInputs(rent_usd_per_gpu_hour=price_per_hour, purchase_usd_per_gpu=purchase_price, duty_cycle=duty_cycle)
