"""KV tiers below GPU memory: capacity, read bandwidth and latency, and the time to load a cached
prefix from them (pure arithmetic; the simulator's tier resource is to read these numbers).

Tiers, fastest first: GPU HBM (the engine's own paged pool) -> CPU DRAM -> local NVMe SSD ->
a shared remote store (LMCache's tiers, LMCache/LMCache README: "GPU, CPU DRAM, Local Disk", and
remote backends). A tier is a :class:`KvTier`: ``capacity_bytes``, ``read_bytes_per_s`` (into GPU
memory) and ``latency_s`` (per load). Defaults, each from its source:

- CPU DRAM over PCIe Gen5 x16: 32.0 GT/s per lane with 128b/130b encoding (PCI-SIG, PCI Express
  Base Specification 5.0): ``16 x 32e9 x 128/130 / 8 = 63.0e9`` bytes/s per direction, the
  "~64 GB/s" usually quoted. The host link, not DRAM, bounds the copy into HBM.
- Local NVMe SSD, PCIe Gen5 x4: Samsung PM1743, 13,000 MB/s sequential read (Samsung's
  announcement, December 2021; 6,600 MB/s write) -- ``13.0e9`` bytes/s.
- Shared remote store over RDMA: a 400 Gb/s NIC (NVIDIA ConnectX-7, "up to 400Gb/s"):
  ``400e9 / 8 = 50.0e9`` bytes/s per direction.

Writes (a block the GPU evicts, a prefill's KV put in the shared store) are bounded by the
tier's write bandwidth: PCIe Gen5 x16 is the same 63.0e9 bytes/s each way; the PM1743 writes at
6,600 MB/s (Samsung's announcement) -- ``6.6e9`` bytes/s; the NIC's 50.0e9 bytes/s each way.

**The store as the P/D hand-off** (vLLM's ``MooncakeStoreConnector``: "Unlike MooncakeConnector
which does direct point-to-point KV transfer between prefiller and decoder, MooncakeStoreConnector
[uses] MooncakeDistributedStore as a shared KV cache pool ... Hash-based deduplication allows
multiple vLLM instances to share cached KV blocks through the store ... in disaggregated
prefill-decode setups", docs.vllm.ai features/mooncake_store_connector_usage; Mooncake (FAST'25)
§3: the prefill stores the new KV in the distributed pool, the decode node loads it): the
prefill puts the prompt's blocks the store does not hold yet, the decode side gets every block
of the prompt. Per GPU (each GPU's NIC moves its shard in parallel):
``put_s = latency + new_blocks x block_bytes_per_gpu / write_bw`` (0 when every block was there)
and ``get_s = latency + blocks x block_bytes_per_gpu / read_bw``, one after the other
(:func:`store_hand_off_s`).

Latencies default to 0: a load is a prefix's KV, megabytes per request, where the transfer time
dominates; give a tier's ``latency_s`` where it matters (many small loads). Capacities have no
default (they are the decision: ``fleet plan``'s tier lever sizes them).

Overlap: a loader that moves the KV layer by layer (LMCache ``use_layerwise``; vLLM's
``KVConnectorBase_V1.wait_for_layer_load``: "the transfer of layer i+1 overlaps with the
attention computation of layer i", vLLM Ascend's "Layerwise KV Pool" guide) exposes only what the
pipeline cannot hide. With ``L`` layers, a load of ``T_load`` and a compute of ``T_comp`` split
evenly per layer, the pipeline takes ``T_load/L + (L - 1) x max(T_load, T_comp)/L + T_comp/L``
(the first layer's load before any compute, the last layer's compute after every load); without
layer-wise loading the load precedes the compute: ``T_load + T_comp``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servecap.errors import ServecapError

PCIE_GEN5_X16_BYTES_S = 16 * 32.0e9 * 128 / 130 / 8  # 63.0e9 (PCI-SIG PCIe 5.0: 32 GT/s, 128b/130b)
NVME_GEN5_READ_BYTES_S = 13.0e9  # Samsung PM1743 sequential read, 13,000 MB/s
RDMA_400G_BYTES_S = 400e9 / 8  # a 400 Gb/s NIC (ConnectX-7): 50.0e9 bytes/s per direction
NVME_GEN5_WRITE_BYTES_S = 6.6e9  # Samsung PM1743 sequential write, 6,600 MB/s

# What a tier costs (fleet plan's tier levers), each from its source:
# - DRAM: Google Compute Engine N2 on-demand memory, $0.004237 per GiB-hour (us-central1; the price
#   OpenCost's GCP defaults carry, opencost/opencost configs/gcp.json "RAM": "0.004237"): the price
#   of a node's extra memory, and of a DRAM-backed shared store (Mooncake store, Redis/Valkey).
# - SSD: Google SSD persistent disk, $0.17 per GiB-month ("a 200 GB SSD Persistent Disk volume
#   would cost $34.00 for the whole month", Compute Engine disk pricing).
DRAM_USD_PER_GIB_HOUR = 0.004237
SSD_USD_PER_GIB_MONTH = 34.00 / 200

TIER_NAMES = ("cpu", "ssd", "remote")
DEFAULT_READ_BYTES_S = {"cpu": PCIE_GEN5_X16_BYTES_S, "ssd": NVME_GEN5_READ_BYTES_S, "remote": RDMA_400G_BYTES_S}
DEFAULT_WRITE_BYTES_S = {"cpu": PCIE_GEN5_X16_BYTES_S, "ssd": NVME_GEN5_WRITE_BYTES_S, "remote": RDMA_400G_BYTES_S}


@dataclass(frozen=True, slots=True)
class KvTier:
    """One tier below GPU memory (``write_bytes_per_s`` None: as fast as it reads)."""

    name: str
    capacity_bytes: float
    read_bytes_per_s: float
    latency_s: float = 0.0
    write_bytes_per_s: float | None = None

    def __post_init__(self) -> None:
        if self.name not in TIER_NAMES:
            raise ServecapError("tier", self.name, f"one of {', '.join(TIER_NAMES)}")
        for field, value, lo, hi in (
            ("capacity_bytes", self.capacity_bytes, 0.0, 1e18),  # up to an exabyte
            ("read_bytes_per_s", self.read_bytes_per_s, 1e6, 1e13),  # 1 MB/s .. 10 TB/s
            ("latency_s", self.latency_s, 0.0, 10.0),
            ("write_bytes_per_s", self.write_rate, 1e6, 1e13),
        ):
            if not math.isfinite(value) or not lo <= value <= hi:
                raise ServecapError(f"tier.{self.name}.{field}", value, f"must be within {lo:g}..{hi:g}")
        if self.capacity_bytes <= 0:
            raise ServecapError(f"tier.{self.name}.capacity_bytes", self.capacity_bytes, "must be positive")

    @property
    def write_rate(self) -> float:
        """Bytes per second into the tier."""
        return self.read_bytes_per_s if self.write_bytes_per_s is None else self.write_bytes_per_s


def tier_usd_per_month(name: str, capacity_gib: float, hours_per_month: float) -> float:
    """A tier's rent for ``capacity_gib``: DRAM (cpu, and the remote store, DRAM-backed) at
    :data:`DRAM_USD_PER_GIB_HOUR` x ``hours_per_month``, SSD at :data:`SSD_USD_PER_GIB_MONTH`."""
    if name == "ssd":
        return capacity_gib * SSD_USD_PER_GIB_MONTH
    if name in ("cpu", "remote"):
        return capacity_gib * DRAM_USD_PER_GIB_HOUR * hours_per_month
    raise ServecapError("tier", name, f"one of {', '.join(TIER_NAMES)}")


def default_tier(name: str, capacity_bytes: float) -> KvTier:
    """A tier with the module's cited bandwidth for ``name`` and ``capacity_bytes``."""
    if name not in DEFAULT_READ_BYTES_S:
        raise ServecapError("tier", name, f"one of {', '.join(TIER_NAMES)}")
    return KvTier(name, capacity_bytes, DEFAULT_READ_BYTES_S[name], write_bytes_per_s=DEFAULT_WRITE_BYTES_S[name])


def capacity_blocks(tier: KvTier, block_bytes: int) -> int:
    """Whole KV blocks (of ``block_bytes``, every layer) the tier holds."""
    if block_bytes <= 0:
        raise ServecapError("block_bytes", block_bytes, "must be positive")
    return int(tier.capacity_bytes // block_bytes)


def load_s(tier: KvTier, num_bytes: float) -> float:
    """Time to bring ``num_bytes`` of KV from ``tier`` into GPU memory: latency + bytes / bandwidth."""
    if num_bytes <= 0:
        return 0.0
    return tier.latency_s + num_bytes / tier.read_bytes_per_s


def with_load_s(load_s: float, compute_s: float, num_layers: int, *, layerwise: bool = True) -> float:
    """The prefill's time when a load of ``load_s`` feeds a compute of ``compute_s`` (module
    docstring): pipelined per layer, or load then compute."""
    if num_layers < 1:
        raise ServecapError("num_layers", num_layers, "must be >= 1")
    if load_s <= 0:
        return compute_s
    if not layerwise:
        return load_s + compute_s
    per_load, per_comp = load_s / num_layers, compute_s / num_layers
    return per_load + (num_layers - 1) * max(per_load, per_comp) + per_comp


def store_s(tier: KvTier, num_bytes: float) -> float:
    """Time to write ``num_bytes`` of KV into ``tier``: latency + bytes / write bandwidth (0 for none)."""
    if num_bytes <= 0:
        return 0.0
    return tier.latency_s + num_bytes / tier.write_rate


def store_hand_off_s(tier: KvTier, new_blocks: int, blocks: int, block_bytes_per_gpu: float) -> tuple[float, float]:
    """A P/D hand-off through the shared store ``tier`` (module docstring): the prefill's put of
    its ``new_blocks`` the store lacked, then the decode side's get of all ``blocks``; returns
    ``(put_s, get_s)``, per GPU (the GPUs' NICs move their shards in parallel)."""
    if not 0 <= new_blocks <= blocks:
        raise ServecapError("new_blocks", new_blocks, f"must be within 0..{blocks}")
    return store_s(tier, new_blocks * block_bytes_per_gpu), load_s(tier, blocks * block_bytes_per_gpu)
