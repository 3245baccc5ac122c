"""The request mix a live server is serving, read from its own counters over a window.

Per replica, over the window (``servecap.monitor.window``):

- request rate ``lambda = (fleet requests/s) / replicas up`` (``vllm:request_success``: finished
  requests);
- mean prompt and output tokens per finished request: the means of vLLM's
  ``vllm:request_prompt_tokens`` and ``vllm:request_generation_tokens`` histograms (sum / count
  over the window); where a server has none (SGLang), ``prompt tokens/s / requests/s`` and
  ``generation tokens/s / requests/s``, which lag while the load changes (prompt tokens are
  counted at prefill, requests at their end);
- prefix-cache hit rate: cached prompt tokens over prompt tokens queried
  (``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries``; SGLang's ``cache_hit_rate``);
- mean TPOT and TTFT: the latency histograms' ``_sum`` over ``_count`` (the inter-token latency's
  mean is the token-weighted mean TPOT).

The rate's uncertainty: finished requests in a window of a steady stream are close to a Poisson
count ``N``, whose standard deviation is ``sqrt(N)``; the 95% interval of the rate is
``lambda x (1 +- 1.96 / sqrt(N))`` (normal approximation to the Poisson, e.g. Cox & Lewis,
*The Statistical Analysis of Series of Events*, 1966). Worked example (tests): 100 requests in
10 s -> 10 req/s, 95% interval 8.04-11.96 req/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servecap.monitor.window import WindowStats

Z95 = 1.959964  # the standard normal's 97.5% quantile


@dataclass(frozen=True, slots=True)
class ObservedMix:
    """What one replica served over the window (means per request)."""

    rate_per_s: float
    requests: float  # finished requests counted in the window, fleet-wide
    prompt_tokens: float
    output_tokens: float
    prefix_hit_rate: float
    tpot_mean_s: float | None
    ttft_mean_s: float | None
    window_s: float

    def rate_interval(self, z: float = Z95) -> tuple[float, float]:
        """The rate's interval from the Poisson count of finished requests (module docstring)."""
        if self.requests <= 0:
            return (0.0, math.inf)
        half = z / math.sqrt(self.requests)
        return (self.rate_per_s * max(0.0, 1.0 - half), self.rate_per_s * (1.0 + half))


def observed_mix(fleet: WindowStats, replicas_up: int) -> ObservedMix | None:
    """The mix per replica, or None when the window finished no request or lacks the counters
    (rate, prompt and generation tokens) the mix is read from."""
    rate, prompt, gen = fleet.request_rate_per_s, fleet.prompt_tok_s, fleet.generation_tok_s
    if replicas_up < 1 or rate is None or prompt is None or gen is None or rate <= 0:
        return None
    requests = fleet.requests_in_window if fleet.requests_in_window is not None else rate * fleet.window_s
    return ObservedMix(
        rate_per_s=rate / replicas_up,
        requests=requests,
        prompt_tokens=fleet.histogram_means.get("prompt_len") or prompt / rate,
        output_tokens=fleet.histogram_means.get("output_len") or gen / rate,
        prefix_hit_rate=min(1.0, max(0.0, fleet.prefix_hit_rate or 0.0)),
        tpot_mean_s=fleet.histogram_means.get("itl"),
        ttft_mean_s=fleet.histogram_means.get("ttft"),
        window_s=fleet.window_s,
    )
