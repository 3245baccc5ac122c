"""Evaluate the whole catalog cross product and print configurations per second.

models x GPUs x weight dtypes (bf16, fp8, int4, nvfp4) x KV dtypes (auto, fp8) x TP 1/2/4/8 x
six context lengths, vectorised (servecap.app.sweep), with the scalar `plan()` rate measured in
the same process as the reference. Run: `python benchmarks/plan_sweep.py`.
"""

from __future__ import annotations

import contextlib
import time

from servecap.app.sweep import sweep
from servecap.catalog import gpu_catalog
from servecap.catalog.models import load_catalog_model, model_catalog
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.errors import ServecapError


def main() -> None:
    models = [load_catalog_model(r.id) for r in model_catalog()]
    gpus = [g for g in gpu_catalog() if g.bf16_dense_tflops is not None]
    sweep(models[:2], gpus[:2])  # warm-up
    t0 = time.perf_counter()
    result = sweep(models, gpus)
    sweep_s = time.perf_counter() - t0
    n = result.num_configs
    feasible = int(result.feasible.sum())
    print(
        f"sweep: {len(models)} models x {len(gpus)} GPUs x 4 weight dtypes x 2 KV dtypes x TP 1/2/4/8 "
        f"x 6 lengths = {n:,} configurations ({feasible:,} feasible)"
    )
    print(f"sweep: {sweep_s:.3f} s wall, {n / sweep_s:,.0f} configurations/s")

    # reference: the scalar plan() on a sample, same process
    t0 = time.perf_counter()
    count = 0
    for model in models[:12]:
        for gpu in gpus[:8]:
            with contextlib.suppress(ServecapError):
                plan(build_deployment(model, gpu, weights_dtype="fp8", max_model_len=8192))
            count += 1
    scalar_s = time.perf_counter() - t0
    print(f"scalar plan(): {count} plans in {scalar_s:.3f} s, {count / scalar_s:,.0f} plans/s")
    print(f"ratio (vectorised configs/s over scalar plans/s): {(n / sweep_s) / (count / scalar_s):,.0f}x")


if __name__ == "__main__":
    main()
