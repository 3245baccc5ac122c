"""AIConfigurator's measured step times inside servecap's scheduler: an experiment on the corpus.

For every corpus row AIConfigurator 0.12.0 covers, its per-iteration estimate (``run_mixed``:
prefill tokens + decoding requests -> latency, from kernels measured on the GPU for the engine)
is sampled on a grid (``benchmarks/peer_aic_worker.py --samples``, in AIConfigurator's own
environment), servecap's roofline for the same deployment is fitted to those samples (bandwidth
efficiency, compute efficiency and per-step overhead, least squares of the log ratios,
Nelder-Mead), and the row is simulated with the fitted efficiencies — servecap's scheduler,
queue and percentiles on AIConfigurator's step times. The median |error| per metric and split is
printed beside the roofline's and AIConfigurator's own on the same values.

    PYTHONPATH=src .venv/bin/python benchmarks/peer_step_source.py --aic-python /tmp/aic-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

from servecap.core.plan import plan
from servecap.core.roofline import BatchShape, StepCost, decode_batch, prefill_batch
from servecap.specs.perf import Efficiency, RequestShape
from servecap.validation.corpus import CorpusRow, load_corpus
from servecap.validation.fit import nelder_mead
from servecap.validation.predict import Adjustments, _deployment, predict_row

sys.path.insert(0, str(Path(__file__).parent))
from peer_accuracy import WORKER, _row_question


def _shape(ctx: int, decodes: int, mean_context: float, window: int | None) -> BatchShape:
    parts = [prefill_batch(ctx, window)]
    if decodes:
        parts.append(decode_batch(decodes, mean_context, window))
    return BatchShape(
        num_tokens=sum(p.num_tokens for p in parts),
        num_seqs=sum(p.num_seqs for p in parts),
        kv_tokens=sum(p.kv_tokens for p in parts),
        window_kv_tokens=sum(p.window_kv_tokens for p in parts),
        attn_pairs=sum(p.attn_pairs for p in parts),
        window_attn_pairs=sum(p.window_attn_pairs for p in parts),
        prompt_tokens=ctx,
    )


def fit_efficiency(cost: StepCost, samples: list[dict], mean_context: float) -> Efficiency:
    """Bandwidth, compute and per-step overhead minimising Σ ln(roofline / AIConfigurator)²."""
    shapes = [(_shape(s["context_tokens"], s["num_decodes"], mean_context, cost.window_tokens), s) for s in samples]

    def eff(x: np.ndarray) -> Efficiency:
        bw, comp, ovh = (float(v) for v in np.exp(np.clip(x, np.log([0.05, 0.05, 1e-5]), np.log([1.0, 1.0, 0.05]))))
        return Efficiency(bandwidth_efficiency=bw, compute_efficiency=comp, step_overhead_s=ovh)

    def objective(x: np.ndarray) -> float:
        e = eff(x)
        return sum(math.log(cost.step_time(b, e).total_s / s["latency_s"]) ** 2 for b, s in shapes)

    x, _, _ = nelder_mead(objective, np.log([0.7, 0.5, 0.002]), max_evaluations=200)
    return eff(x)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--aic-python", required=True)
    ap.add_argument(
        "--write-cache",
        action="store_true",
        help="write the fitted coefficients to src/servecap/validation/aic_steps.json "
        "(servecap validate --step-model aiconfigurator|auto reads them)",
    )
    args = ap.parse_args()
    cache: dict[str, dict[str, object]] = {}
    rows: list[CorpusRow] = load_corpus()
    questions = [_row_question(r) for r in rows]
    proc = subprocess.run(
        [args.aic_python, str(WORKER), "--samples"],
        input=json.dumps(questions),
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if proc.returncode != 0:
        sys.exit(f"AIConfigurator worker failed: {proc.stderr.strip().splitlines()[-1:]}")
    samples = json.loads(proc.stdout)
    proc = subprocess.run(
        [args.aic_python, str(WORKER)], input=json.dumps(questions), capture_output=True, text=True, check=False
    )
    aic = json.loads(proc.stdout) if proc.returncode == 0 else {}
    errs: dict[tuple[str, str], dict[str, list[float]]] = {}
    for crow in rows:
        got = samples.get(crow.full_id, {})
        if "samples" not in got:
            continue
        wl = crow.row.workload
        pl = plan(_deployment(crow, None), request=RequestShape(wl.prompt_tokens, wl.output_tokens))
        fitted = fit_efficiency(pl.step, got["samples"], wl.prompt_tokens + wl.output_tokens / 2.0)
        cache[crow.full_id] = {
            "bandwidth_efficiency": round(fitted.bandwidth_efficiency or 0.0, 5),
            "compute_efficiency": round(fitted.compute_efficiency or 0.0, 5),
            "step_overhead_s": round(fitted.step_overhead_on(""), 7),
            "source": got["source"],
            "samples": len(got["samples"]),
        }
        try:
            base = predict_row(crow)
            seam = predict_row(crow, Adjustments(efficiency=fitted))
        except Exception as err:
            print(f"{crow.full_id}: {err}")
            continue
        answer = aic.get(crow.full_id, {})
        for m in crow.row.measured:
            key = m.key
            if key not in base.values or key not in seam.values:
                continue
            akey = key if key.endswith(".total") else key.split(".")[0]
            group = errs.setdefault((crow.split, m.family), {"roofline": [], "seam": [], "aic": []})
            group["roofline"].append(base.values[key] / m.value_si - 1.0)
            group["seam"].append(seam.values[key] / m.value_si - 1.0)
            if isinstance(answer.get(akey), float):
                group["aic"].append(answer[akey] / m.value_si - 1.0)
        print(
            f"{crow.full_id}: {got['source']}: bandwidth {fitted.bandwidth_efficiency:.3f}, compute "
            f"{fitted.compute_efficiency:.3f}, overhead {fitted.step_overhead_on('') * 1e3:.2f} ms",
            flush=True,
        )
    if args.write_cache:
        from servecap.validation.step_source import CACHE_SCHEMA, cache_path

        doc = {
            "schema": CACHE_SCHEMA,
            "about": "roofline coefficients fitted to AIConfigurator 0.12.0's per-step estimates (run_mixed) "
            "for each corpus row it covers; written by benchmarks/peer_step_source.py --write-cache",
            "rows": cache,
        }
        cache_path().write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(f"{len(cache)} rows -> {cache_path()}")
    print("\n| split | metric | n | roofline | AIConfigurator steps in servecap | AIConfigurator alone (n) |")
    print("|---|---|---:|---:|---:|---:|")
    for (split, fam), g in sorted(errs.items()):

        def med(v: list[float]) -> str:
            return f"{statistics.median(abs(e) for e in v):.1%}" if v else "–"

        print(
            f"| {split} | {fam} | {len(g['roofline'])} | {med(g['roofline'])} | {med(g['seam'])} | "
            f"{med(g['aic'])} ({len(g['aic'])}) |"
        )


if __name__ == "__main__":
    main()
