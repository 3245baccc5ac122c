"""How much of the tensor peak an MoE layer's grouped expert GEMMs reach, relative to a dense GEMM of
the same GPU, engine and dtype, from the kernel timings NVIDIA measured and ships with AIConfigurator
0.12.0 (Apache-2.0), and the ratio ``specs/perf.py`` adopts (``MOE_TO_DENSE_GEMM_EFFICIENCY_BY_ENGINE``).
Run with the Python of the environment holding the package (never servecap's):

    /tmp/aic-venv/bin/python benchmarks/moe_gemm_efficiency.py

For the newest ``systems/data/<system>/moe/<engine>/<version>/moe_perf.parquet`` measuring these shapes, of H100, H200 and
B200 (SXM): the expert layers of the corpus's MoE models' shape (128 experts, 8 per token, hidden
2,048 or 4,096: Qwen3-30B-A3B and Qwen3-235B-A22B), balanced routing, no expert or tensor
parallelism, at least 4,096 tokens (the batches where an MoE step is compute-bound), each kernel
the engine ships: ``2 x tokens x topk x 3 x hidden x inter / latency / peak`` (three matmuls per
gated expert), the median per (system, engine, dtype, kernel), divided by the median large dense
GEMM's share of the same peak (``benchmarks/gemm_efficiency.py``'s rule: m, n, k >= 4,096) for the
same system, engine and dtype. The ratio per engine is the median over its (system, dtype, kernel)
groups.
"""

from __future__ import annotations

import os
import statistics

import pandas as pd  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-not-found]
import yaml  # type: ignore[import-untyped]
from aiconfigurator_core.sdk import perf_database  # type: ignore[import-not-found]

PEAK_KEY = {
    "bfloat16": "bfloat16_tc_flops",
    "fp8": "fp8_tc_flops",
    "fp8_block": "fp8_tc_flops",
    "nvfp4": "fp4_tc_flops",
}
SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm")
ENGINES = ("vllm", "sglang", "trtllm")


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int("".join(ch for ch in p if ch.isdigit()) or 0) for p in v.replace("rc", ".").split("."))


def _versions(folder: str, name: str) -> list[str]:
    """The version folders under ``folder`` holding ``name``, newest first."""
    versions = os.listdir(folder) if os.path.isdir(folder) else []
    found = [os.path.join(folder, v) for v in versions if os.path.isfile(os.path.join(folder, v, name))]
    return sorted(found, key=lambda f: _version_key(os.path.basename(f)), reverse=True)


def _moe_rows(folder: str) -> pd.DataFrame:
    t = pq.read_table(os.path.join(folder, "moe_perf.parquet")).to_pandas()
    return t[
        (t.num_tokens >= 4096)
        & (t.moe_tp_size == 1)
        & (t.moe_ep_size == 1)
        & (t.distribution == "balanced")
        & (t.num_experts == 128)
        & (t.topk == 8)
        & (t.hidden_size.isin([2048, 4096]))
    ]


def _dense(base: str, system: str, engine: str, peaks: dict[str, float]) -> dict[str, float]:
    folders = _versions(os.path.join(base, "data", system, "gemm", engine), "gemm_perf.parquet")
    if not folders:
        return {}
    table = pq.read_table(os.path.join(folders[0], "gemm_perf.parquet")).to_pandas()
    out = {}
    for dtype, key in PEAK_KEY.items():
        big = table[(table.gemm_dtype == dtype) & (table.m >= 4096) & (table.n >= 4096) & (table.k >= 4096)]
        if not big.empty and key in peaks:
            out[dtype] = float((2.0 * big.m * big.n * big.k / (big.latency * 1e-3) / peaks[key]).median())
    return out


def main() -> None:
    base = os.path.join(os.path.dirname(perf_database.__file__), "..", "systems")
    ratios: dict[str, list[float]] = {e: [] for e in ENGINES}
    for system in SYSTEMS:
        with open(os.path.join(base, f"{system}.yaml"), encoding="utf-8") as f:
            spec = yaml.safe_load(f)
        peaks = spec.get("gpu", spec)
        for engine in ENGINES:
            dense = _dense(base, system, engine, peaks)
            # the newest version measuring the corpus's expert shapes
            found = [
                (f, _moe_rows(f))
                for f in _versions(os.path.join(base, "data", system, "moe", engine), "moe_perf.parquet")
            ]
            found = [(f, t) for f, t in found if not t.empty]
            if not found or not dense:
                continue
            folder, t = found[0]
            for (dtype, kernel), g in t.groupby(["moe_dtype", "kernel_source"]):
                if dtype not in dense:
                    continue
                flops = 2.0 * g.num_tokens * g.topk * 3 * g.hidden_size * g.inter_size
                moe = float((flops / (g.latency * 1e-3) / peaks[PEAK_KEY[dtype]]).median())
                ratio = moe / dense[dtype]
                ratios[engine].append(ratio)
                print(
                    f"{system:9} {engine:7} {os.path.basename(folder):10} {dtype:10} {kernel[:44]:44} "
                    f"{len(g):3d} shapes  MoE {moe:.3f} / dense {dense[dtype]:.3f} = {ratio:.3f}"
                )
    print()
    for engine, rs in ratios.items():
        if rs:
            print(f"{engine}: MoE / dense GEMM efficiency, median of {len(rs)} = {statistics.median(rs):.3f}")


if __name__ == "__main__":
    main()
