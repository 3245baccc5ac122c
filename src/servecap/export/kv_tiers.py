"""A pool's KV tiers (``cpu_kv_gib``, ``ssd_kv_gib``, ``remote_kv_tib``, ``kv_load``) as the
settings of the engines that run them, with what does not map named in the warnings:

- vLLM's native offloading connector (CPU DRAM only): ``--kv-offloading-backend native
  --kv-offloading-size <GiB>`` ("Inside vLLM's New Offloading Connector", vLLM blog 2025-12-29:
  ``--kv_offloading_backend native --kv_offloading_size <size_in_GB>``, vLLM PR #24498; older
  releases take ``--kv-transfer-config`` with ``OffloadingConnector`` and ``num_cpu_blocks``).
  The size is the replica's, over all its tensor-parallel ranks. It has no SSD or remote tier
  and loads asynchronously, not layer by layer: those are warnings.
- LMCache (its configuration keys, as a YAML file or ``LMCACHE_*`` environment variables):
  ``local_cpu`` / ``max_local_cpu_size`` (GB), ``local_disk`` / ``max_local_disk_size`` (GB),
  ``remote_url``, ``use_layerwise``, with vLLM's ``--kv-transfer-config
  {"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}``. LMCache runs in every GPU
  worker, so its sizes are the replica's divided by its GPUs. The remote store's size is the
  store's own setting (Mooncake store, Valkey ``maxmemory``), and its address a placeholder.
- KServe ``LLMInferenceService`` (``serving.kserve.io/v1alpha2``) ``spec.kvCacheOffloading``:
  ``cpu`` (a quantity), ``evictionPolicy: lru``, ``secondary`` disk tiers
  (``fileSystem.emptyDir.size``); a remote store has no field there (KServe's LMCache + Valkey
  sample configures one through LMCache).
"""

from __future__ import annotations

import math
from typing import Any

from servecap.export.source import ExportInput, PoolExport
from servecap.export.vllm_offload import gib_figure, vllm_offload_kwargs

LMCACHE_CONNECTOR = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
REMOTE_URL_PLACEHOLDER = "lm://REPLACE-WITH-YOUR-STORE:65432"


def lmcache_settings(pool: PoolExport, warnings: list[str]) -> dict[str, Any]:
    """LMCache's configuration for ``pool``'s tiers (per GPU worker)."""
    t = pool.kv_tiers or {}
    gpus = max(1, pool.gpus_per_replica)
    cfg: dict[str, Any] = {"chunk_size": 256}
    if t.get("cpu_kv_gib") is not None:
        cfg["local_cpu"] = True
        cfg["max_local_cpu_size"] = gib_figure(t["cpu_kv_gib"] * 2**30 / 1e9 / gpus)
    else:
        cfg["local_cpu"] = False
    if t.get("ssd_kv_gib") is not None:
        cfg["local_disk"] = "file:///var/lib/lmcache/"
        cfg["max_local_disk_size"] = gib_figure(t["ssd_kv_gib"] * 2**30 / 1e9 / gpus)
    if t.get("remote_kv_tib") is not None:
        cfg["remote_url"] = REMOTE_URL_PLACEHOLDER
        cfg["remote_serde"] = "naive"
        warnings.append(
            f"{pool.name}: remote_kv_tib {t['remote_kv_tib']:g}: LMCache has no setting for the store's size: "
            "size the store itself (Mooncake store segments, Valkey maxmemory); replace the remote_url placeholder"
        )
    cfg["use_layerwise"] = pool.kv_load == "layerwise"
    if pool.kv_load == "async":
        warnings.append(
            f"{pool.name}: kv_load async (vLLM's native connector): LMCache loads before the forward pass "
            "(use_layerwise off) or layer by layer, inside the step"
        )
    if pool.kv_store == "on-evict":
        warnings.append(
            f"{pool.name}: kv_store on-evict: LMCache stores every computed chunk (on-compute), not the GPU's evictions"
        )
    return cfg


def lmcache_env(cfg: dict[str, Any]) -> dict[str, str]:
    """The same settings as LMCache's ``LMCACHE_*`` environment variables."""
    return {
        "LMCACHE_" + k.upper(): (str(v) if not isinstance(v, bool) else ("True" if v else "False"))
        for k, v in cfg.items()
    }


def kserve_offloading(pool: PoolExport, warnings: list[str]) -> dict[str, Any] | None:
    """KServe ``LLMInferenceService`` ``spec.kvCacheOffloading`` for ``pool`` (None: no tier it maps)."""
    t = pool.kv_tiers or {}
    if t.get("remote_kv_tib") is not None:
        warnings.append(
            f"{pool.name}: remote_kv_tib {t['remote_kv_tib']:g} has no kvCacheOffloading field: "
            "configure the store through LMCache (KServe's LMCache + Valkey sample)"
        )
    if t.get("cpu_kv_gib") is None:
        if t.get("ssd_kv_gib") is not None:
            warnings.append(f"{pool.name}: kvCacheOffloading needs a cpu tier for a disk tier: none written")
        return None
    spec: dict[str, Any] = {"cpu": f"{math.ceil(t['cpu_kv_gib'])}Gi", "evictionPolicy": "lru"}
    if t.get("ssd_kv_gib") is not None:
        spec["secondary"] = [{"fileSystem": {"emptyDir": {"size": f"{math.ceil(t['ssd_kv_gib'])}Gi"}}}]
    return spec


def kv_tier_documents(inp: ExportInput, warnings: list[str]) -> dict[str, Any]:
    """The ``kv-tiers`` target: per pool, vLLM's flags, LMCache's settings (YAML and environment)
    and KServe's ``kvCacheOffloading``."""
    out: dict[str, Any] = {}
    for pool in inp.pools:
        if not pool.kv_tiers:
            warnings.append(f"{pool.name}: no KV tier below GPU memory (cpu_kv_gib, ssd_kv_gib, remote_kv_tib)")
            continue
        from servecap.export.vllm_args import cli_args

        native = vllm_offload_kwargs(pool, warnings)
        lm = lmcache_settings(pool, warnings)
        entry: dict[str, Any] = {
            "vllm_native_args": cli_args(dict(native)) if native else [],
            "lmcache": {
                "vllm_args": ["--kv-transfer-config", LMCACHE_CONNECTOR],
                "config_yaml": lm,
                "env": lmcache_env(lm),
            },
        }
        ks = kserve_offloading(pool, warnings)
        if ks is not None:
            entry["kserve"] = {"apiVersion": "serving.kserve.io/v1alpha2", "spec": {"kvCacheOffloading": ks}}
        out[pool.name] = entry
    return out
