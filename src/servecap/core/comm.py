"""Links and collectives: which link a group of GPUs talks over, and what a collective costs.

A replica's GPUs sit ``gpus_per_node`` to a node. Inside a node they talk over the GPU's
scale-up link (NVLink/NVSwitch, AMD Infinity Fabric/xGMI, or PCIe: ``GpuSpec.interconnect_gb_s``,
one direction per GPU); between nodes over the GPU's NIC (InfiniBand/RoCE, one NIC per GPU in
the reference nodes: ``GpuSpec.nic_gb_s``). All bandwidths are one direction, per GPU, in
bytes/s; the catalog cites each (``catalog/data/gpus.toml``).

- ring all-reduce of ``m`` bytes over ``n`` GPUs (Patarasuk and Yuan, "Bandwidth optimal
  all-reduce algorithms for clusters of workstations", JPDC 2009): each GPU sends and receives
  ``2 (n - 1) / n x m`` bytes, so ``t = 2 (n - 1) / n x m / bw + latency``; a ring that spans
  nodes runs at its slowest hop, the NIC;
- point-to-point (a pipeline stage's activations, a KV transfer): ``t = m / bw + latency``.

Pure functions of plain numbers: the per-operation step model calls them as operations.
"""

from __future__ import annotations

from dataclasses import dataclass

# Link latency per message where the catalog row states none: AIConfigurator's system files
# (ai-dynamo/aiconfigurator src/aiconfigurator/systems/h800_sxm.yaml ``p2p_latency: 0.00001``,
# "10us some nonofficial correction based on observations"); the same figure in its H100/H200 rows.
DEFAULT_P2P_LATENCY_S = 10e-6


@dataclass(frozen=True, slots=True)
class Links:
    """One GPU's links: ``intra`` inside its node, ``inter`` to other nodes (None: no NIC known)."""

    intra_bytes_s: float
    inter_bytes_s: float | None
    intra_latency_s: float = DEFAULT_P2P_LATENCY_S
    inter_latency_s: float = DEFAULT_P2P_LATENCY_S


def spans_nodes(group_gpus: int, gpus_per_node: int) -> bool:
    """A group of ``group_gpus`` consecutive GPUs crosses a node boundary."""
    return group_gpus > gpus_per_node


def group_link(links: Links, group_gpus: int, gpus_per_node: int) -> tuple[float, float]:
    """(bytes/s, latency s) of the slowest hop of a group: the NIC once it spans nodes."""
    if spans_nodes(group_gpus, gpus_per_node):
        if links.inter_bytes_s is None:
            raise ValueError("the group spans nodes but the GPU has no inter-node NIC bandwidth")
        return links.inter_bytes_s, links.inter_latency_s
    return links.intra_bytes_s, links.intra_latency_s


def ring_allreduce_s(message_bytes: float, num_gpus: int, link_bytes_s: float, latency_s: float) -> float:
    """Ring all-reduce time: ``2 (n-1)/n x m / bw + latency`` (0 for one GPU)."""
    if num_gpus <= 1 or message_bytes <= 0:
        return 0.0
    return 2.0 * (num_gpus - 1) / num_gpus * message_bytes / link_bytes_s + latency_s


def p2p_s(message_bytes: float, link_bytes_s: float, latency_s: float) -> float:
    """Point-to-point send time: ``m / bw + latency`` (0 for nothing to send)."""
    if message_bytes <= 0:
        return 0.0
    return message_bytes / link_bytes_s + latency_s
