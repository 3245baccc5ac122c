"""``servecap export litellm``: a LiteLLM proxy ``config.yaml`` in front of the pools.

- ``model_list``: one entry per pool (``model_name`` = the pool's name, so the gateway's fallback
  chains can name pools) with ``litellm_params.model: hosted_vllm/<model>`` and an ``api_base``
  from ``--api-base`` (default ``http://{pool}:8000/v1``, the Service ``servecap export keda``
  writes). A template with ``{replica}`` gives one entry per replica of a fixed-size pool (LiteLLM
  then balances between them); an autoscaled pool has no fixed replicas to list (error).
- ``router_settings.routing_strategy`` from the fleet's router:

  =================== ==================== ==================================================
  servecap            LiteLLM              notes
  =================== ==================== ==================================================
  ``least-outstanding`` ``least-busy``     fewest in-flight requests per deployment
  ``random``          ``simple-shuffle``
  ``round-robin``     ``simple-shuffle``   warning: a random choice, the same shares on
                                           average, not a strict rotation
  others              ``simple-shuffle``   warning: no counterpart
  =================== ==================== ==================================================

- ``router_settings.num_retries``: the fleet's ``max_retries`` (``on_failure: retry``), else 0.
- Fallbacks: the gateway's ``fallback.chains`` -> ``router_settings.fallbacks``
  (``[{pool: [pool, ...]}]``), ``fallback.max_retries`` -> ``max_fallbacks``; targets that are
  not pools (external providers) are left out with a warning, as are ``budget_percent``,
  ``min_retry_concurrency`` and an ``on`` list narrower than LiteLLM's (every error falls back).
- Per-tenant limits: LiteLLM keeps them on teams/keys in its database, set through its
  management API, not in ``config.yaml``; the file lists each tenant's ``POST /team/new`` body
  (``rpm_limit``, ``tpm_limit``, ``max_parallel_requests``) in comments, and a warning says so.
  ``burst_*``, ``daily_tokens``, ``tokens`` other than ``total``, ``on_limit: queue`` and
  ``per_replica`` enforcement have no counterpart (warnings). LiteLLM counts ``rpm_limit`` and
  ``tpm_limit`` per fixed window (``window: fixed``; a token bucket is warned about), of
  ``LITELLM_RATE_LIMIT_WINDOW_SIZE`` seconds: a ``window_s`` other than 60 is named in a warning
  with the environment setting to give the proxy.
- An exact-match cache becomes ``litellm_settings.cache`` (in-memory, ``ttl``); the semantic
  cache, the queue, class/length/share routing, overflow and providers are named in warnings.
"""

from __future__ import annotations

import json
from typing import NotRequired, TypedDict

from servecap.errors import ServecapError
from servecap.export.request import DEFAULT_API_BASE
from servecap.export.source import ExportInput
from servecap.policy.gateway.config import ExactCacheConfig, GatewayConfig, TenantLimitsConfig

_STRATEGY = {"least-outstanding": "least-busy", "random": "simple-shuffle", "round-robin": "simple-shuffle"}


# config.yaml's parts that are written (keys in the order they are written).
class LitellmParams(TypedDict):
    model: str
    api_base: str


class ModelInfo(TypedDict):
    id: str


class ModelEntry(TypedDict):
    model_name: str
    litellm_params: LitellmParams
    model_info: NotRequired[ModelInfo]


class RouterSettings(TypedDict):
    routing_strategy: str
    num_retries: int
    fallbacks: NotRequired[list[dict[str, list[str]]]]
    max_fallbacks: NotRequired[int]


class CacheParams(TypedDict):
    type: str
    ttl: NotRequired[float]


class CacheSettings(TypedDict):
    cache: bool
    cache_params: CacheParams


class LitellmConfig(TypedDict):
    model_list: list[ModelEntry]
    router_settings: RouterSettings
    litellm_settings: NotRequired[CacheSettings]


class TeamBody(TypedDict):
    """LiteLLM's ``POST /team/new`` body, the limits servecap sets."""

    team_alias: str
    rpm_limit: NotRequired[int]
    tpm_limit: NotRequired[int]
    max_parallel_requests: NotRequired[int]


def litellm_config(inp: ExportInput, warnings: list[str], *, api_base: str = DEFAULT_API_BASE) -> LitellmConfig:
    model_list: list[ModelEntry] = []
    for pool in inp.pools:
        per_replica = "{replica}" in api_base
        if per_replica and pool.autoscaler is not None:
            raise ServecapError(
                "api_base", api_base, f"pool {pool.name} is autoscaled: address its Service, without {{replica}}"
            )
        for i in range(pool.replicas if per_replica else 1):
            try:
                base = api_base.format(pool=pool.name, replica=i)
            except (KeyError, IndexError, ValueError) as err:
                raise ServecapError("api_base", api_base, f"takes only {{pool}} and {{replica}} ({err})") from None
            entry: ModelEntry = {
                "model_name": pool.name,
                "litellm_params": {"model": f"hosted_vllm/{pool.model}", "api_base": base},
            }
            if per_replica:
                entry["model_info"] = {"id": f"{pool.name}-{i}"}
            model_list.append(entry)
    router: RouterSettings = {
        "routing_strategy": _strategy(inp, warnings),
        "num_retries": inp.max_retries if inp.on_failure == "retry" else 0,
    }
    config: LitellmConfig = {"model_list": model_list, "router_settings": router}
    gw = inp.gateway
    if gw is not None:
        names = {p.name for p in inp.pools}
        _fallbacks(gw, names, router, warnings)
        settings = _cache(gw, warnings)
        if settings is not None:
            config["litellm_settings"] = settings
        for part, present in (
            ("queue", gw.queue is not None),
            ("routing", gw.routing is not None),
            ("overflow", bool(gw.overflow)),
            ("providers", bool(gw.providers)),
        ):
            if present:
                warnings.append(f"gateway.{part} has no LiteLLM config counterpart: not written")
    return config


def tenant_comments(inp: ExportInput, warnings: list[str]) -> list[str]:
    """Comment lines with each tenant's ``POST /team/new`` body (LiteLLM keeps limits in its database)."""
    gw = inp.gateway
    if gw is None or gw.rate_limits is None:
        return []
    rl = gw.rate_limits
    tenants: list[tuple[str, TenantLimitsConfig]] = sorted(rl.tenants.items())
    if rl.default is not None:
        tenants.append(("default", rl.default))
    if not tenants:
        return []
    warnings.append(
        "gateway.rate_limits: LiteLLM sets per-tenant limits on teams or keys through its management API "
        "(database-backed), not in config.yaml: the POST /team/new bodies are written as comments"
    )
    if rl.enforcement == "per_replica":
        warnings.append("gateway.rate_limits.enforcement per_replica: LiteLLM enforces limits globally (Redis)")
    lines = ["Per-tenant limits: create one team per tenant (POST /team/new), then its keys (POST /key/generate):"]
    windows: set[float] = set()
    for name, t in tenants:
        body: TeamBody = {"team_alias": name}
        if t.rpm is not None:
            body["rpm_limit"] = round(t.rpm)
        if t.tpm is not None:
            body["tpm_limit"] = round(t.tpm)
        if t.max_concurrent is not None:
            body["max_parallel_requests"] = t.max_concurrent
        lines.append("  " + json.dumps(body))
        where = f"gateway.rate_limits.tenants.{name}" if name != "default" else "gateway.rate_limits.default"
        for key in ("burst_requests", "burst_tokens", "daily_tokens"):
            if getattr(t, key) is not None:
                warnings.append(f"{where}.{key} {getattr(t, key):g} has no LiteLLM counterpart: not written")
        if t.tokens != "total":
            warnings.append(f"{where}.tokens {t.tokens}: LiteLLM's tpm_limit counts total tokens")
        if t.on_limit == "queue":
            warnings.append(f"{where}.on_limit queue: LiteLLM answers 429 at the limit")
        if t.rpm is not None or t.tpm is not None:
            _window(t, where, windows, warnings)
    if len(windows) > 1:
        warnings.append(
            f"gateway.rate_limits: windows of {', '.join(f'{w:g}' for w in sorted(windows))} s; "
            "LiteLLM has one window for every limit (LITELLM_RATE_LIMIT_WINDOW_SIZE)"
        )
    return lines


def _window(t: TenantLimitsConfig, where: str, windows: set[float], warnings: list[str]) -> None:
    """LiteLLM counts rpm_limit/tpm_limit per fixed window of LITELLM_RATE_LIMIT_WINDOW_SIZE seconds
    (default 60; servecap.policy.gateway.fixed_window cites the source)."""
    if t.window == "bucket":
        warnings.append(
            f"{where}: LiteLLM counts rpm_limit/tpm_limit per fixed 60 s window, not in a token bucket "
            "(window: fixed simulates it)"
        )
        return
    windows.add(t.window_s)
    if t.window_s != 60:
        whole = max(1, round(t.window_s))  # LiteLLM reads it with int()
        note = "" if whole == t.window_s else f" (LiteLLM takes whole seconds, not {t.window_s:g})"
        warnings.append(
            f"{where}.window_s {t.window_s:g}: run the proxy with LITELLM_RATE_LIMIT_WINDOW_SIZE={whole} "
            f"in its environment (rpm_limit then counts per window){note}"
        )


def _strategy(inp: ExportInput, warnings: list[str]) -> str:
    if inp.router is None:
        return "simple-shuffle"
    strategy = _STRATEGY.get(inp.router)
    if strategy is None:
        warnings.append(f"router {inp.router} has no LiteLLM routing_strategy: simple-shuffle written")
        return "simple-shuffle"
    if inp.router == "round-robin":
        warnings.append(
            "router round-robin: LiteLLM's simple-shuffle picks at random (the same shares on average, "
            "not a strict rotation)"
        )
    return strategy


def _fallbacks(gw: GatewayConfig, names: set[str], router: RouterSettings, warnings: list[str]) -> None:
    from servecap.export.source import dns_name

    fb = gw.fallback
    if fb is None:
        return
    chains: list[dict[str, list[str]]] = []
    for pool, chain in fb.chains.items():
        src = dns_name(pool)
        if src not in names:
            warnings.append(f"gateway.fallback.chains.{pool}: not a pool of this fleet: not written")
            continue
        targets = [dns_name(t) for t in chain if dns_name(t) in names]
        for t in chain:
            if dns_name(t) not in names:
                warnings.append(
                    f"gateway.fallback.chains.{pool}: {t!r} is not a pool (an external provider?): left out; "
                    "add its model_list entry to fall back to it"
                )
        if targets:
            chains.append({src: targets})
    if chains:
        router["fallbacks"] = chains
        router["max_fallbacks"] = fb.max_retries
    if fb.budget_percent is not None:
        warnings.append(f"gateway.fallback.budget_percent {fb.budget_percent:g} has no LiteLLM counterpart")
    if "min_retry_concurrency" in fb.model_fields_set:
        warnings.append(f"gateway.fallback.min_retry_concurrency {fb.min_retry_concurrency} has no LiteLLM counterpart")
    if set(fb.on) != {"failed", "rate_limited"}:
        warnings.append(f"gateway.fallback.on {fb.on}: LiteLLM falls back on every error")


def _cache(gw: GatewayConfig, warnings: list[str]) -> CacheSettings | None:
    c = gw.cache
    if c is None:
        return None
    if isinstance(c, ExactCacheConfig):
        params: CacheParams = {"type": "local"}
        if c.ttl_s is not None:
            params["ttl"] = c.ttl_s
        for key in ("capacity", "latency_s", "skip_multi_turn"):
            if key in c.model_fields_set:
                warnings.append(f"gateway.cache.{key} has no LiteLLM counterpart: not written")
        return {"cache": True, "cache_params": params}
    warnings.append(
        "gateway.cache (semantic): LiteLLM's semantic caches need an embedding model and a vector store: not written"
    )
    return None
