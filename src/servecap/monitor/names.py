"""Which metric family carries which quantity, for vLLM (every version in
:mod:`servecap.specs.vllm_metrics`) and SGLang.

vLLM's names come from ``specs/vllm_metrics.py`` (newest name first, then its older aliases,
via ``names_for``). SGLang's are those of its ``sglang/srt/metrics/collector.py`` as exposed
(captured in ``tests/fixtures/metrics/sglang_production_metrics.txt``): gauges
``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:token_usage`` (KV pool
fraction), ``sglang:cache_hit_rate``; counters ``sglang:prompt_tokens_total``,
``sglang:generation_tokens_total``, ``sglang:num_requests_total``; histograms
``sglang:time_to_first_token_seconds``, ``sglang:inter_token_latency_seconds`` (older
``sglang:time_per_output_token_seconds``), ``sglang:e2e_request_latency_seconds``.
"""

from __future__ import annotations

from dataclasses import dataclass

from servecap.specs import vllm_metrics as v

LMCACHE_REQUESTED_TOKENS = "lmcache:num_requested_tokens"
LMCACHE_HIT_TOKENS = "lmcache:num_hit_tokens"
"""LMCache's retrieve counters (``lmcache/observability.py``, ``PrometheusLogger``: "Total
number of tokens requested from lmcache" / "Total number of tokens hit in lmcache", incremented by
``on_retrieve_request`` and ``on_retrieve_finished``), exposed on vLLM's ``/metrics`` when LMCache
runs as its KV connector (LMCache's docs, "Metrics by vLLM API"): the tokens vLLM asked LMCache
to load and those it loaded."""
BY_SOURCE_KEYS: dict[str, str] = {src: f"prompt_{src}" for src in v.PROMPT_SOURCES}
"""``vllm:prompt_tokens_by_source``'s series, one counter per ``source`` label."""
CACHE_COUNTERS: frozenset[str] = frozenset(
    {
        "prefix_queries",
        "prefix_hits",
        "external_prefix_queries",
        "external_prefix_hits",
        "prompt_tokens_cached",
        "lmcache_requested_tokens",
        "lmcache_hit_tokens",
        *BY_SOURCE_KEYS.values(),
    }
)
"""The token counters a hit rate is fitted from: a negative or non-finite value is refused."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """One quantity the monitor reads: the family names that may carry it, newest first."""

    key: str
    kind: str  # "gauge", "counter" or "histogram"
    families: tuple[str, ...]


def _q(key: str, kind: str, *families: str) -> Quantity:
    return Quantity(key, kind, tuple(families))


QUANTITIES: tuple[Quantity, ...] = (
    _q("spec_drafts", "counter", v.SPEC_DECODE_NUM_DRAFTS.name),
    _q("spec_draft_tokens", "counter", v.SPEC_DECODE_NUM_DRAFT_TOKENS.name),
    _q("spec_accepted_tokens", "counter", v.SPEC_DECODE_NUM_ACCEPTED_TOKENS.name),
    _q("running", "gauge", *v.names_for(v.NUM_REQUESTS_RUNNING), "sglang:num_running_reqs"),
    _q("waiting", "gauge", *v.names_for(v.NUM_REQUESTS_WAITING), "sglang:num_queue_reqs"),
    _q("kv_usage", "gauge", *v.names_for(v.KV_CACHE_USAGE_PERC), "sglang:token_usage"),
    _q("prompt_tokens", "counter", *v.names_for(v.PROMPT_TOKENS), "sglang:prompt_tokens"),
    _q("generation_tokens", "counter", *v.names_for(v.GENERATION_TOKENS), "sglang:generation_tokens"),
    _q("requests", "counter", *v.names_for(v.REQUEST_SUCCESS), "sglang:num_requests"),
    _q("preemptions", "counter", *v.names_for(v.NUM_PREEMPTIONS), "sglang:num_retracted_requests"),
    _q("prefix_queries", "counter", *v.names_for(v.PREFIX_CACHE_QUERIES)),
    _q("prefix_hits", "counter", *v.names_for(v.PREFIX_CACHE_HITS)),
    # cache sources (servecap.monitor.cache_hits): the KV connector's lookups, LMCache's loads
    _q("external_prefix_queries", "counter", v.EXTERNAL_PREFIX_CACHE_QUERIES.name),
    _q("external_prefix_hits", "counter", v.EXTERNAL_PREFIX_CACHE_HITS.name),
    _q("prompt_tokens_cached", "counter", v.PROMPT_TOKENS_CACHED.name),
    _q("lmcache_requested_tokens", "counter", LMCACHE_REQUESTED_TOKENS),
    _q("lmcache_hit_tokens", "counter", LMCACHE_HIT_TOKENS),
    _q("ttft", "histogram", *v.names_for(v.TIME_TO_FIRST_TOKEN), "sglang:time_to_first_token_seconds"),
    _q(
        "itl",
        "histogram",
        *v.names_for(v.INTER_TOKEN_LATENCY),
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
    ),
    _q("e2e", "histogram", *v.names_for(v.E2E_REQUEST_LATENCY), "sglang:e2e_request_latency_seconds"),
    _q("queue_time", "histogram", *v.names_for(v.REQUEST_QUEUE_TIME), "sglang:queue_time_seconds"),
    # per finished request: prompt and generated tokens (vLLM; SGLang has no such histogram)
    _q("prompt_len", "histogram", *v.names_for(v.REQUEST_PROMPT_TOKENS)),
    _q("output_len", "histogram", *v.names_for(v.REQUEST_GENERATION_TOKENS)),
)

GAUGES = tuple(q.key for q in QUANTITIES if q.kind == "gauge")
COUNTERS = tuple(q.key for q in QUANTITIES if q.kind == "counter")
LENGTHS = ("prompt_len", "output_len")  # token-count histograms: their means, no latency percentiles
HISTOGRAMS = tuple(q.key for q in QUANTITIES if q.kind == "histogram" and q.key not in LENGTHS)

SGLANG_CACHE_HIT_RATE = "sglang:cache_hit_rate"
"""SGLang exposes a prefix-cache hit rate gauge instead of query/hit counters."""
