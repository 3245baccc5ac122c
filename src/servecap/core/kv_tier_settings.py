"""The KV-tier settings of a run (``--cpu-kv-gib``, ``--ssd-kv-gib``, ``--remote-kv-tib``,
``--kv-load``, ``--kv-store``) as the engine's tiers, each with its cited bandwidth (:mod:`servecap.core.kv_tiers`).

Ranges, by meaning (the request models' fields state them): CPU DRAM per replica 0.01 GiB (a few
blocks) .. 65,536 GiB (64 TiB, beyond any server's DRAM); local SSD per replica 0.01 ..
1,048,576 GiB (1 PiB); the fleet's shared remote store 0.001 (1 GiB) .. 100,000 TiB. 0 is
refused: leave the flag out for no tier."""

from __future__ import annotations

from typing import Literal

from servecap.core.kv_tiers import KvTier, default_tier

KvLoad = Literal["layerwise", "blocking", "async"]
KvStore = Literal["on-evict", "on-compute"]
GIB = 2**30
TIB = 2**40
CPU_KV_GIB = (0.01, 65536.0)
SSD_KV_GIB = (0.01, 1048576.0)
REMOTE_KV_TIB = (0.001, 100000.0)
CPU_HELP = "CPU DRAM KV tier per replica, GiB (LMCache max_local_cpu_size; vLLM's offloading connector)."
SSD_HELP = "Local SSD KV tier per replica, GiB (LMCache max_local_disk_size)."
REMOTE_HELP = "Shared remote KV store, TiB, read by every replica of the fleet (LMCache remote / Mooncake store)."
LOAD_HELP = (
    "How loads from the KV tiers meet the prefill: layerwise (overlapped layer by layer, LMCache use_layerwise), "
    "blocking (load, then compute, in the step that admits the request) or async (vLLM's offloading connector: "
    "the request waits outside the batch until its blocks are in, the next ones are scheduled meanwhile)."
)
STORE_HELP = (
    "What the KV tiers are fed: on-evict (the blocks the GPU evicts: a victim cache) or on-compute (every "
    "computed block, copied out after its step: vLLM's offloading connector)."
)


def check_modes_need_tiers(
    prefix: str, kv_load: str, kv_store: str, cpu_kv_gib: float | None, ssd_kv_gib: float | None, remote: float | None
) -> None:
    """Refuse a load or store mode other than the default (``layerwise``, ``on-evict``) where no
    tier is given: it would change nothing, silently. ``prefix``: the field's path before it."""
    if cpu_kv_gib is not None or ssd_kv_gib is not None or remote is not None:
        return
    from servecap.errors import ServecapError

    for key, value, default in (("kv_load", kv_load, "layerwise"), ("kv_store", kv_store, "on-evict")):
        if value != default:
            raise ServecapError(
                prefix + key,
                value,
                "sets how the KV tiers work, and none is given (cpu_kv_gib, ssd_kv_gib, remote_kv_tib)",
            )


def kv_tiers_of(cpu_kv_gib: float | None, ssd_kv_gib: float | None, remote_kv_tib: float | None) -> tuple[KvTier, ...]:
    """The tiers given (none: GPU memory only), fastest first, at their cited bandwidths."""
    tiers: list[KvTier] = []
    if cpu_kv_gib is not None:
        tiers.append(default_tier("cpu", cpu_kv_gib * GIB))
    if ssd_kv_gib is not None:
        tiers.append(default_tier("ssd", ssd_kv_gib * GIB))
    if remote_kv_tib is not None:
        tiers.append(default_tier("remote", remote_kv_tib * TIB))
    return tuple(tiers)
