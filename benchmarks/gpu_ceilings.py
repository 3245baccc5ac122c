"""What a bare GPU achieves on a decoder's weight matmuls, next to what servecap's roofline assumes.

A first-party check of the step-time model's hardware terms (docs/validation.md, "The GPU's own
ceilings"). Two steps, because the GPU machine need not have servecap installed:

1. ``--measure OUT.json`` (needs PyTorch with a CUDA GPU): allocates the linear-layer weights of
   Llama-3.1-8B in BF16 (32 layers of fused QKV 4096x6144, O 4096x4096, gate+up 4096x28672 and
   down 14336x4096, and the 4096x128256 LM head: 7.50e9 parameters, 15.0 GB, random values —
   timing does not depend on them), and times the chain of all 129 matmuls for a batch of
   ``b`` tokens, b = 1 ... 8192, captured in one CUDA graph (as vLLM replays its decode steps),
   by CUDA events over repeated replays after warm-up. It writes the times with the GPU's name.
2. ``--compare OUT.json`` (servecap): for the same GPU from the catalog, prints per batch the
   measured time, the achieved weight bandwidth and matmul FLOP/s as fractions of the spec
   sheet's, and servecap's prediction of the same work — ``max(weight bytes / (HBM bandwidth x
   bandwidth efficiency), matmul FLOPs / (peak x compute efficiency))`` with the default
   efficiencies (no per-step overhead: a bare chain of matmuls has no scheduler).

    python3 benchmarks/gpu_ceilings.py --measure gpu.json          # on the GPU machine
    .venv/bin/python benchmarks/gpu_ceilings.py --compare gpu.json --gpu H100
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HIDDEN, Q_HEADS, KV_HEADS, HEAD_DIM, INTER, LAYERS, VOCAB = 4096, 32, 8, 128, 14336, 32, 128256
SHAPES = (  # (in, out) of each layer's matmuls, fused as vLLM runs them
    (HIDDEN, (Q_HEADS + 2 * KV_HEADS) * HEAD_DIM),
    (Q_HEADS * HEAD_DIM, HIDDEN),
    (HIDDEN, 2 * INTER),
    (INTER, HIDDEN),
)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def matmul_params() -> int:
    return LAYERS * sum(i * o for i, o in SHAPES) + HIDDEN * VOCAB


def measure(out: Path, reps: int) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("error: --measure needs a CUDA GPU (torch.cuda.is_available() is False)")
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    weights = [
        [torch.randn(i, o, device=dev, dtype=torch.bfloat16, generator=gen) * 0.02 for i, o in SHAPES]
        for _ in range(LAYERS)
    ]
    head = torch.randn(HIDDEN, VOCAB, device=dev, dtype=torch.bfloat16, generator=gen) * 0.02

    def chain(x: Any, mid: Any) -> Any:
        for qkv, o, gate_up, down in weights:
            torch.matmul(x, qkv)
            torch.matmul(x[:, : Q_HEADS * HEAD_DIM], o)
            torch.matmul(x, gate_up)
            torch.matmul(mid, down)
        return torch.matmul(x, head)

    rows = []
    for b in BATCHES:
        x = torch.randn(b, HIDDEN, device=dev, dtype=torch.bfloat16, generator=gen)
        mid = torch.randn(b, INTER, device=dev, dtype=torch.bfloat16, generator=gen)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                chain(x, mid)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            chain(x, mid)
        for _ in range(3):
            graph.replay()
        n = reps if b <= 512 else max(3, reps // 4)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(n):
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        times.sort()
        rows.append({"batch": b, "median_s": times[len(times) // 2], "min_s": times[0], "replays": n})
        print(f"b={b:5d}: median {times[len(times) // 2] * 1e3:8.3f} ms over {n} replays", flush=True)
        del graph
    result = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "params": matmul_params(),
        "rows": rows,
    }
    out.write_text(json.dumps(result, indent=1))
    return result


def compare(path: Path, gpu_name: str) -> None:
    from servecap.catalog import lookup_gpu
    from servecap.specs.gpu import gpu_family
    from servecap.specs.perf import Efficiency

    data = json.loads(path.read_text())
    gpu = lookup_gpu(gpu_name)
    eff = Efficiency()
    bw_eff = eff.bandwidth_efficiency_on(gpu_family(gpu.id))
    c_eff = eff.compute_efficiency_at("bf16")
    params = int(data["params"])
    weight_bytes = 2.0 * params
    hbm = gpu.hbm_bandwidth_tb_s * 1e12
    peak = gpu.bf16_dense_tflops * 1e12
    print(
        f"{data['gpu']} (torch {data['torch']}, CUDA {data['cuda']}) against the catalog's {gpu.id}: "
        f"{gpu.hbm_bandwidth_tb_s} TB/s, {gpu.bf16_dense_tflops:.0f} dense BF16 TFLOP/s; "
        f"Llama-3.1-8B matmuls, {params / 1e9:.2f}e9 parameters, {weight_bytes / 1e9:.1f} GB"
    )
    print(f"servecap defaults: bandwidth efficiency {bw_eff:.3f} ({gpu_family(gpu.id)}), BF16 compute {c_eff:.3f}")
    print(f"{'batch':>6} {'measured ms':>12} {'weight B/s':>11} {'FLOP/s':>8} {'servecap ms':>12} {'error':>7}")
    for row in data["rows"]:
        b, t = int(row["batch"]), float(row["median_s"])
        flops = 2.0 * params * b
        predicted = max(weight_bytes / (hbm * bw_eff), flops / (peak * c_eff))
        print(
            f"{b:>6} {t * 1e3:>12.3f} {weight_bytes / t / hbm:>10.1%} {flops / t / peak:>8.1%} "
            f"{predicted * 1e3:>12.3f} {predicted / t - 1:>+7.1%}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--measure", type=Path, metavar="OUT.json", help="time the matmuls on this machine's GPU")
    group.add_argument("--compare", type=Path, metavar="OUT.json", help="compare a measurement with servecap")
    ap.add_argument("--gpu", default="H100", help="catalog GPU to compare against (--compare)")
    ap.add_argument("--reps", type=int, default=50, help="timed CUDA-graph replays per batch (--measure)")
    args = ap.parse_args()
    if args.measure is not None:
        measure(args.measure, args.reps)
    else:
        if not args.compare.is_file():
            sys.exit(f"error: --compare={str(args.compare)!r}: no such file")
        compare(args.compare, args.gpu)


if __name__ == "__main__":
    main()
