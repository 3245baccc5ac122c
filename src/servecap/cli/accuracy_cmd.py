"""``servecap accuracy RUN``: measured vs predicted (the simulator on the same workload and seed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from servecap.cli.options import calibration_option, db_option, json_option

# (summary key, percentile or None): the rows of the comparison
_METRICS: tuple[tuple[str, str | None], ...] = (
    ("ttft_s", "p50"), ("ttft_s", "p90"), ("ttft_s", "p99"), ("ttft_s", "mean"),
    ("tpot_s", "p50"), ("tpot_s", "p90"), ("tpot_s", "p99"), ("tpot_s", "mean"),
    ("itl_s", "p50"), ("itl_s", "p90"), ("itl_s", "p99"),
    ("e2e_s", "p50"), ("e2e_s", "p90"), ("e2e_s", "p99"), ("e2e_s", "mean"),
    ("throughput_req_s", None), ("output_tokens_per_s", None), ("goodput_req_s", None),
    ("completed", None),
)


def predicted_summary(settings: dict[str, Any], calibration: Path | None) -> tuple[dict[str, Any], list[str]]:
    """Simulate the run's stored workload, seed and deployment; summarize the requests the
    measurement summarized (warm-up and cool-down trimmed the same way)."""
    import numpy as np

    from servecap.cli.bench_cmd import deployment_from_settings
    from servecap.cli.options import efficiency_from_options
    from servecap.core.plan import plan
    from servecap.errors import ServecapError
    from servecap.results import Slo, summarize, summary_to_json_dict
    from servecap.sim import engine_setup_from_plan, simulate
    from servecap.workload import WorkloadSpec

    if settings.get("concurrency") is not None:
        raise ServecapError("run", settings.get("concurrency"), "a fixed-concurrency run (--concurrency) has no "
                            "simulated equivalent; bench with --rate, --users or --workload")
    stored = settings.get("deployment")
    if not isinstance(stored, dict):
        raise ServecapError("run", "deployment", "the run has no stored deployment: bench it with --gpu and the "
                            "deployment flags of `servecap plan` (automatic against `servecap emulate`)")
    dep, notes, caching = deployment_from_settings(stored)
    eff, note = efficiency_from_options(calibration)
    if note:
        notes.append(note)
    spec = WorkloadSpec.model_validate(settings["workload"])
    slo_d = settings.get("slo")
    slo = Slo(slo_d.get("ttft_s"), slo_d.get("tpot_s")) if isinstance(slo_d, dict) else None
    setup = engine_setup_from_plan(plan(dep, efficiency=eff), enable_prefix_caching=caching)
    res = simulate(setup, spec, np.random.default_rng(int(settings.get("seed", 0))), slo=slo,
                   record_token_times=True)
    records = res.records()
    warm, cool = float(settings.get("warmup_s") or 0.0), float(settings.get("cooldown_s") or 0.0)
    if records and (warm > 0 or cool > 0):
        last = max(r.arrival_s for r in records)
        records = [r for r in records if warm <= r.arrival_s <= last - cool]
    if not records:
        return summary_to_json_dict(summarize([], duration_s=0.0, slo=slo)), notes
    start = min(r.arrival_s for r in records)
    end = max((r.end_s for r in records if r.end_s is not None), default=start)
    return summary_to_json_dict(summarize(records, duration_s=max(end - start, 1e-9), slo=slo)), notes


def comparison(measured: dict[str, Any], predicted: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per metric: measured, predicted, error = predicted / measured - 1."""
    rows = []
    for key, sub in _METRICS:
        m, p = measured.get(key), predicted.get(key)
        if sub is not None:
            m = m.get(sub) if isinstance(m, dict) else None
            p = p.get(sub) if isinstance(p, dict) else None
        err = None
        if isinstance(m, int | float) and isinstance(p, int | float) and m:
            err = float(p) / float(m) - 1.0
        rows.append({"metric": key if sub is None else f"{key}.{sub}", "measured": m, "predicted": p, "error": err})
    return rows


@click.command("accuracy")
@click.argument("run", type=click.STRING)
@calibration_option
@db_option
@json_option
def accuracy(run: str, calibration: Path | None, db: Path | None, as_json: bool) -> None:
    """Measured vs predicted, per metric, with the error (prediction: `servecap simulate` of the
    run's workload, seed and deployment, optionally with a calibration).

    RUN is a run id, unique prefix, or 'last'."""
    from servecap.measure.store import RunStore

    row = RunStore(db).get_run(run)
    predicted, notes = predicted_summary(row.settings, calibration)
    rows = comparison(row.summary, predicted)
    if as_json:
        click.echo(json.dumps({"run_id": row.run_id, "metrics": rows, "notes": notes}))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"run {row.run_id}: measured vs predicted")
    for col in ("metric", "measured", "predicted", "error"):
        t.add_column(col, justify="left" if col == "metric" else "right")

    def fmt(key: str, v: Any) -> str:
        if not isinstance(v, int | float):
            return "-"
        if key.split(".")[0].endswith("_s") and "." in key:
            return f"{float(v) * 1e3:.2f} ms"
        return f"{float(v):.2f}"

    for r in rows:
        err = r["error"]
        t.add_row(r["metric"], fmt(r["metric"], r["measured"]), fmt(r["metric"], r["predicted"]),
                  "-" if err is None else f"{err:+.1%}")
    con = Console()
    con.print(t)
    for n in notes:
        con.print(f"note: {n}")
