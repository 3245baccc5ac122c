"""The ``accuracy`` use case: a measured run next to the simulator's prediction of it.

The prediction is ``servecap simulate`` of the run's stored workload, seed and deployment
(optionally with a calibration), its requests trimmed as the measurement's were. Each metric's
error is ``predicted / measured - 1``.

Prefix caching must match for the comparison to mean anything: the measured hit rate (the
server's ``usage`` cached tokens over the summarized requests) is set beside the simulated
one, and a run whose measured rate exceeds the simulated one by more than
:data:`MAX_HIT_RATE_GAP` is refused: its prompts were answered from a cache the workload did
not fill (a run made before prompts were unique per run, or another client's prompts), and its
TTFT would be blamed on the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servecap.errors import ServecapError
from servecap.json_object import JsonObject

MAX_HIT_RATE_GAP = 0.10

# (summary key, percentile or None): the rows of the comparison
METRICS: tuple[tuple[str, str | None], ...] = (
    ("ttft_s", "p50"),
    ("ttft_s", "p90"),
    ("ttft_s", "p99"),
    ("ttft_s", "mean"),
    ("tpot_s", "p50"),
    ("tpot_s", "p90"),
    ("tpot_s", "p99"),
    ("tpot_s", "mean"),
    ("itl_s", "p50"),
    ("itl_s", "p90"),
    ("itl_s", "p99"),
    ("e2e_s", "p50"),
    ("e2e_s", "p90"),
    ("e2e_s", "p99"),
    ("e2e_s", "mean"),
    ("throughput_req_s", None),
    ("output_tokens_per_s", None),
    ("goodput_req_s", None),
    ("completed", None),
    ("prefix_cache_hit_rate", None),
)


class AccuracyRequest(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    run: str  # a run id, a unique prefix, or "last"
    db: Path | None = None
    calibration: Path | None = None


class MetricRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: str
    measured: float | None
    predicted: float | None
    error: float | None  # predicted / measured - 1


class AccuracyResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    metrics: list[MetricRow]
    notes: list[str]


def accuracy(req: AccuracyRequest) -> AccuracyResponse:
    from servecap.app.calibrate import last_usable_run
    from servecap.app.runs import stored_deployment
    from servecap.measure.bench import measured_hit_rate
    from servecap.results import summary_to_json_dict
    from servecap.results.store import RunStore

    store = RunStore(req.db)
    skipped: list[str] = []
    if req.run == "last":
        run, skipped = last_usable_run(store)
    else:
        run = store.get_run(req.run)
    window = run.wall_duration_s if run.interrupted and run.wall_duration_s > 0 else None
    predicted, notes = predicted_summary(run.settings, stored_deployment(run), req.calibration, window_s=window)
    if skipped:
        notes.append(f"last usable measured run {run.run_id}; skipped newer: {'; '.join(skipped[:5])}")
    measured = summary_to_json_dict(run.summary)
    if measured.get("prefix_cache_hit_rate") is None:  # stored before the rate was kept
        measured["prefix_cache_hit_rate"] = measured_hit_rate(
            [t for t in store.get_requests(run.run_id) if not t.trimmed]
        )
    check_hit_rates(run.run_id, _rate(measured, "prefix_cache_hit_rate"), _rate(predicted, "prefix_cache_hit_rate"))
    if window is not None:
        notes.append(
            f"the run was interrupted after {window:,.1f} s: the simulation is cut at the same time "
            "(requests sent by then, completed by then), and both compare the requests they completed"
        )
    return AccuracyResponse(run_id=run.run_id, metrics=comparison(measured, predicted), notes=notes)


def _rate(summary: Mapping[str, object], key: str) -> float | None:
    value = summary.get(key)
    return float(value) if isinstance(value, int | float) else None


def _setting(settings: Mapping[str, object], key: str, default: float) -> float:
    """A stored run's numeric setting (``default`` when unset or null)."""
    value = settings.get(key)
    if value is None:
        return default
    if isinstance(value, int | float | str):
        return float(value)
    raise ServecapError(key, value, "must be a number")


def check_hit_rates(run_id: str, measured: float | None, predicted: float | None) -> None:
    """Refuse a comparison whose measured prefix-cache hits the simulation cannot have."""
    if measured is None:
        return
    if measured - (predicted or 0.0) > MAX_HIT_RATE_GAP:
        raise ServecapError(
            "run",
            run_id,
            f"measured prefix-cache hit rate {measured:.1%} but the simulated workload gives "
            f"{predicted or 0.0:.1%}: the server answered prompts from a cache this run's workload did not "
            "fill (a run made before prompts were unique per run, or another client's requests), so its TTFT "
            "is not comparable; bench it again",
        )


def predicted_summary(
    settings: Mapping[str, object],
    deployment: Mapping[str, object],
    calibration: Path | None,
    *,
    window_s: float | None = None,
) -> tuple[JsonObject, list[str]]:
    """Simulate the run's stored workload, seed and deployment; summarize the requests the
    measurement summarized (warm-up and cool-down trimmed the same way). ``window_s``: an
    interrupted run's length: requests that arrive later are not sent, and those still running
    then did not complete (an error ``interrupted``), as in the measurement."""
    import numpy as np

    from servecap.app.flags import efficiency_from_file
    from servecap.app.runs import deployment_from_settings
    from servecap.core.plan import plan
    from servecap.results import Slo, summarize, summary_to_json_dict
    from servecap.sim import engine_setup_from_plan, simulate
    from servecap.workload import WorkloadSpec

    if settings.get("concurrency") is not None:
        raise ServecapError(
            "run",
            settings.get("concurrency"),
            "a fixed-concurrency run (--concurrency) has no "
            "simulated equivalent; bench with --rate, --users or --workload",
        )
    dep, notes, caching = deployment_from_settings(deployment)
    eff, note = efficiency_from_file(calibration, dep)  # another deployment's fit is refused, as simulate does
    if note:
        notes.append(note)
    spec = WorkloadSpec.model_validate(settings["workload"])
    slo_d = settings.get("slo")
    slo = Slo(slo_d.get("ttft_s"), slo_d.get("tpot_s")) if isinstance(slo_d, dict) else None
    setup = engine_setup_from_plan(plan(dep, efficiency=eff), enable_prefix_caching=caching)
    seed = settings.get("seed", 0)
    if not isinstance(seed, int):
        raise ServecapError("seed", seed, "must be an integer")
    res = simulate(setup, spec, np.random.default_rng(seed), slo=slo, record_token_times=True)
    records = res.records()
    if window_s is not None:
        from dataclasses import replace

        records = [
            r if r.end_s is not None and r.end_s <= window_s else replace(r, end_s=None, error=r.error or "interrupted")
            for r in records
            if r.arrival_s <= window_s
        ]
    warm, cool = _setting(settings, "warmup_s", 0.0), _setting(settings, "cooldown_s", 0.0)
    if records and (warm > 0 or cool > 0):
        last = max(r.arrival_s for r in records)
        records = [r for r in records if warm <= r.arrival_s <= last - cool]
    if not records:
        return summary_to_json_dict(summarize([], duration_s=0.0, slo=slo)), notes
    start = min(r.arrival_s for r in records)
    end = max((r.end_s for r in records if r.end_s is not None), default=start)
    out = summary_to_json_dict(summarize(records, duration_s=max(end - start, 1e-9), slo=slo))
    prompt = sum(r.prompt_tokens for r in records)
    out["prefix_cache_hit_rate"] = sum(r.cached_prompt_tokens for r in records) / prompt if prompt else None
    return out, notes


def comparison(measured: Mapping[str, object], predicted: Mapping[str, object]) -> list[MetricRow]:
    """One row per metric: measured, predicted, error = predicted / measured - 1."""
    rows = []
    for key, sub in METRICS:
        m, p = measured.get(key), predicted.get(key)
        if sub is not None:
            m = m.get(sub) if isinstance(m, dict) else None
            p = p.get(sub) if isinstance(p, dict) else None
        m = float(m) if isinstance(m, int | float) else None
        p = float(p) if isinstance(p, int | float) else None
        err = p / m - 1.0 if m is not None and p is not None and m else None
        rows.append(MetricRow(metric=key if sub is None else f"{key}.{sub}", measured=m, predicted=p, error=err))
    return rows
