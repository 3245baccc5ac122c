"""Derive servecap's MoE and MLA kernel tables from the kernel timings NVIDIA measured and ships with
AIConfigurator 0.12.0 (``aiconfigurator-core`` 0.12.0, Apache-2.0), and write them as the data module
``src/servecap/specs/moe_mla_timings.py`` (no I/O at run time, no dependency). Same inputs as
``benchmarks/kernel_tables.py``::

    python benchmarks/kernel_tables_moe_mla.py aiconfigurator_core/systems > src/servecap/specs/moe_mla_timings.py

What is kept (``latency`` is milliseconds in every table):

- MoE grouped GEMMs (``moe/<engine>/<version>/moe_perf.parquet``, per dtype the newest release
  with rows for it; expert parallelism 1, the
  ``power_law_1.01`` token distribution AIConfigurator's default ``power_law`` workload uses, the
  fastest kernel per shape): for every row, ``ratio = latency / ideal`` with
  ``ideal = max(touched x 3 h s x w / mem_bw, 2 T k x 3 h s / flops)``, ``T`` tokens, ``k`` experts
  per token, ``E`` experts, ``touched = E (1 - (1 - k/E)^T)`` experts read, ``h`` hidden,
  ``s = inter / moe_tp`` the expert's slice on one GPU, ``w`` bytes per weight; the median ratio per
  cell of ``(mean tokens per expert T k / E, slice s)``, both rounded to a power of two. The narrow
  slices of tensor-parallel experts (DeepSeek-V3 at TP8: 2,048 / 8 = 256) and the few tokens per
  expert of a small batch are where the grouped GEMM is far from its roofline (ratios 2-14);
- MLA module (``mla/<engine>/<version>/mla_{context,generation}_module_perf.parquet``, DeepSeek-V3's
  MLA: the q/kv down- and up-projections, the attention and ``o_proj`` of one layer): seconds per
  (heads per GPU, batch, prompt length) for prefill and per (heads per GPU, batch, context) for
  decode (contexts 2, 8, 32, ... 131,072), the fastest kernel per cell, per KV-cache dtype and GEMM
  dtype (block-FP8 GEMMs, FP8 or BF16 KV cache), at 8, 16, 32 and 64 heads per GPU,
  prompt lengths at powers of two.
"""

from __future__ import annotations

import glob
import os
import sys

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(__file__))
from kernel_tables import ENGINES, SYSTEMS, _latest, _spec

MOE_DTYPES = {
    "fp8_block": ("fp8", 1.0, "fp8_tc_flops"),
    "bfloat16": ("bf16", 2.0, "bfloat16_tc_flops"),
    "nvfp4": ("fp4", 0.5625, "fp4_tc_flops"),
}
GEMM_TYPES = {"fp8_block": "fp8", "bfloat16": "bf16"}
HEADS = (8, 16, 32, 64)  # 128 heads (DeepSeek-V3) at TP 16 ... 2, 64 (Kimi K2) at TP 8 ... 1
GEN_CONTEXTS = tuple(2**i for i in range(1, 18, 2))  # 2, 8, 32, ... 131,072


def _version_key(path: str) -> tuple[int, ...]:
    v = path.split(os.sep)[-2]
    return tuple(int(p) if p.isdigit() else 0 for p in v.replace("rc", ".").replace("post", ".").split("."))


def _pow2(x: np.ndarray) -> np.ndarray:
    return 2.0 ** np.round(np.log2(x))


def moe(base: str) -> dict[tuple[str, str, str], tuple[str, list[tuple[float, int, float]]]]:
    out = {}
    for system, gpu in SYSTEMS.items():
        peaks = _spec(base, system)
        for engine in ENGINES:
            paths = glob.glob(os.path.join(base, "data", system, "moe", engine, "*", "moe_perf.parquet"))
            if not paths:
                continue
            for aic, (dtype, wb, key) in MOE_DTYPES.items():
                # the newest release with rows of this dtype at expert parallelism 1
                path, d = "", None
                for candidate in sorted(paths, key=_version_key, reverse=True):
                    t = pq.read_table(candidate).to_pandas()
                    t = t[(t.moe_ep_size == 1) & (t.distribution == "power_law_1.01")]
                    d = t[t.moe_dtype == aic]
                    if d.empty and aic == "fp8_block":
                        d = t[t.moe_dtype == "fp8"]  # per-tensor FP8 where no block-scaled rows exist
                    if not d.empty:
                        path = candidate
                        break
                if d is None or d.empty or key not in peaks:
                    continue
                cols = ["num_tokens", "hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size"]
                d = d.groupby(cols, as_index=False).latency.min()
                n, h, i, e, k, tp = (d[c].to_numpy(dtype=float) for c in cols)
                s = i / tp
                touched = e * (1.0 - (1.0 - k / e) ** n)
                w = 3.0 * h * s
                ideal = np.maximum(touched * w * wb / peaks["mem_bw"], 2.0 * n * k * w / peaks[key])
                d = d.assign(ratio=d.latency * 1e-3 / ideal, me=_pow2(np.maximum(n * k / e, 1 / 64)), sl=_pow2(s))
                rows = [
                    (float(me), int(sl), round(float(g.ratio.median()), 3))
                    for (me, sl), g in d.groupby(["me", "sl"])
                    if 64 <= sl <= 4096
                ]
                out[(gpu, engine, dtype)] = (path.split(os.sep)[-2], rows)
    return out


def mla(base: str, phase: str) -> dict[tuple[str, str, str, str], tuple[str, dict[int, list[tuple[int, int, float]]]]]:
    out = {}
    col = "isl" if phase == "context" else "step"
    for system, gpu in SYSTEMS.items():
        for engine in ENGINES:
            paths = glob.glob(
                os.path.join(base, "data", system, "mla", engine, "*", f"mla_{phase}_module_perf.parquet")
            )
            if not paths:
                continue
            path = _latest(paths)
            t = pq.read_table(path).to_pandas()
            t = t[(t.model == "deepseek-ai/DeepSeek-V3") & t.num_heads.isin(HEADS)]
            # decode at the kept contexts, prefill at prompt lengths that are powers of two
            t = t[t.step.isin(GEN_CONTEXTS)] if phase == "generation" else t[(t.isl & (t.isl - 1)) == 0]
            for (kv, gt), d in t.groupby(["kv_cache_dtype", "gemm_type"]):
                if gt != "fp8_block":  # DeepSeek-V3 and Kimi K2 ship block-FP8 weights
                    continue
                d = d.groupby(["num_heads", "batch_size", col], as_index=False).latency.min()
                by_heads = {
                    int(hh): [
                        (int(b), int(c), float(f"{lat * 1e-3:.4g}"))
                        for b, c, lat in zip(g.batch_size, g[col], g.latency, strict=True)
                    ]
                    for hh, g in d.groupby("num_heads")
                }
                kvd = "fp8" if kv == "fp8" else "bf16"
                out[(gpu, engine, kvd, GEMM_TYPES[gt])] = (path.split(os.sep)[-2], by_heads)
    return out


def main() -> None:
    base = sys.argv[1]
    m, ctx, gen = moe(base), mla(base, "context"), mla(base, "generation")
    w = sys.stdout.write
    w('"""MoE and MLA kernel timings measured by NVIDIA and shipped with AIConfigurator 0.12.0\n')
    w("(``aiconfigurator-core`` 0.12.0, Apache-2.0), reduced by ``benchmarks/kernel_tables_moe_mla.py`` (its\n")
    w("docstring says how). Generated: do not edit.\n\n")
    w("- ``MOE_RATIO[(gpu, engine, dtype)] = (engine version, ((tokens per expert, slice, ratio), ...))``: a\n")
    w("  routed-expert grouped GEMM takes ``ratio x max(touched expert bytes / mem_bw, flops / peak)``;\n")
    w("  ``tokens per expert`` = tokens x top-k / experts, ``slice`` = the expert's intermediate width per GPU;\n")
    w("- ``MLA_CONTEXT_S`` / ``MLA_GENERATION_S[(gpu, engine, kv dtype, gemm dtype)] = (engine version,\n")
    w("  {heads per GPU: ((batch, prompt length or context, seconds), ...)})``: one DeepSeek-V3 MLA layer.\n")
    w('"""\n\n# fmt: off\n\nfrom __future__ import annotations\n\n')
    w("MOE_RATIO: dict[tuple[str, str, str], tuple[str, tuple[tuple[float, int, float], ...]]] = {\n")
    for k, (v, rows) in sorted(m.items()):
        w(f"    {k!r}: ({v!r}, {tuple(rows)!r}),\n")
    w("}\n\n")
    for i, (name, tab) in enumerate((("MLA_CONTEXT_S", ctx), ("MLA_GENERATION_S", gen))):
        w(f"{name}: dict[tuple[str, str, str, str], tuple[str, dict[int, tuple[tuple[int, int, float], ...]]]] = {{\n")
        for k, (v, by_heads) in sorted(tab.items()):
            w(f"    {k!r}: ({v!r}, {{{', '.join(f'{hh}: {tuple(r)!r}' for hh, r in sorted(by_heads.items()))}}}),\n")
        w("}\n\n" if i == 0 else "}\n")


if __name__ == "__main__":
    main()
