"""Vectorised plan over a cross product (models x GPUs x weight dtypes x KV dtypes x TP x context).

The per-model quantities (weights per GPU, KV layout, blocks per request, step-time
coefficients) come from the same scalar functions :func:`plan` uses, computed once per
(model, dtype, TP); the GPU x context axes are then numpy arithmetic. A test checks that every
figure here equals :func:`plan`'s for sampled points. Needs numpy (the ``sim`` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from servecap.core.blocks import kv_layout
from servecap.core.defaults import DEFAULT_GPU_MEMORY_UTILIZATION, default_batch_limits
from servecap.core.kv import resolve_kv_dtype
from servecap.core.memory import NON_TORCH_BYTES_PER_GPU, activation_peak_bytes, resolve_weight_dtype, stage_weights
from servecap.core.roofline import step_cost
from servecap.errors import ServecapError
from servecap.specs.deployment import Deployment, EngineConfig, Parallelism
from servecap.specs.gpu import GpuSpec
from servecap.specs.model import ModelSpec
from servecap.specs.perf import Efficiency
from servecap.units import TB_BYTES, TFLOPS

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class SweepResult:
    """Arrays of shape (configs, gpus, lengths); ``labels`` names the first axis."""

    labels: list[tuple[str, str, str, int]]  # (model, weights dtype, kv dtype, tp)
    gpus: list[str]
    lengths: list[int]
    num_blocks: NDArray[np.float64]
    max_concurrency: NDArray[np.float64]
    decode_step_s: NDArray[np.float64]
    feasible: NDArray[np.bool_]

    @property
    def num_configs(self) -> int:
        return int(self.num_blocks.size)


def sweep(
    models: Sequence[ModelSpec],
    gpus: Sequence[GpuSpec],
    *,
    weights_dtypes: Sequence[str] = ("bf16", "fp8", "int4", "nvfp4"),
    kv_dtypes: Sequence[str] = ("auto", "fp8"),
    tps: Sequence[int] = (1, 2, 4, 8),
    lengths: Sequence[int] = (2048, 4096, 8192, 16384, 32768, 131072),
    efficiency: Efficiency | None = None,
) -> SweepResult:
    import numpy as np

    eff = efficiency or Efficiency()
    total_mem = np.array([g.total_memory_bytes for g in gpus], dtype=np.float64)
    bw = np.array([g.hbm_bandwidth_tb_s * TB_BYTES * eff.bandwidth_efficiency_on(g.family) for g in gpus])
    overhead_s = np.array([eff.step_overhead_on(g.family) for g in gpus])
    limits = [default_batch_limits(g) for g in gpus]
    seqs = np.array([s for _, s in limits], dtype=np.float64)
    lens = np.array(lengths, dtype=np.float64)

    labels: list[tuple[str, str, str, int]] = []
    blocks_out, conc_out, step_out, ok_out = [], [], [], []
    for model in models:
        for tp in tps:
            heads = model.attention.num_heads if model.attention else (model.mla.num_heads if model.mla else tp)
            if heads % tp:
                continue
            act = {
                lim: activation_peak_bytes(model, tp=tp, max_num_batched_tokens=lim[0], max_num_seqs=lim[1])
                for lim in set(limits)
            }
            act_row = np.array([act[lim] for lim in limits], dtype=np.float64)
            for kv_name in kv_dtypes:
                kv = resolve_kv_dtype(kv_name, model)
                try:
                    layout = kv_layout(model, model.layers, tp=tp, kv_dtype=kv, block_size=None)
                except ServecapError:
                    continue
                per_limit = {lim: [layout.blocks_per_request(int(n), lim[0]) for n in lengths] for lim in set(limits)}
                bpr = np.array([per_limit[lim] for lim in limits], dtype=np.float64)  # (gpus, lengths)
                for w_name in weights_dtypes:
                    w = resolve_weight_dtype(w_name, model)
                    weights = stage_weights(
                        model, model.layers, first=True, last=True, pp=1, tp=tp, weights_dtype=w
                    ).weights_bytes_per_gpu
                    dep = Deployment(
                        model,
                        gpus[0],
                        Parallelism(tp, 1),
                        w,
                        kv,
                        EngineConfig(
                            max_model_len=int(lengths[-1]),
                            gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
                            block_size=None,
                            max_num_seqs=256,
                            max_num_batched_tokens=2048,
                        ),
                    )
                    try:
                        cost = step_cost(dep, stage_weights_bytes=weights)
                    except ServecapError:
                        continue
                    peak = np.array([g.dense_tflops(w.compute) * TFLOPS for g in gpus]) * eff.compute_efficiency_at(
                        w.compute
                    )
                    budget = total_mem * DEFAULT_GPU_MEMORY_UTILIZATION - weights - act_row - NON_TORCH_BYTES_PER_GPU
                    blocks = np.floor(np.maximum(budget, 0.0) / layout.page_bytes / layout.group_size)
                    blocks2 = blocks[:, None]
                    conc = blocks2 / bpr
                    batch = np.maximum(np.minimum(np.floor(conc), seqs[:, None]), 1.0)
                    ctx = lens[None, :] / 2.0
                    if cost.moe_layers:
                        touched = cost.num_experts * (1.0 - (1.0 - cost.experts_per_token / cost.num_experts) ** batch)
                        wread = cost.dense_weight_bytes + cost.expert_bytes_per_layer * cost.moe_layers * touched
                    else:
                        wread = cost.dense_weight_bytes + 0.0 * batch
                    win = np.minimum(ctx, cost.window_tokens) if cost.window_tokens else ctx
                    mem_b = (
                        wread
                        + batch * (cost.kv_bytes_per_token * ctx + cost.window_bytes_per_token * win)
                        + 2.0 * cost.state_bytes_per_seq * batch
                    )
                    flops = batch * (
                        cost.matmul_flops_per_token
                        + cost.expert_flops_per_token * (1.0 / cost.moe_gemm_efficiency_ratio - 1.0)
                        + cost.logits_flops_per_seq
                        + cost.attn_flops_per_pair * ctx
                        + cost.window_attn_flops_per_pair * win
                    )
                    act_s = batch * cost.activation_bytes_per_token / bw[:, None]
                    step = np.maximum(mem_b / bw[:, None], flops / peak[:, None]) + act_s + overhead_s[:, None]
                    if tp > 1:
                        link = np.array([(g.interconnect_gb_s or np.nan) * 1e9 for g in gpus])
                        per = 2.0 * (tp - 1) / tp * batch * cost.allreduce_bytes_per_token / link[:, None]
                        step = step + cost.allreduces * (per + eff.allreduce_latency_s)
                    labels.append((model.id, w.name, kv.name, tp))
                    blocks_out.append(np.broadcast_to(blocks2, conc.shape))
                    conc_out.append(conc)
                    step_out.append(step)
                    ok_out.append((budget[:, None] > 0) & (blocks2 >= bpr))
    return SweepResult(
        labels,
        [g.id for g in gpus],
        list(lengths),
        np.array(blocks_out),
        np.array(conc_out),
        np.array(step_out),
        np.array(ok_out),
    )
