"""Where a server's prompt tokens found their KV over a window: its own prefix cache, an external
one (a KV connector: CPU/SSD offload, LMCache, another node's prefill), or nowhere.

Read from the first of these a server exposes (token counters, their deltas over the window):

1. ``vllm:prompt_tokens_by_source_total{source=...}`` (vLLM PR #33290, 2026): ``local_compute``,
   ``local_cache_hit``, ``external_kv_transfer``; they add up to the prompt tokens, so the hit
   rate is ``(local_cache_hit + external_kv_transfer) / (all three)``;
2. ``vllm:prefix_cache_queries/hits`` (0.9.2 on; ``gpu_prefix_cache_*`` before) for the local
   cache, plus the connector's hits where the server has them: ``vllm:external_prefix_cache_hits``
   (PR #26245; since PR #30522 its queries are the tokens the local cache missed, so local and
   external hits do not overlap) or else LMCache's ``lmcache:num_hit_tokens`` (the tokens it
   loaded into vLLM's blocks beyond vLLM's own hit); the hit rate is
   ``(local hits + external hits) / prefix-cache queries``.

This is the hit rate the engine model takes (:class:`~servecap.monitor.observed.ObservedMix`):
a cached token, local or loaded, is a prompt token not prefilled.

Counters that go down: a restarted server restarts all its counters, and (as Prometheus'
``rate()``) the end value is then the increase; a cache counter that went down while the
server's prompt-token counter kept counting is garbage, refused with one line, as are hits
above their queries.
"""

from __future__ import annotations

from dataclasses import dataclass

from servecap.errors import ServecapError
from servecap.monitor.names import BY_SOURCE_KEYS
from servecap.monitor.snapshot import Snapshot
from servecap.specs import vllm_metrics as v

_RESTART_WITNESS = ("prompt_tokens", "requests")  # counters that restart with the server

_SAMPLE_NAMES = {
    "prefix_queries": v.PREFIX_CACHE_QUERIES.sample_name,
    "prefix_hits": v.PREFIX_CACHE_HITS.sample_name,
    "external_prefix_queries": v.EXTERNAL_PREFIX_CACHE_QUERIES.sample_name,
    "external_prefix_hits": v.EXTERNAL_PREFIX_CACHE_HITS.sample_name,
    "lmcache_requested_tokens": "lmcache:num_requested_tokens_total",
    "lmcache_hit_tokens": "lmcache:num_hit_tokens_total",
    **{key: f"{v.PROMPT_TOKENS_BY_SOURCE.sample_name}{{source={src!r}}}" for src, key in BY_SOURCE_KEYS.items()},
}

BY_SOURCE = "vllm:prompt_tokens_by_source"
PREFIX_CACHE = "vllm:prefix_cache"
PREFIX_AND_EXTERNAL = "vllm:prefix_cache + vllm:external_prefix_cache"
PREFIX_AND_LMCACHE = "vllm:prefix_cache + lmcache"


@dataclass(frozen=True, slots=True)
class CacheHits:
    """Prompt tokens over a window: looked up, and found in the local or an external cache."""

    source: str  # the counters read (module docstring), e.g. "vllm:prompt_tokens_by_source"
    query_tokens: float
    local_hit_tokens: float
    external_hit_tokens: float

    @property
    def hit_rate(self) -> float | None:
        """Cached (local + external) over looked-up tokens; None when none was looked up."""
        if self.query_tokens <= 0:
            return None
        return (self.local_hit_tokens + self.external_hit_tokens) / self.query_tokens

    @property
    def local_hit_rate(self) -> float | None:
        return self.local_hit_tokens / self.query_tokens if self.query_tokens > 0 else None

    @property
    def external_hit_rate(self) -> float | None:
        return self.external_hit_tokens / self.query_tokens if self.query_tokens > 0 else None

    def plus(self, other: CacheHits) -> CacheHits:
        """Two servers' tokens together (a fleet); the sources joined when they differ."""
        source = self.source if self.source == other.source else f"{self.source}; {other.source}"
        return CacheHits(
            source,
            self.query_tokens + other.query_tokens,
            self.local_hit_tokens + other.local_hit_tokens,
            self.external_hit_tokens + other.external_hit_tokens,
        )


def _restarted(start: Snapshot, end: Snapshot) -> bool:
    """Whether the server restarted between the snapshots: a counter that restarts with it went
    down (with no such counter to tell, a decrease is taken as a restart)."""
    for key in _RESTART_WITNESS:
        if key in start.counters and key in end.counters:
            return end.counters[key] < start.counters[key]
    return True


def _increase(start: Snapshot, end: Snapshot, key: str, restarted: bool) -> float:
    a, b = start.counters.get(key, 0.0), end.counters.get(key, 0.0)
    if b >= a:
        return b - a
    if restarted:
        return b
    raise ServecapError(
        _SAMPLE_NAMES.get(key, key),
        f"{a:g} -> {b:g}",
        f"went backwards at {end.url} while its prompt tokens kept counting (not a restart)",
    )


def _not_above(hits: float, queries: float, key: str, url: str) -> None:
    if hits > queries + 1e-9:
        raise ServecapError(
            _SAMPLE_NAMES[key], hits, f"at {url}: more tokens hit than looked up ({queries:g}) over the window"
        )


def cache_hits(start: Snapshot, end: Snapshot) -> CacheHits | None:
    """The window's cache hits of one server (module docstring); None when it exposes none of
    the counters. Raises :class:`ServecapError` on garbage (a counter going backwards without
    a restart, hits above queries)."""
    restarted = _restarted(start, end)

    def has(key: str) -> bool:
        return key in start.counters and key in end.counters

    def inc(key: str) -> float:
        return _increase(start, end, key, restarted)

    by_source = [key for key in BY_SOURCE_KEYS.values() if has(key)]
    if by_source:
        d = {key: inc(key) for key in BY_SOURCE_KEYS.values()}
        local, external = d["prompt_local_cache_hit"], d["prompt_external_kv_transfer"]
        return CacheHits(BY_SOURCE, local + external + d["prompt_local_compute"], local, external)
    if not has("prefix_queries"):
        return None
    queries, local = inc("prefix_queries"), inc("prefix_hits")
    _not_above(local, queries, "prefix_hits", end.url)
    source, external = PREFIX_CACHE, 0.0
    if has("external_prefix_hits"):
        source, external = PREFIX_AND_EXTERNAL, inc("external_prefix_hits")
        if has("external_prefix_queries"):
            _not_above(external, inc("external_prefix_queries"), "external_prefix_hits", end.url)
    elif has("lmcache_hit_tokens"):
        source, external = PREFIX_AND_LMCACHE, inc("lmcache_hit_tokens")
        if has("lmcache_requested_tokens"):
            _not_above(external, inc("lmcache_requested_tokens"), "lmcache_hit_tokens", end.url)
    _not_above(local + external, queries, "prefix_hits", end.url)
    return CacheHits(source, queries, local, external)
