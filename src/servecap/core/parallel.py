"""A replica's parallel layout checked against its model and GPU, and what each GPU holds.

The layouts are vLLM's and SGLang's:

- vLLM ``--data-parallel-size N --enable-expert-parallel`` (docs "Data Parallel Deployment",
  "Expert Parallel Deployment"): N attention ranks, each with its own KV cache and scheduler;
  "for MoE models ... the expert layers will by default form a (DP x TP) sized tensor parallel
  group. To enable expert parallelism, add the ``--enable-expert-parallel`` flag" (then
  EP = DP x TP);
- SGLang ``--tp N --enable-dp-attention --dp N --ep-size N``: the same with TP 1 per rank.

So the MoE layers of one pipeline stage spread over ``tp x dp`` GPUs: ``ep`` whole-expert groups
of ``tp x dp / ep`` GPUs each (``ep = 1``: every expert tensor-split over all of them), holding
``(E + redundant) / ep`` experts each. Attention, dense MLPs, norms and embeddings are split over
``tp`` and replicated over ``dp``.
"""

from __future__ import annotations

import math

from servecap.core.moe_dispatch import A2A_MODES
from servecap.errors import ServecapError
from servecap.specs.deployment import Parallelism
from servecap.specs.gpu import GpuSpec
from servecap.specs.model import ModelSpec

MAX_GPUS_PER_NODE = 72  # GB200 NVL72: the largest scale-up domain a catalog GPU has
MAX_EXPERT_SKEW = 4.0  # a Zipf exponent above this puts nearly every token on one expert


def check_parallelism(par: Parallelism, model: ModelSpec, gpu: GpuSpec) -> None:
    """Refuse a layout the engines refuse, each with one line naming the field and value."""
    for name, value, upper in (
        ("dp", par.dp, 1024),
        ("ep", par.ep, 4096),
        ("gpus_per_node", par.gpus_per_node, MAX_GPUS_PER_NODE),
    ):
        if not isinstance(value, int) or value < 1 or value > upper:
            raise ServecapError(name, value, f"must be a whole number from 1 to {upper}")
    if not isinstance(par.redundant_experts, int) or par.redundant_experts < 0 or par.redundant_experts > 4096:
        raise ServecapError("redundant_experts", par.redundant_experts, "must be a whole number from 0 to 4096")
    if not math.isfinite(par.expert_skew) or not 0.0 <= par.expert_skew <= MAX_EXPERT_SKEW:
        raise ServecapError(
            "expert_skew", par.expert_skew, f"must be a Zipf exponent from 0 (uniform) to {MAX_EXPERT_SKEW:g}"
        )
    if par.a2a_mode not in A2A_MODES:
        raise ServecapError("a2a_mode", par.a2a_mode, "must be " + ", ".join(A2A_MODES))
    moe = model.moe
    shards = par.moe_shards
    if par.ep > 1:
        if moe is None:
            raise ServecapError("ep", par.ep, f"{model.id} has no MoE layers: expert parallelism needs experts")
        if shards % par.ep:
            raise ServecapError("ep", par.ep, f"must divide tp x dp = {shards} (the GPUs of the MoE layers)")
        experts = moe.num_experts + par.redundant_experts
        if experts % par.ep:
            raise ServecapError(
                "ep",
                par.ep,
                f"must divide the {moe.num_experts} experts + {par.redundant_experts} redundant = {experts}",
            )
    if par.redundant_experts and par.ep <= 1:
        raise ServecapError("redundant_experts", par.redundant_experts, "needs expert parallelism (--ep > 1)")
    if par.num_gpus > par.gpus_per_node:
        if par.num_gpus % par.gpus_per_node:
            raise ServecapError(
                "gpus_per_node",
                par.gpus_per_node,
                f"must divide the replica's {par.num_gpus} GPUs (tp x pp x dp) when it spans nodes",
            )
        if gpu.nic_gb_s is None:
            raise ServecapError(
                "nodes",
                par.nodes,
                f"{gpu.id} has no sourced inter-node NIC bandwidth (nic_gb_s); add it with --gpu-file",
            )


def resolve_nodes(nodes: int | None, gpus_per_node: int | None, num_gpus: int) -> int:
    """GPUs per node from ``--nodes``/``--gpus-per-node`` (default 8, or the whole replica on one
    node when it is smaller); ``--nodes N`` alone spreads the replica evenly over N nodes."""
    if nodes is not None:
        if not isinstance(nodes, int) or nodes < 1 or nodes > 4096:
            raise ServecapError("nodes", nodes, "must be a whole number from 1 to 4096")
        if num_gpus % nodes:
            raise ServecapError("nodes", nodes, f"must divide the replica's {num_gpus} GPUs (tp x pp x dp)")
        per = num_gpus // nodes
        if gpus_per_node is not None and gpus_per_node != per:
            raise ServecapError(
                "gpus_per_node", gpus_per_node, f"{nodes} nodes x {gpus_per_node} != {num_gpus} GPUs (tp x pp x dp)"
            )
        return per
    if gpus_per_node is not None:
        return gpus_per_node
    return 8


def experts_per_gpu(num_experts: int, redundant: int, ep: int) -> float:
    """Whole experts one GPU of an ``ep``-way expert-parallel layer holds (``ep = 1``: all of them, split)."""
    return (num_experts + redundant) / ep
