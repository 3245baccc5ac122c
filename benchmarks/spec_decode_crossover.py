"""The batch at which speculative decoding stops paying, by simulation: one model and GPU, closed
loops of C users with no think time (a batch of C), output tokens/s with and without EAGLE-3
(k = 3, the published acceptance and its +-5% spread), and the C where the ratio crosses 1.

    PYTHONPATH=src .venv/bin/python benchmarks/spec_decode_crossover.py [--model meta-llama/Llama-3.1-8B]
        [--gpu H100] [--method eagle3] [--requests-per-user 3]

Published beside it (docs/validation.md): the EAGLE-3 paper (arXiv:2503.01840) measures the
gain falling with batch in SGLang on one H100 (LLaMA-3.1-8B: 2.36x at batch 1, 1.38x at batch
64); GPUStack's Qwen3-8B H100 table, 2.7x at batch 1 to 1.6x at batch 8.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from dataclasses import replace

import numpy as np

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.core.spec_decode import spec_config_from_flags
from servecap.sim import engine_setup_from_plan, simulate
from servecap.specs import RequestShape
from servecap.specs.deployment import SpecDecodeConfig
from servecap.workload import workload_from_flags
from servecap.workload.spec_parts import FixedDist

BATCHES = (1, 4, 16, 64, 128, 256, 512, 1024)


def _tok_s(setup: object, users: int, per_user: int, prompt: int, output: int) -> float:
    wl = workload_from_flags(
        users=users, think_time_s=0.0, prompt_tokens=prompt, output_tokens=output, num_requests=users * per_user
    )
    assert wl.users is not None  # one turn a conversation: every request the same shape
    wl = wl.model_copy(update={"users": wl.users.model_copy(update={"turns": FixedDist(value=1)})})
    res = simulate(setup, wl, np.random.default_rng(0))  # type: ignore[arg-type]
    return res.summary.output_tokens_per_s


def crossover(ratios: list[tuple[int, float]]) -> float | None:
    """The batch where the ratio crosses 1, log-interpolated between the bracketing batches."""
    for (b0, r0), (b1, r1) in itertools.pairwise(ratios):
        if r0 >= 1.0 > r1:
            f = (r0 - 1.0) / (r0 - r1)
            return math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0)))
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="meta-llama/Llama-3.1-8B")
    ap.add_argument("--gpu", default="H100")
    ap.add_argument("--method", default="eagle3")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--output-tokens", type=int, default=256)
    ap.add_argument("--requests-per-user", type=int, default=3)
    args = ap.parse_args()
    model = resolve_model(args.model)
    dep = build_deployment(model, lookup_gpu(args.gpu), max_model_len=4096)
    req = RequestShape(args.prompt_tokens, args.output_tokens)
    spec = spec_config_from_flags(model, args.method, None, None, None)
    variants = {"mid": spec.acceptance}
    if spec.acceptance_low is not None and spec.acceptance_high is not None:
        variants["low"], variants["high"] = spec.acceptance_low, spec.acceptance_high
    base_setup = engine_setup_from_plan(plan(dep, request=req))
    setups = {
        name: engine_setup_from_plan(
            plan(replace(dep, speculative=SpecDecodeConfig(spec.method, spec.num_speculative_tokens, acc)), request=req)
        )
        for name, acc in variants.items()
    }
    print(f"{args.model} on {args.gpu}, {spec.source}")
    print(f"{'batch':>6} {'base tok/s':>11} " + " ".join(f"{n + ' x':>8}" for n in variants))
    ratios: dict[str, list[tuple[int, float]]] = {n: [] for n in variants}
    t0 = time.perf_counter()
    for b in BATCHES:
        base = _tok_s(base_setup, b, args.requests_per_user, args.prompt_tokens, args.output_tokens)
        row = []
        for name, setup in setups.items():
            r = _tok_s(setup, b, args.requests_per_user, args.prompt_tokens, args.output_tokens) / base
            ratios[name].append((b, r))
            row.append(f"{r:8.2f}")
        print(f"{b:>6} {base:>11.0f} " + " ".join(row))
    for name in variants:
        c = crossover(ratios[name])
        print(f"crossover ({name} acceptance): " + (f"batch {c:.0f}" if c else "none in the range"))
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
