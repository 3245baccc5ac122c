"""The functions jobs run (in a child process): a JSON payload in, a JSON result out.

The payload is the request body as validated by the API (with an uploaded model already
resolved to its file), so a job repeats exactly what ``servecap simulate``/``capacity --json``
would print for the same flags.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from servecap.api.bodies import CapacityBody, SimulateBody
from servecap.progress import Progress


def simulate_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    from servecap.app.inputs import slo_from_ms
    from servecap.app.simulate import build, simulate

    model_path = payload.pop("_model_path", None)
    db = payload.pop("_db", None)
    body = SimulateBody.model_validate(payload)
    slo = slo_from_ms(body.ttft_slo_ms, body.tpot_slo_ms)
    built = build(
        deployment=body.flags(model_path),
        calibration=None,
        workload=None,
        rate=body.rate,
        users=body.users,
        think_time_s=body.think_time_s,
        stream=body.stream(),
        duration_s=body.duration_s,
        num_requests=body.num_requests,
        slo=slo,
        no_prefix_caching=body.no_prefix_caching,
        max_waiting=body.max_waiting,
        policy=body.policy,
        turns=body.turns,
    )
    has_slo = body.ttft_slo_ms is not None or body.tpot_slo_ms is not None
    response, result = simulate(built, seed=body.seed, slo=slo if has_slo else None, progress=progress)
    data: dict[str, Any] = json.loads(response.model_dump_json())
    data["run_id"] = _store(db, body, result)
    data["timeseries"] = _timeseries(result)
    return data


def capacity_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    from servecap.app.capacity import capacity_from_flags

    model_path = payload.pop("_model_path", None)
    payload.pop("_db", None)
    body = CapacityBody.model_validate(payload)
    response, _built, _slo = capacity_from_flags(
        deployment=body.flags(model_path),
        calibration=None,
        workload=None,
        closed=body.closed_loop,
        target=body.target,
        think_time_s=body.think_time_s,
        turns=body.turns,
        stream=body.stream(),
        duration_s=body.duration_s,
        num_requests=body.num_requests,
        seed=body.seed,
        ttft_slo_ms=body.ttft_slo_ms,
        tpot_slo_ms=body.tpot_slo_ms,
        no_prefix_caching=body.no_prefix_caching,
        policy=body.policy,
        progress=progress,
    )
    result: dict[str, Any] = json.loads(response.model_dump_json())
    return result


def _store(db: str | None, body: SimulateBody, result: Any) -> str:
    """Keep the simulation in the run store (kind "simulated"), as the runs page lists it."""
    from pathlib import Path

    from servecap.results.store import RunStore, new_run_id

    settings = body.model_dump()
    settings["deployment"] = body.flags().to_settings()
    return RunStore(Path(db) if db else None).save_simulated(
        run_id=new_run_id(),
        model=body.model or "",
        mode="open" if body.users is None else "chat users",
        settings=settings,
        records=result.records(),
        summary=result.summary,
        label="web",
    )


def _timeseries(result: Any) -> dict[str, Any] | None:
    """The run's sampled gauges (time, KV usage, queue depth, batch) for the page's plots."""
    ts = result.summary.timeseries
    return None if ts is None else dict(ts.to_dict())
