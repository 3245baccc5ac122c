"""servecap and NVIDIA's AIConfigurator side by side on the same corpus rows.

servecap predicts every corpus row as ``servecap validate`` does; AIConfigurator (0.12.0, in its
own environment: ``python3 -m venv /tmp/aic-venv && /tmp/aic-venv/bin/pip install
aiconfigurator==0.12.0``) answers the rows it covers through ``benchmarks/peer_aic_worker.py``,
run as a subprocess with that environment's Python (it is never imported here). Both tools'
signed errors (``predicted / measured - 1``) are paired on the values both answered, and the
median |error| is printed per metric family, per engine and per split (and per engine on the
held-out rows), for servecap's default (``--step-model auto``: per model class, GPU vendor and
engine the step model its training rows favour), its roofline and its step as operations
(``--step-model operations``), as a Markdown table
(``docs/validation.md``, "Side by side with AIConfigurator").

    PYTHONPATH=src .venv/bin/python benchmarks/peer_accuracy.py --aic-python /tmp/aic-venv/bin/python
    ... --json peer.json     # also every paired value
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from servecap.specs.gpu import gpu_family
from servecap.validation.corpus import load_corpus
from servecap.validation.evaluate import compare_rows
from servecap.validation.step_source import select_step_source

WORKER = Path(__file__).with_name("peer_aic_worker.py")


def _row_question(crow) -> dict:  # type: ignore[no-untyped-def]
    from servecap.catalog import resolve_model

    row, wl = crow.row, crow.row.workload
    model = resolve_model(row.model)
    return {
        "id": crow.full_id,
        "gpu_family": gpu_family(row.gpu),
        "model": row.model,
        "engine": crow.engine,
        "weights_dtype": row.weights_dtype,
        "kv_cache_dtype": row.kv_cache_dtype,
        "tp": row.tp,
        "pp": row.pp,
        "moe": model.moe is not None,
        "mode": wl.mode,
        "concurrency": wl.concurrency,
        "prompt_tokens": wl.prompt_tokens,
        "output_tokens": wl.output_tokens,
        "max_num_seqs": crow.limits.max_num_seqs or 2048,
    }


def _stats(errs: list[float]) -> str:
    return f"{statistics.median(abs(e) for e in errs):.1%}" if errs else "–"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--aic-python", required=True, help="the Python of the environment holding aiconfigurator")
    ap.add_argument("--json", type=Path, default=None, help="write every paired value here")
    args = ap.parse_args()
    rows = load_corpus()
    questions = [_row_question(r) for r in rows]
    proc = subprocess.run(
        [args.aic_python, str(WORKER)],
        input=json.dumps(questions),
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if proc.returncode != 0:
        sys.exit(f"AIConfigurator worker failed: {proc.stderr.strip().splitlines()[-1:]}")
    aic: dict[str, dict] = json.loads(proc.stdout)
    comps = compare_rows(rows)  # servecap's default step model (auto)
    # the same rows on the roofline and on the step as operations (core/ops), paired value by value
    _, roof_adj = select_step_source("roofline", rows)
    roof_pred = {(c.full_id, c.metric): c.predicted for c in compare_rows(rows, per_row=roof_adj)}
    _, ops_adj = select_step_source("operations", rows)
    ops_pred = {(c.full_id, c.metric): c.predicted for c in compare_rows(rows, per_row=ops_adj)}
    paired = []
    for c in comps:
        answer = aic.get(c.full_id, {})
        if "skipped" in answer or c.predicted is None:
            continue
        key = c.metric if c.metric.endswith(".total") else c.metric.split(".")[0]
        value = answer.get(key)
        if value is None or value <= 0:
            continue
        paired.append(
            {
                "row": c.full_id,
                "engine": c.engine,
                "gpu_family": c.gpu_family,
                "split": c.split,
                "metric": c.metric,
                "family": c.family,
                "measured": c.measured,
                "servecap": c.predicted,
                "aiconfigurator": value,
                "servecap_error": c.predicted / c.measured - 1.0,
                "servecap_roofline_error": (roof_pred.get((c.full_id, c.metric)) or float("nan")) / c.measured - 1.0,
                "servecap_operations_error": (ops_pred.get((c.full_id, c.metric)) or float("nan")) / c.measured - 1.0,
                "aiconfigurator_error": value / c.measured - 1.0,
                "aiconfigurator_source": answer.get("source"),
            }
        )
    skipped = {k: v["skipped"] for k, v in aic.items() if "skipped" in v}
    print(
        f"{len(paired)} values of {len({p['row'] for p in paired})} rows answered by both; "
        f"{len(skipped)} of {len(rows)} rows AIConfigurator does not answer"
    )
    reasons: dict[str, int] = {}
    for why in skipped.values():
        reasons[why] = reasons.get(why, 0) + 1
    for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  {n:3d} rows: {why}")
    groups: list[tuple[str, list[dict]]] = [("all", paired)]
    groups += [(f"split {s}", [p for p in paired if p["split"] == s]) for s in ("train", "test")]
    engines = sorted({p["engine"] for p in paired})
    groups += [(f"engine {e}", [p for p in paired if p["engine"] == e]) for e in engines]
    groups += [(f"test, engine {e}", [p for p in paired if p["engine"] == e and p["split"] == "test"]) for e in engines]
    print()
    print(
        "| rows | metric | n | servecap (default, auto) | servecap (roofline) | servecap (operations) | AIConfigurator |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, ps in groups:
        for fam in ("throughput", "tpot", "ttft", "e2e"):
            sel = [p for p in ps if p["family"] == fam]
            if not sel:
                continue
            s, a = _stats([p["servecap_error"] for p in sel]), _stats([p["aiconfigurator_error"] for p in sel])
            r = _stats([p["servecap_roofline_error"] for p in sel])
            o = _stats([p["servecap_operations_error"] for p in sel])
            print(f"| {name} | {fam} | {len(sel)} | {s} | {r} | {o} | {a} |")
    if args.json is not None:
        args.json.write_text(json.dumps({"paired": paired, "skipped": skipped}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
