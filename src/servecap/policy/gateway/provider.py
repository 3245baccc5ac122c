"""An external provider as a pool: no GPUs, a latency distribution and a price per token."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from servecap.errors import ServecapError


@dataclass(frozen=True, slots=True)
class ExternalProvider:
    """A hosted API behind the gateway (a fallback or overflow target).

    Time to first token is log-normal with median ``ttft_median_s`` and log-space ``ttft_sigma``;
    tokens then stream at ``output_tok_s``; a request fails with probability ``failure_rate``.
    Cost is ``(prompt x usd_per_m_input + output x usd_per_m_output) / 1e6``: the way providers
    price (dollars per million input and output tokens).
    """

    name: str
    ttft_median_s: float
    ttft_sigma: float = 0.5
    output_tok_s: float = 50.0
    usd_per_m_input: float = 0.0
    usd_per_m_output: float = 0.0
    failure_rate: float = 0.0

    def __post_init__(self) -> None:
        f = f"gateway.providers.{self.name}"
        if not self.name:
            raise ServecapError("gateway.providers.name", self.name, "must be a name")
        if not 0 < self.ttft_median_s < math.inf:
            raise ServecapError(f"{f}.ttft_median_s", self.ttft_median_s, "must be positive (seconds)")
        if not 0 <= self.ttft_sigma <= 10:
            raise ServecapError(f"{f}.ttft_sigma", self.ttft_sigma, "must be in [0, 10]")
        if not 0 < self.output_tok_s < math.inf:
            raise ServecapError(f"{f}.output_tok_s", self.output_tok_s, "must be positive (tokens/s)")
        for name in ("usd_per_m_input", "usd_per_m_output"):
            v = getattr(self, name)
            if not 0 <= v < math.inf:
                raise ServecapError(f"{f}.{name}", v, "must be >= 0 dollars per million tokens")
        if not 0 <= self.failure_rate <= 1:
            raise ServecapError(f"{f}.failure_rate", self.failure_rate, "must be a probability in [0, 1]")

    def sample_ttft_s(self, rng: random.Random) -> float:
        return rng.lognormvariate(math.log(self.ttft_median_s), self.ttft_sigma)

    def e2e_s(self, ttft_s: float, output_tokens: int) -> float:
        """End to end: the first token, then one token every ``1 / output_tok_s``."""
        return ttft_s + max(0, output_tokens - 1) / self.output_tok_s

    def fails(self, rng: random.Random) -> bool:
        return rng.random() < self.failure_rate

    def cost_usd(self, prompt_tokens: int, output_tokens: int) -> float:
        return (prompt_tokens * self.usd_per_m_input + output_tokens * self.usd_per_m_output) / 1e6
