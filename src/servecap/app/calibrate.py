"""The ``calibrate`` use case: fit the step-time coefficients to stored runs of one deployment
and write a calibration file (``servecap.calibration/1``).

Each request's prefill is priced at its uncached prompt (``prompt - cached``, the server's
``usage`` cached tokens), so the measured prefix-cache hits enter the fit request by request;
the response reports each run's measured hit rate.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from servecap.errors import ServecapError
from servecap.json_object import JsonObject

if TYPE_CHECKING:
    from servecap.results.store import RunStore, StoredRun


class CalibrateRequest(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    runs: list[str] = Field(min_length=1)  # run ids, unique prefixes or "last", of one deployment
    output: Path | None = Field(
        default=Path("calibration.json"), description="Calibration file to write (None: not written)."
    )
    source: Literal["auto", "client", "server"] = Field(
        default="auto", description="Token times: the server's own schedule (the emulator's) or the client's clock."
    )
    fit_prefill: bool = Field(default=True, description="Fit prefill_s_per_token (else kept at 0).")
    db: Path | None = None


class RunSteps(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    steps: int
    usable: int
    tainted: int
    prefix_cache_hit_rate: float | None


class CalibrateResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    output: str | None  # None: the file was not written (the coefficients are below)
    model: str
    gpu: str
    num_gpus: int
    source: str
    coefficients: dict[str, float]
    defaults: dict[str, float]
    num_samples: int
    memory_bound: int
    compute_bound: int
    rmse_s: float
    r2: float
    dropped_outliers: int
    not_determined: list[str]
    steps: list[RunSteps]


def usable_problem(run: StoredRun) -> str | None:
    """Why a stored run cannot be calibrated or compared against (None: it can): a simulated
    run, no completed request, or no stored deployment."""
    if run.kind != "measured":
        return f"a {run.kind} run"
    if run.summary.completed <= 0:
        return "no request completed" + (" (interrupted)" if run.interrupted else "")
    if not isinstance(run.settings.get("deployment"), dict):
        return "no stored deployment"
    return None


def last_usable_run(store: RunStore, scan: int = 200) -> tuple[StoredRun, list[str]]:
    """``last`` as `calibrate` and `accuracy` mean it: the newest measured run that completed
    requests and stored its deployment, and the newer runs skipped ("id (why)"); the error names
    the runs it skipped and why."""
    skipped: list[str] = []
    for run in store.list_runs(limit=scan):
        problem = usable_problem(run)
        if problem is None:
            return run, skipped
        skipped.append(f"{run.run_id} ({problem})")
    if not skipped:
        raise ServecapError("run", "last", f"no runs in {store.path}")
    shown = "; ".join(skipped[:5]) + (f"; and {len(skipped) - 5} more" if len(skipped) > 5 else "")
    raise ServecapError(
        "run",
        "last",
        f"no usable measured run (completed requests and a stored deployment) among the last {len(skipped)}: "
        f"skipped {shown}",
    )


def calibrate(req: CalibrateRequest) -> CalibrateResponse:
    from datetime import UTC, datetime

    from servecap.app.runs import deployment_from_settings, stored_deployment
    from servecap.calibration import CalibrationFile, Coefficients, FitSummary
    from servecap.core.plan import plan
    from servecap.measure.bench import measured_hit_rate
    from servecap.measure.calibrate import calibrate_runs
    from servecap.results.store import RunStore
    from servecap.specs.perf import Efficiency

    store = RunStore(req.db)
    rows, requests = [], []
    deployment: JsonObject | None = None
    for name in req.runs:
        row = last_usable_run(store)[0] if name == "last" else store.get_run(name)
        key = {k: v for k, v in stored_deployment(row).items() if k != "calibration"}
        if deployment is not None and key != deployment:
            raise ServecapError("run", row.run_id, "was measured on another deployment than the first run")
        deployment = key
        rows.append(row)
        requests.append(store.get_requests(row.run_id))
    assert deployment is not None
    dep, _notes, _caching = deployment_from_settings(deployment)
    start = Efficiency()
    fit, stats, used = calibrate_runs(
        requests,
        plan(dep, efficiency=start).step,
        max_num_batched_tokens=dep.engine.max_num_batched_tokens,
        start=start,
        source=req.source,
        fit_prefill=req.fit_prefill,
    )
    e = fit.efficiency
    try:
        coeffs = Coefficients(
            bandwidth_efficiency=e.bandwidth_efficiency_on(""),  # the fit sets both explicitly
            compute_efficiency=e.compute_efficiency_at("bf16"),
            step_overhead_s=e.step_overhead_on(""),
            prefill_s_per_token=e.prefill_s_per_token,
            allreduce_latency_s=e.allreduce_latency_s,
        )
    except ValueError as err:
        raise ServecapError(
            "runs",
            ",".join(r.run_id for r in rows),
            f"fitted coefficients out of range ({err.__class__.__name__}): {e}",
        ) from None
    cal = CalibrationFile(
        model=dep.model.id,
        gpu=dep.gpu.id,
        tp=dep.parallelism.tp,
        pp=dep.parallelism.pp,
        weights_dtype=str(deployment.get("weights_dtype") or "auto"),
        kv_cache_dtype=str(deployment.get("kv_cache_dtype") or "auto"),
        coefficients=coeffs,
        fit=FitSummary(runs=[r.run_id for r in rows], num_samples=fit.num_samples, rmse_s=fit.rmse_s, r2=fit.r2),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    if req.output is not None:
        from servecap.outputs import write_text

        write_text(req.output, cal.to_json() + "\n", "--output")
    return CalibrateResponse(
        output=None if req.output is None else str(req.output),
        model=dep.model.id,
        gpu=dep.gpu.id,
        num_gpus=dep.num_gpus,
        source=used,
        coefficients=coeffs.model_dump(exclude_none=True),
        defaults={  # the defaults this deployment would run with (by GPU family and dtype)
            "bandwidth_efficiency": start.bandwidth_efficiency_on(dep.gpu.family),
            "compute_efficiency": start.compute_efficiency_at(dep.weights_dtype.compute),
            "step_overhead_s": start.step_overhead_on(dep.gpu.family, dep.engine.engine),
            "prefill_s_per_token": start.prefill_s_per_token,
        },
        num_samples=fit.num_samples,
        memory_bound=fit.num_memory_bound,
        compute_bound=fit.num_compute_bound,
        rmse_s=fit.rmse_s,
        r2=fit.r2,
        dropped_outliers=fit.dropped_outliers,
        not_determined=list(fit.fixed),
        steps=[
            RunSteps(
                run_id=r.run_id,
                steps=s.steps,
                usable=s.usable,
                tainted=s.tainted,
                prefix_cache_hit_rate=measured_hit_rate([t for t in reqs if not t.trimmed]),
            )
            for r, s, reqs in zip(rows, stats, requests, strict=True)
        ],
    )
