"""First-party timings of a decoder's BF16 weight matmuls on bare GPUs (``benchmarks/gpu_ceilings.py
--measure``; docs/validation.md, "The GPU's own ceilings"): Llama-3.1-8B's 129 matmuls (32 layers
of fused QKV 4096x6144, O 4096x4096, gate+up 4096x28672, down 14336x4096, and the 4096x128256 LM
head; ``torch.matmul``, i.e. cuBLAS, the kernel vLLM's unquantized linear layers call), chained in
one CUDA graph, median of the replays, for ``m`` tokens.

- H100-SXM: NVIDIA H100 80GB HBM3, driver 580.159.04, PyTorch 2.11.0+cu130
  (``benchmarks/data/gpu_ceilings_h100.json``);
- H200-SXM: NVIDIA H200 143,771 MiB, same driver and PyTorch (``benchmarks/data/gpu_ceilings_h200.json``).

Seconds per chain, by tokens ``m``.
"""

from __future__ import annotations

CHAIN_SHAPES: tuple[tuple[int, int, int], ...] = (
    (4096, 6144, 32),  # (k, n, count): fused QKV
    (4096, 4096, 32),  # O
    (4096, 28672, 32),  # gate + up
    (14336, 4096, 32),  # down
    (4096, 128256, 1),  # LM head
)
"""The chain's matmuls as ``(k, n, count)``: ``m x k`` activations times ``k x n`` BF16 weights."""

CHAIN_SOURCE = "first-party: Llama-3.1-8B BF16 matmul chain, benchmarks/data/gpu_ceilings_{gpu}.json"

CHAIN_S: dict[str, tuple[tuple[int, float], ...]] = {
    "H100-SXM": (
        (1, 0.005421), (2, 0.005442), (4, 0.005428), (8, 0.00556), (16, 0.005569), (32, 0.005533),
        (64, 0.005593), (128, 0.006071), (256, 0.007723), (512, 0.011704), (1024, 0.023513),
        (2048, 0.045207), (4096, 0.089579), (8192, 0.180568),
    ),
    "H200-SXM": (
        (1, 0.003949), (2, 0.003958), (4, 0.003972), (8, 0.003988), (16, 0.004026), (32, 0.004108),
        (64, 0.004127), (128, 0.005703), (256, 0.006895), (512, 0.012384), (1024, 0.023568),
        (2048, 0.045483), (4096, 0.091672), (8192, 0.183818),
    ),
}  # fmt: skip
