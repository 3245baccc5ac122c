"""``servecap calibrate RUN...``: fit the step-time coefficients to stored bench runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from servecap.cli.options import PATH, db_option, json_option


def load_runs(store: Any, runs: list[str]) -> tuple[list[Any], list[list[Any]], dict[str, Any]]:
    """The runs' rows and traces, and their common stored deployment (an error names the run
    that has none, or that differs)."""
    from servecap.errors import ServecapError

    rows, traces = [], []
    deployment: dict[str, Any] | None = None
    for run in runs:
        row = store.get_run(run)
        dep = row.settings.get("deployment")
        if not isinstance(dep, dict):
            raise ServecapError("run", row.run_id, "has no stored deployment: bench it with --gpu and the "
                                "deployment flags of `servecap plan` (automatic against `servecap emulate`)")
        key = {k: v for k, v in dep.items() if k != "calibration"}
        if deployment is not None and key != deployment:
            raise ServecapError("run", row.run_id, "was measured on another deployment than the first run")
        deployment = key
        rows.append(row)
        traces.append(store.get_traces(row.run_id))
    assert deployment is not None
    return rows, traces, deployment


@click.command("calibrate")
@click.argument("runs", type=click.STRING, nargs=-1, required=True)
@click.option("--output", "-o", type=PATH, default="calibration.json", help="Calibration file to write.")
@click.option("--source", type=click.STRING, default="auto",
              help="Token times: auto|client|server (server: the emulator's own schedule).")
@click.option("--no-fit-prefill", is_flag=True, default=False, help="Keep prefill_s_per_token at 0.")
@db_option
@json_option
def calibrate(runs: tuple[str, ...], output: Path, source: str, no_fit_prefill: bool, db: Path | None,
              as_json: bool) -> None:
    """Fit bandwidth/compute efficiency, step overhead and per-prompt-token cost to the step
    times seen in stored runs of one deployment; write a file for --calibration.

    RUNS are run ids (or unique prefixes, or 'last') of one deployment."""
    from datetime import UTC, datetime

    from servecap.calibration import CalibrationFile, Coefficients, FitSummary
    from servecap.cli.bench_cmd import deployment_from_settings
    from servecap.core.plan import plan
    from servecap.errors import ServecapError
    from servecap.measure.calibrate import calibrate_runs
    from servecap.measure.store import RunStore
    from servecap.specs.perf import Efficiency

    if source not in ("auto", "client", "server"):
        raise ServecapError("source", source, "must be auto, client or server")
    rows, traces, stored = load_runs(RunStore(db), list(runs))
    dep, _notes, _caching = deployment_from_settings(stored)
    start = Efficiency()
    p = plan(dep, efficiency=start)
    fit, stats, used = calibrate_runs(traces, p.step, max_num_batched_tokens=dep.engine.max_num_batched_tokens,
                                      start=start, source=source, fit_prefill=not no_fit_prefill)  # type: ignore[arg-type]
    e = fit.efficiency
    try:
        coeffs = Coefficients(bandwidth_efficiency=e.bandwidth_efficiency, compute_efficiency=e.compute_efficiency,
                              step_overhead_s=e.step_overhead_s, prefill_s_per_token=e.prefill_s_per_token,
                              allreduce_latency_s=e.allreduce_latency_s)
    except ValueError as err:
        raise ServecapError("runs", ",".join(r.run_id for r in rows),
                            f"fitted coefficients out of range ({err.__class__.__name__}): {e}") from None
    cal = CalibrationFile(
        model=dep.model.id, gpu=dep.gpu.id, tp=dep.parallelism.tp, pp=dep.parallelism.pp,
        weights_dtype=str(stored.get("weights_dtype") or "auto"), kv_cache_dtype=str(stored.get("kv_cache_dtype") or "auto"),
        coefficients=coeffs,
        fit=FitSummary(runs=[r.run_id for r in rows], num_samples=fit.num_samples, rmse_s=fit.rmse_s, r2=fit.r2),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    try:
        output.write_text(cal.to_json() + "\n", encoding="utf-8")
    except OSError as err:
        raise ServecapError("output", str(output), f"cannot write: {err.strerror}") from None
    info = {"output": str(output), "source": used, "coefficients": coeffs.model_dump(),
            "num_samples": fit.num_samples, "memory_bound": fit.num_memory_bound,
            "compute_bound": fit.num_compute_bound, "rmse_s": fit.rmse_s, "r2": fit.r2,
            "dropped_outliers": fit.dropped_outliers, "not_determined": list(fit.fixed),
            "steps": [{"run_id": r.run_id, "steps": s.steps, "usable": s.usable, "tainted": s.tainted}
                      for r, s in zip(rows, stats, strict=True)]}
    if as_json:
        click.echo(json.dumps(info))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"calibration of {dep.model.id} on {dep.num_gpus}x {dep.gpu.id} from {len(rows)} run(s), {used} clock")
    t.add_column("coefficient")
    t.add_column("fitted", justify="right")
    t.add_column("default", justify="right")
    for name in ("bandwidth_efficiency", "compute_efficiency", "step_overhead_s", "prefill_s_per_token"):
        mark = " (not determined)" if name in fit.fixed else ""
        t.add_row(name, f"{getattr(e, name):.6g}{mark}", f"{getattr(start, name):.6g}")
    con = Console()
    con.print(t)
    con.print(f"{fit.num_samples} steps ({fit.num_memory_bound} memory-bound, {fit.num_compute_bound} compute-bound), "
              f"rmse {fit.rmse_s * 1e3:.3f} ms, R² {fit.r2:.4f}, {fit.dropped_outliers} outliers dropped")
    con.print(f"wrote {output}")
