"""``fleet simulate --fidelity cache-replay`` over the HTTP API: ``POST /api/v1/fleet/simulate``
with ``"fidelity": "cache-replay"``, a fleet file and a workload that is only a shipped trace
sample (``{"arrival": {"kind": "trace", "path": "sample:<name>"}}``, with the trace's
``time_scale`` and ``format``). The job runs :func:`servecap.app.cache_replay.fleet_cache_replay`
(its result is the CLI's ``--json`` for the same fleet file and ``--trace``); its progress is the
replay's own (requests read, the trace's clock) over the job's events.

Everything the cache replay refuses is refused before the job is queued, as the API's one-line
400 naming the body's field, in the CLI's words: a workload key other than the trace ("not read
at --fidelity cache-replay"), no trace, a trace window, a format or a sample it does not read, a
fleet it does not model (P/D, KV tiers, autoscaling, ...). The refusals are the replay's own:
:func:`servecap.app.cache_replay.fleet_cache_replay_refusal` (the CLI's check too), so a refusal
the replay adds or drops is the API's at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servecap.api.fleet_bodies import FleetSimulateBody
from servecap.app.limits import API_LIMITS, WorkLimits
from servecap.errors import ServecapError
from servecap.progress import Progress

# the replay's flag names -> the body's fields
_FIELDS = {
    "--fidelity": "fidelity",
    "--trace": "workload.arrival.path",
    "--trace-format": "workload.arrival.format",
    "--trace-start-s": "workload.arrival.start_s",
    "--trace-end-s": "workload.arrival.end_s",
}


def _body_named(err: ServecapError, sample: str) -> ServecapError:
    """``err`` with the body's field names: a flag as its field; a trace line or the trace file
    (which the server names by its path on disk) as ``workload.arrival.path`` with the sample's
    name, the line in the text."""
    field = _FIELDS.get(err.field)
    if field is not None:
        return type(err)(field, err.value, err.problem)
    from servecap.workload.samples import trace_path

    file_name = trace_path(sample).name
    if err.field == "trace":
        return type(err)("workload.arrival.path", sample, err.problem)
    if err.field.startswith(file_name):
        line = err.field[len(file_name) :].lstrip(":")
        value = repr(err.value) if isinstance(err.value, str) else str(err.value)
        return type(err)("workload.arrival.path", sample, f"line {line}: {value}: {err.problem}")
    return err


def _inputs(body: FleetSimulateBody) -> tuple[Any, Any, str]:
    """The fleet file, the trace and the sample's name of a cache-replay body; a workload key
    other than the trace, or no trace, refused by name."""
    from servecap.app.cache_replay import NO_TRACE, NOT_READ
    from servecap.fleet.file_schema import fleet_from_dict
    from servecap.workload import workload_from_dict
    from servecap.workload.spec_parts import TraceArrival

    for key, value in body.workload.items():
        if key != "arrival":
            raise ServecapError(f"workload.{key}", value, NOT_READ)
    arrival = body.workload.get("arrival")
    if not isinstance(arrival, dict) or arrival.get("kind") != "trace":
        raise ServecapError(
            "fidelity",
            "cache-replay",
            NO_TRACE.replace("--trace FILE", "workload.arrival a trace sample") + " "
            "({kind: trace, path: sample:<name>}, GET /api/v1/traces)",
        )
    trace = workload_from_dict(dict(body.workload)).arrival
    assert isinstance(trace, TraceArrival)
    return fleet_from_dict(dict(body.fleet)), trace, trace.path


def check_cache_replay_body(body: FleetSimulateBody, upload_dir: Path, limits: WorkLimits) -> None:
    """Refuse a cache-replay body before queueing it: names (catalog models and GPUs, a shipped
    sample, never a path), the work limits, and every refusal of the replay itself, each one line
    naming the body's field."""
    from servecap.api.names import check_spec
    from servecap.app.cache_replay import fleet_cache_replay_refusal
    from servecap.app.limits import check_fleet_work
    from servecap.workload import workload_from_dict

    fleet, _trace, _path = _inputs(body)
    check_spec(fleet, body.fleet, "fleet", upload_dir)
    workload = workload_from_dict(dict(body.workload))
    check_spec(workload, body.workload, "workload", upload_dir)  # a sample, or refused as a path
    fleet, trace, sample = _inputs(body)  # with uploads resolved
    check_fleet_work(fleet, workload, limits, streaming=True)  # the replay streams the trace
    refusal = fleet_cache_replay_refusal(fleet, trace)
    if refusal is not None:
        raise _body_named(refusal, sample)


def cache_replay_job(payload: dict[str, Any], progress: Callable[[Progress], None]) -> dict[str, Any]:
    """The job: the cache replay of the body's trace sample on its fleet (``fleet simulate
    --fidelity cache-replay --json``)."""
    from servecap.app.cache_replay import fleet_cache_replay

    payload.pop("_limits", API_LIMITS)
    body = FleetSimulateBody.model_validate(payload)
    fleet, trace, sample = _inputs(body)
    try:
        response = fleet_cache_replay(fleet, trace, progress=progress)
    except ServecapError as err:
        raise _body_named(err, sample) from None
    result: dict[str, Any] = json.loads(response.model_dump_json())
    return result
