"""vLLM's native CPU offloading flags for a pool's KV tiers (``--kv-offloading-backend native
--kv-offloading-size <GiB>``; "Inside vLLM's New Offloading Connector", vLLM blog 2025-12-29,
vLLM PR #24498), with what they cannot express (an SSD or remote tier, layer-by-layer loads)
named in the warnings. Used by the serving exports (:mod:`servecap.export.vllm_args`) and the
``kv-tiers`` target (:mod:`servecap.export.kv_tiers`)."""

from __future__ import annotations

from servecap.export.source import PoolExport


def gib_figure(x: float) -> float:
    """A size in GiB to six significant figures (as the engines' settings are written)."""
    return float(f"{x:.6g}")


def vllm_offload_kwargs(pool: PoolExport, warnings: list[str]) -> dict[str, str | float]:
    """vLLM's native CPU offloading flags for ``pool`` (none without a CPU tier)."""
    t = pool.kv_tiers
    if not t:
        return {}
    if t.get("ssd_kv_gib") is not None:
        warnings.append(
            f"{pool.name}: ssd_kv_gib {t['ssd_kv_gib']:g} has no vLLM native offloading flag (CPU only): "
            "use LMCache's local disk (servecap export kv-tiers)"
        )
    if t.get("remote_kv_tib") is not None:
        warnings.append(
            f"{pool.name}: remote_kv_tib {t['remote_kv_tib']:g} has no vLLM native offloading flag: "
            "use LMCache's remote_url or the Mooncake store (servecap export kv-tiers)"
        )
    cpu = t.get("cpu_kv_gib")
    if cpu is None:
        return {}
    if pool.kv_load == "layerwise":
        warnings.append(
            f"{pool.name}: kv_load layerwise: vLLM's native connector loads asynchronously before the prefill, "
            "not layer by layer (LMCache use_layerwise does)"
        )
    elif pool.kv_load == "blocking":
        warnings.append(
            f"{pool.name}: kv_load blocking: vLLM's native connector loads asynchronously (the request waits, the "
            "batch runs on), not inside the step that admits the request"
        )
    if pool.kv_store == "on-evict":
        warnings.append(
            f"{pool.name}: kv_store on-evict: vLLM's native connector stores every computed block (on-compute), "
            "not only the GPU's evictions"
        )
    return {"kv_offloading_backend": "native", "kv_offloading_size": gib_figure(cpu)}
