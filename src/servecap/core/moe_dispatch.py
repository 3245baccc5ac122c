"""MoE expert parallelism: the all-to-all dispatch and combine of one MoE layer, and the expert
load imbalance that EPLB's redundant experts smooth.

**Bytes.** With expert parallelism each GPU sends each of its tokens to the GPUs holding the
token's ``top_k`` experts (dispatch) and gets the experts' outputs back (combine). DeepEP
(deepseek-ai/DeepEP README, "Low-latency kernels with pure RDMA"; the DeepSeek-V3/R1 setting
"7168 hidden, top-8 experts, FP8 dispatching and BF16 combining") moves one copy per
(token, expert) pair:

- dispatch copy: ``hidden`` FP8 bytes plus one float32 scale per 128 channels
  (``hidden + hidden / 128 x 4``; DeepEP's FP8 cast is per token per 128 channels);
- combine copy: ``hidden x 2`` (BF16);
- of the ``tokens x top_k`` copies, uniform routing sends ``(g - 1) / ep`` to the other GPUs of
  the node and ``(ep - g) / ep`` to other nodes (``g = min(gpus_per_node, ep)``), the rest stay.

Check against the README: 128 tokens x 8 copies x 7,392 B = 7.57 MB at EP 32's 48 GB/s is
158 us (printed: 155 us); combine 14.7 MB at 53 GB/s is 277 us (printed: 273 us).

**Time.** ``low_latency`` mode (decode): ``copy bytes / bw_LL(ep)``, DeepEP's measured
low-latency bandwidth per EP size (H800 with a CX7 400 Gb/s NIC, ~50 GB/s), scaled by the GPU's
NIC over those 50 GB/s. ``normal`` mode (prefill): NVLink forwarding, so a token crosses the
network once per destination node: the remote nodes a token reaches are
``(N - 1) x (1 - (1 - 1/N)^k)`` for ``N`` nodes (uniform routing), each at ``bw_normal(ep)``, the
README's bottleneck RDMA bandwidth, while the intra-node copies go over NVLink at DeepEP's
153/158 GB/s of H800's ~160 GB/s (scaled to the GPU's link); the slower of the two bounds the
layer. Inside one node (``ep <= gpus_per_node``) both modes move the remote copies over the
scale-up link at that share. A fixed per-collective latency (``core.comm``) is added.

**Imbalance.** The busiest GPU sets the pace of the expert GEMMs. Expert loads follow a Zipf
law with exponent ``skew`` (0: uniform). Without redundant experts they sit contiguously
(expert ``i`` on GPU ``i // (E / ep)``); with ``r`` redundant experts they are placed as
DeepSeek's EPLB does (deepseek-ai/EPLB ``eplb.py``: ``replicate_experts`` gives each extra
replica to the expert with the highest load per replica, ``balanced_packing`` puts replicas,
heaviest first, on the least loaded GPU that still has a free slot). The factor is the busiest
GPU's load over the mean.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from servecap.core.comm import Links

FP8_SCALE_GROUP = 128  # channels per float32 scale in DeepEP's FP8 dispatch
FP8_SCALE_BYTES = 4
COMBINE_BYTES_PER_ELEMENT = 2  # BF16 combine

# deepseek-ai/DeepEP README, "Low-latency kernels with pure RDMA" (H800, CX7 400 Gb/s, 128 tokens,
# 7168 hidden, top-8, FP8 dispatch, BF16 combine): EP size -> (dispatch GB/s, combine GB/s)
DEEPEP_LOW_LATENCY_GB_S: dict[int, tuple[float, float]] = {
    8: (98.0, 127.0),
    16: (63.0, 74.0),
    32: (48.0, 53.0),
    64: (43.0, 46.0),
    128: (39.0, 39.0),
    256: (39.0, 40.0),
}
# the same README, "Normal kernels with NVLink and RDMA forwarding" (4096 tokens): bottleneck
# bandwidth per EP size; EP 8 is intranode over NVLink (~160 GB/s maximum on H800)
DEEPEP_NORMAL_RDMA_GB_S: dict[int, tuple[float, float]] = {16: (43.0, 43.0), 32: (58.0, 57.0), 64: (51.0, 50.0)}
DEEPEP_NORMAL_NVLINK_GB_S = (153.0, 158.0)
DEEPEP_H800_NVLINK_GB_S = 160.0
DEEPEP_NIC_GB_S = 50.0  # "CX7 InfiniBand 400 Gb/s RDMA network card (~50 GB/s maximum bandwidth)"

A2A_MODES = ("auto", "normal", "low_latency")
LOW_LATENCY_MAX_TOKENS_PER_RANK = 256  # DeepEP: num_max_dispatch_tokens_per_rank "should be less than 256"


@dataclass(frozen=True, slots=True)
class A2aBytes:
    """Bytes one GPU sends in one MoE layer's dispatch (or combine), by where they go."""

    total_bytes: float  # every (token, expert) copy, local ones included
    intra_node_bytes: float  # to other GPUs of the same node
    inter_node_bytes: float  # to GPUs of other nodes

    @property
    def remote_bytes(self) -> float:
        return self.intra_node_bytes + self.inter_node_bytes


def dispatch_bytes_per_copy(hidden: int, *, fp8: bool = True) -> float:
    """One token's hidden state as dispatched: FP8 with per-128-channel float32 scales, or BF16."""
    if not fp8:
        return float(hidden * 2)
    return float(hidden + math.ceil(hidden / FP8_SCALE_GROUP) * FP8_SCALE_BYTES)


def combine_bytes_per_copy(hidden: int) -> float:
    return float(hidden * COMBINE_BYTES_PER_ELEMENT)


def a2a_bytes(tokens: float, top_k: int, ep: int, gpus_per_node: int, bytes_per_copy: float) -> A2aBytes:
    """Bytes one GPU's ``tokens`` send (uniform routing over ``ep`` GPUs, ``gpus_per_node`` a node)."""
    total = tokens * top_k * bytes_per_copy
    if ep <= 1:
        return A2aBytes(total, 0.0, 0.0)
    g = min(gpus_per_node, ep)
    return A2aBytes(total, total * (g - 1) / ep, total * (ep - g) / ep)


def remote_nodes_per_token(top_k: int, nodes: int) -> float:
    """Expected other nodes a token's ``top_k`` uniformly routed experts sit on:
    ``(N - 1) x (1 - (1 - 1/N)^k)`` (each other node is hit unless all k picks miss it)."""
    if nodes <= 1:
        return 0.0
    return (nodes - 1) * (1.0 - (1.0 - 1.0 / nodes) ** top_k)


def _interp_log2(table: dict[int, tuple[float, float]], ep: int, which: int) -> float:
    """Piecewise-linear in log2(ep) between the table's EP sizes, clamped at its ends."""
    keys = sorted(table)
    if ep <= keys[0]:
        return table[keys[0]][which]
    if ep >= keys[-1]:
        return table[keys[-1]][which]
    for lo, hi in itertools.pairwise(keys):
        if lo <= ep <= hi:
            f = (math.log2(ep) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
            return table[lo][which] + f * (table[hi][which] - table[lo][which])
    return table[keys[-1]][which]  # pragma: no cover


def resolve_mode(mode: str, tokens_per_rank: float) -> str:
    """``auto``: low-latency kernels for a small batch (a decode step), normal ones above
    DeepEP's low-latency limit of 256 tokens per rank."""
    if mode == "auto":
        return "low_latency" if tokens_per_rank <= LOW_LATENCY_MAX_TOKENS_PER_RANK else "normal"
    return mode


def a2a_seconds_per_token(
    *,
    hidden: int,
    top_k: int,
    ep: int,
    gpus_per_node: int,
    mode: str,
    links: Links,
    fp8_dispatch: bool = True,
) -> float:
    """Dispatch + combine seconds per token of one GPU in one MoE layer (linear in tokens: the
    per-collective latency is :func:`a2a_latency_s`). ``mode`` is ``normal`` or ``low_latency``."""
    if ep <= 1:
        return 0.0
    d_copy = dispatch_bytes_per_copy(hidden, fp8=fp8_dispatch)
    c_copy = combine_bytes_per_copy(hidden)
    nvl_share = links.intra_bytes_s / (DEEPEP_H800_NVLINK_GB_S * 1e9)
    if ep <= gpus_per_node:  # one node: the remote copies over the scale-up link
        d = a2a_bytes(1.0, top_k, ep, gpus_per_node, d_copy).remote_bytes
        c = a2a_bytes(1.0, top_k, ep, gpus_per_node, c_copy).remote_bytes
        bw_d = DEEPEP_NORMAL_NVLINK_GB_S[0] * 1e9 * nvl_share
        bw_c = DEEPEP_NORMAL_NVLINK_GB_S[1] * 1e9 * nvl_share
        return d / bw_d + c / bw_c
    if links.inter_bytes_s is None:
        raise ValueError("expert parallelism across nodes needs the GPU's NIC bandwidth (nic_gb_s)")
    nic_share = links.inter_bytes_s / (DEEPEP_NIC_GB_S * 1e9)
    if mode == "low_latency":
        bw_d = _interp_log2(DEEPEP_LOW_LATENCY_GB_S, ep, 0) * 1e9 * nic_share
        bw_c = _interp_log2(DEEPEP_LOW_LATENCY_GB_S, ep, 1) * 1e9 * nic_share
        return top_k * d_copy / bw_d + top_k * c_copy / bw_c
    if mode != "normal":
        raise ValueError(f"unknown all-to-all mode {mode!r}")
    nodes = -(-ep // gpus_per_node)
    remote_nodes = remote_nodes_per_token(top_k, nodes)
    total = 0.0
    for which, copy in ((0, d_copy), (1, c_copy)):
        intra = a2a_bytes(1.0, top_k, ep, gpus_per_node, copy).intra_node_bytes
        t_nvl = intra / (DEEPEP_NORMAL_NVLINK_GB_S[which] * 1e9 * nvl_share)
        t_rdma = remote_nodes * copy / (_interp_log2(DEEPEP_NORMAL_RDMA_GB_S, ep, which) * 1e9 * nic_share)
        total += max(t_nvl, t_rdma)
    return total


def a2a_latency_s(ep: int, gpus_per_node: int, links: Links) -> float:
    """The fixed part of one layer's dispatch + combine: two collectives' link latency."""
    if ep <= 1:
        return 0.0
    return 2.0 * (links.inter_latency_s if ep > gpus_per_node else links.intra_latency_s)


def zipf_loads(num_experts: int, skew: float) -> list[float]:
    """Expert ``i``'s share of tokens proportional to ``1 / (i + 1)^skew``."""
    return [1.0 / (i + 1) ** skew for i in range(num_experts)]


def replica_counts(loads: list[float], redundant: int) -> list[int]:
    """EPLB's ``replicate_experts``: each redundant slot to the expert with the highest load per
    replica (the lowest index on a tie)."""
    counts = [1] * len(loads)
    for _ in range(redundant):
        best = max(range(len(loads)), key=lambda i: (loads[i] / counts[i], -i))
        counts[best] += 1
    return counts


def gpu_loads(loads: list[float], ep: int, redundant: int) -> list[float]:
    """Each GPU's share of the expert tokens: contiguous placement without redundant experts,
    EPLB's replication and balanced packing with them."""
    n = len(loads)
    if redundant <= 0:
        per = n // ep
        return [sum(loads[g * per : (g + 1) * per]) for g in range(ep)]
    counts = replica_counts(loads, redundant)
    replicas = sorted(((loads[i] / counts[i], i) for i in range(n) for _ in range(counts[i])), key=lambda x: -x[0])
    slots = (n + redundant) // ep
    totals = [0.0] * ep
    used = [0] * ep
    for w, _ in replicas:
        g = min((g for g in range(ep) if used[g] < slots), key=lambda g: (totals[g], g))
        totals[g] += w
        used[g] += 1
    return totals


def expert_load_factor(num_experts: int, ep: int, redundant: int, skew: float) -> float:
    """The busiest GPU's expert tokens over the mean (1.0 for uniform routing or no EP)."""
    if ep <= 1 or skew <= 0.0:
        return 1.0
    per_gpu = gpu_loads(zipf_loads(num_experts, skew), ep, redundant)
    return max(per_gpu) / (sum(per_gpu) / ep)
