"""Derive servecap's compact kernel-timing tables from the kernel timings NVIDIA measured and ships
with AIConfigurator 0.12.0 (``aiconfigurator-core`` 0.12.0, Apache-2.0), and write them as the
data module ``src/servecap/specs/kernel_timings.py`` (no I/O at run time, no dependency).

Run with a Python that has pyarrow and pandas, on the unpacked wheel's ``systems`` folder::

    pip download --no-deps aiconfigurator-core==0.12.0     # 81.7 MB wheel, 1,436 files
    unzip aiconfigurator_core-0.12.0-*.whl 'aiconfigurator_core/systems/*'
    python benchmarks/kernel_tables.py aiconfigurator_core/systems > src/servecap/specs/kernel_timings.py

What is kept (``latency`` is milliseconds in every table; every ratio is measured time over the
ideal time at the system file's peaks, ``systems/<system>.yaml``: ``mem_bw`` and the dtype's
``*_tc_flops``):

- GEMMs (``gemm/<engine>/<version>/gemm_perf.parquet``): for every ``m`` (tokens; powers of two
  and multiples of 512 up to 16,384), the least-squares line ``latency = fixed_s + ratio x ideal``
  over the collected ``(n, k)`` (n, k >= 1,024), ``ideal = max(((m k + k n) x in_bytes + 2 m n) /
  mem_bw, 2 m n k / flops)``, the fastest kernel per shape (what an engine's kernel selection picks);
- all-reduce (``comm/<engine>/<version>/custom_allreduce_perf.parquet``, the CUDA-graph kernel):
  seconds per message size in bytes (BF16 elements x 2) and GPU count;
- decode attention (``attention/<engine>/<version>/generation_attention_perf.parquet``, full
  attention, no window, 128-wide heads): per KV-head count (1, 2, 4, 8), for contexts 2, 8, 32, ... 131,072, for every (batch, context) the median
  over query-head counts of ``latency / (KV bytes read / mem_bw)``.
"""

from __future__ import annotations

import glob
import os
import sys

import numpy as np
import pyarrow.parquet as pq
import yaml

SYSTEMS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200-SXM", "b200_sxm": "B200"}
DTYPES = {
    "bfloat16": ("bf16", 2.0, "bfloat16_tc_flops"),
    "fp8": ("fp8", 1.0, "fp8_tc_flops"),
    "nvfp4": ("fp4", 0.5625, "fp4_tc_flops"),
}
ENGINES = {"vllm": "vllm", "trtllm": "trtllm", "sglang": "sglang"}
AR_KERNEL = {"vllm": "vLLM_custom_graph", "sglang": "SGLang_CustomAllReduce_graph", "trtllm": "TRTLLM"}


def _latest(paths: list[str]) -> str:
    def key(p: str) -> tuple[int, ...]:
        v = p.split(os.sep)[-2]
        out = []
        for part in v.replace("rc", ".").replace("post", ".").split("."):
            out.append(int(part) if part.isdigit() else 0)
        return tuple(out)

    return max(paths, key=key)


def _spec(base: str, system: str) -> dict[str, float]:
    with open(os.path.join(base, f"{system}.yaml"), encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    return dict(spec.get("gpu", spec))


def gemm(base: str) -> dict[tuple[str, str, str], tuple[str, list[tuple[int, float, float]]]]:
    out = {}
    for system, gpu in SYSTEMS.items():
        peaks = _spec(base, system)
        for engine in ENGINES:
            paths = glob.glob(os.path.join(base, "data", system, "gemm", engine, "*", "gemm_perf.parquet"))
            if not paths:
                continue
            path = _latest(paths)
            version = path.split(os.sep)[-2]
            t = pq.read_table(path).to_pandas()
            for aic_dtype, (dtype, in_bytes, key) in DTYPES.items():
                d = t[t.gemm_dtype == aic_dtype]
                if d.empty or key not in peaks:
                    continue
                d = d.groupby(["m", "n", "k"], as_index=False).latency.min()
                d = d[(d.n >= 1024) & (d.k >= 1024)]
                mem = ((d.m * d.k + d.k * d.n) * in_bytes + 2.0 * d.m * d.n) / peaks["mem_bw"]
                comp = 2.0 * d.m * d.n * d.k / peaks[key]
                d = d.assign(ideal=mem.where(mem > comp, comp), seconds=d.latency * 1e-3)
                rows = []
                for m, g in d.groupby("m"):
                    if m > 16384 or (m & (m - 1) and m % 512):
                        continue
                    # latency = fixed + ratio x ideal, least squares over the collected (n, k)
                    x, y = g.ideal.to_numpy(), g.seconds.to_numpy()
                    slope, fixed = np.polyfit(x, y, 1)
                    if fixed < 0.0:
                        fixed, slope = 0.0, float((x * y).sum() / (x * x).sum())
                    rows.append((int(m), float(f"{fixed:.4g}"), round(float(slope), 4)))
                out[(gpu, engine, dtype)] = (version, rows)
    return out


def allreduce(base: str) -> dict[tuple[str, str], tuple[str, dict[int, list[tuple[int, float]]]]]:
    out = {}
    for system, gpu in SYSTEMS.items():
        for engine, kernel in AR_KERNEL.items():
            paths = glob.glob(os.path.join(base, "data", system, "comm", engine, "*", "custom_allreduce_perf.parquet"))
            paths = [p for p in paths if kernel in set(pq.read_table(p).to_pandas().kernel_source)]
            if not paths:
                continue
            path = _latest(paths)
            t = pq.read_table(path).to_pandas()
            t = t[t.kernel_source == kernel]
            by_tp: dict[int, list[tuple[int, float]]] = {}
            for tp, g in t.groupby("num_gpus"):
                g = g.sort_values("message_size")
                by_tp[int(tp)] = [
                    (int(s) * 2, float(f"{lat * 1e-3:.4g}")) for s, lat in zip(g.message_size, g.latency, strict=True)
                ]
            out[(gpu, engine)] = (path.split(os.sep)[-2], by_tp)
    return out


def decode_attention(base: str) -> dict[tuple[str, str, str, int], tuple[str, list[tuple[int, int, float]]]]:
    out = {}
    for system, gpu in SYSTEMS.items():
        peaks = _spec(base, system)
        for engine in ENGINES:
            paths = glob.glob(
                os.path.join(base, "data", system, "attention", engine, "*", "generation_attention_perf.parquet")
            )
            if not paths:
                continue
            path = _latest(paths)
            t = pq.read_table(path).to_pandas()
            t = t[(t.window_size == 0) & (t.head_dim == 128) & (t.num_heads >= t.num_key_value_heads)]
            for kv_dtype, kv_bytes in (("bfloat16", 2.0), ("fp8", 1.0)):
                for kv_heads, d in t[t.kv_cache_dtype == kv_dtype].groupby("num_key_value_heads"):
                    if kv_heads not in (1, 2, 4, 8):
                        continue
                    d = d[((d.step + 1).isin([2**i for i in range(1, 18, 2)])) | (d.step + 1 == 2**17)]
                    ctx = d.step + 1
                    ideal = d.batch_size * ctx * 2.0 * kv_heads * 128 * kv_bytes / peaks["mem_bw"]
                    d = d.assign(ctx=ctx, ratio=d.latency * 1e-3 / ideal)
                    d = d.groupby(["batch_size", "ctx", "num_heads"], as_index=False).ratio.min()
                    rows = [
                        (int(b), int(c), round(float(g.ratio.median()), 4))
                        for (b, c), g in d.groupby(["batch_size", "ctx"])
                    ]
                    key = (gpu, engine, "bf16" if kv_dtype == "bfloat16" else "fp8", int(kv_heads))
                    out[key] = (path.split(os.sep)[-2], rows)
    return out


def main() -> None:
    base = sys.argv[1]
    g, a, att = gemm(base), allreduce(base), decode_attention(base)
    w = sys.stdout.write
    w('"""Kernel timings measured by NVIDIA and shipped with AIConfigurator 0.12.0 (``aiconfigurator-core``\n')
    w("0.12.0, Apache-2.0, ``aiconfigurator_core/systems/data/<system>/<op>/<engine>/<version>/``), reduced to\n")
    w("compact tables by ``benchmarks/kernel_tables.py`` (its docstring says how). Generated: do not edit.\n\n")
    w("- ``GEMM_FIT[(gpu, engine, dtype)] = (engine version, ((m, fixed_s, ratio), ...))``: a GEMM of ``m``\n")
    w("  tokens takes ``fixed_s + ratio x max(bytes / mem_bw, flops / peak)``;\n")
    w("- ``ALLREDUCE_S[(gpu, engine)] = (engine version, {gpus: ((message bytes, seconds), ...)})``;\n")
    w("- ``DECODE_ATTENTION_RATIO[(gpu, engine, kv_dtype, kv_heads)] = (engine version, ((batch, context, ratio),\n")
    w("  ...))``: measured time over ``KV bytes / mem_bw`` (128-wide heads, ``kv_heads`` per GPU).\n\n")
    w("The peaks the ratios are taken against (AIConfigurator's ``systems/<system>.yaml``) are the catalog's\n")
    w('(H100-SXM 3.35 TB/s, H200-SXM 4.8 TB/s, B200 8 TB/s; dense BF16 989 / 989 / 2,250 TFLOP/s).\n"""\n\n')
    w("# fmt: off\n\n")
    w("from __future__ import annotations\n\n")
    w('SOURCE = "NVIDIA AIConfigurator 0.12.0 (aiconfigurator-core, Apache-2.0): collected kernel timings"\n\n')
    w("GEMM_FIT: dict[tuple[str, str, str], tuple[str, tuple[tuple[int, float, float], ...]]] = {\n")
    for gk, (gv, grows) in sorted(g.items()):
        w(f"    {gk!r}: ({gv!r}, {tuple(grows)!r}),\n")
    w("}\n\n")
    w("ALLREDUCE_S: dict[tuple[str, str], tuple[str, dict[int, tuple[tuple[int, float], ...]]]] = {\n")
    for ak, (av, by_tp) in sorted(a.items()):
        w(f"    {ak!r}: ({av!r}, {{{', '.join(f'{tp}: {tuple(r)!r}' for tp, r in sorted(by_tp.items()))}}}),\n")
    w("}\n\n")
    w("DECODE_ATTENTION_RATIO: dict[tuple[str, str, str, int], tuple[str, tuple[tuple[int, int, float], ...]]] = {\n")
    for k, (v, rows) in sorted(att.items()):
        w(f"    {k!r}: ({v!r}, {tuple(rows)!r}),\n")
    w("}\n")


if __name__ == "__main__":
    main()
