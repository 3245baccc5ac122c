"""The share of the tensor peak that large GEMMs reach, per GPU, engine and dtype, from the kernel
timings NVIDIA measured and ships with AIConfigurator 0.12.0 (Apache-2.0), and the FP4/FP8 ratio
``specs/perf.py`` adopts (``FP4_TO_FP8_GEMM_EFFICIENCY_BY_ENGINE``). Run with the Python of the
environment holding the package (never servecap's):

    /tmp/aic-venv/bin/python benchmarks/gemm_efficiency.py

For every ``systems/data/<system>/gemm/<engine>/<version>/gemm_perf.parquet`` of H100, H200, B200
and A100 (SXM): the median over GEMMs with m, n, k >= 4,096 of ``2 m n k / latency / peak``,
the peak of the dtype from ``systems/<system>.yaml``.
"""

from __future__ import annotations

import glob
import os

import pyarrow.parquet as pq  # type: ignore[import-not-found]
import yaml  # type: ignore[import-untyped]
from aiconfigurator_core.sdk import perf_database  # type: ignore[import-not-found]

PEAK_KEY = {
    "bfloat16": "bfloat16_tc_flops",
    "fp8": "fp8_tc_flops",
    "fp8_block": "fp8_tc_flops",
    "nvfp4": "fp4_tc_flops",
}
SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm")


def main() -> None:
    base = os.path.join(os.path.dirname(perf_database.__file__), "..", "systems")
    medians: dict[tuple[str, str, str], float] = {}
    for path in sorted(glob.glob(os.path.join(base, "data", "*", "gemm", "*", "*", "gemm_perf.parquet"))):
        parts = path.split(os.sep)
        system, engine, version = parts[-5], parts[-3], parts[-2]
        if system not in SYSTEMS:
            continue
        with open(os.path.join(base, f"{system}.yaml"), encoding="utf-8") as f:
            spec = yaml.safe_load(f)
        peaks = spec.get("gpu", spec)
        table = pq.read_table(path).to_pandas()
        for dtype, key in PEAK_KEY.items():
            big = table[(table.gemm_dtype == dtype) & (table.m >= 4096) & (table.n >= 4096) & (table.k >= 4096)]
            if big.empty or key not in peaks:
                continue
            eff = (2.0 * big.m * big.n * big.k / (big.latency * 1e-3) / peaks[key]).median()
            medians[(system, engine, dtype)] = float(eff)
            print(f"{system:9} {engine:7} {version:11} {dtype:10} {len(big):4d} GEMMs  median {eff:.3f} of peak")
    print()
    for engine in ("vllm", "sglang", "trtllm"):
        fp4, fp8 = medians.get(("b200_sxm", engine, "nvfp4")), medians.get(("b200_sxm", engine, "fp8"))
        if fp4 and fp8:
            print(f"B200 {engine}: FP4 / FP8 = {fp4:.3f} / {fp8:.3f} = {fp4 / fp8:.3f}")


if __name__ == "__main__":
    main()
