"""The PromQL expressions of the alerts and the dashboard (vLLM's current names; one place).

Percentiles are ``histogram_quantile(q, sum by (le, instance) (rate(X_bucket[w])))``: the rate
of each cumulative bucket over the window, summed over a replica's engines, then Prometheus'
linear interpolation within the bucket (the rule :mod:`servecap.monitor.quantile` implements).
"""

from __future__ import annotations

from servecap.specs import vllm_metrics as v


def selector(model: str) -> str:
    return '{model_name="' + model.replace("\\", "\\\\").replace('"', '\\"') + '"}'


def per_instance(name: str, model: str) -> str:
    return f"sum by (instance) ({name}{selector(model)})"


def rate_per_instance(counter: str, model: str, window: str = "5m") -> str:
    return f"sum by (instance) (rate({counter}_total{selector(model)}[{window}]))"


def quantile_per_instance(q: float, hist: str, model: str, window: str = "5m") -> str:
    return f"histogram_quantile({q:g}, sum by (le, instance) (rate({hist}_bucket{selector(model)}[{window}])))"


def queue_depth(model: str) -> str:
    return per_instance(v.NUM_REQUESTS_WAITING.name, model)


def running(model: str) -> str:
    return per_instance(v.NUM_REQUESTS_RUNNING.name, model)


def kv_usage(model: str) -> str:
    """The current name, or (vLLM before 0.9.2) the older one: PromQL's ``or`` takes the first."""
    new, old = v.names_for(v.KV_CACHE_USAGE_PERC)[:2]
    return f"max by (instance) ({new}{selector(model)} or {old}{selector(model)})"


def ttft(q: float, model: str) -> str:
    return quantile_per_instance(q, v.TIME_TO_FIRST_TOKEN.name, model)


def itl(q: float, model: str) -> str:
    """Inter-token latency, or (vLLM before 0.11) the same observations under the older name."""
    new, old = v.names_for(v.INTER_TOKEN_LATENCY)[:2]
    sel = selector(model)
    return (
        f"histogram_quantile({q:g}, sum by (le, instance) (rate({new}_bucket{sel}[5m]) or rate({old}_bucket{sel}[5m])))"
    )


def preemptions(model: str) -> str:
    return rate_per_instance(v.NUM_PREEMPTIONS.name, model)


def tokens(model: str, kind: str) -> str:
    spec = v.PROMPT_TOKENS if kind == "prompt" else v.GENERATION_TOKENS
    return rate_per_instance(spec.name, model, "1m")
