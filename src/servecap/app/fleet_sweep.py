"""``servecap sweep SWEEP.yaml``: many fleet simulations over a grid (or a zip) of settings, run
on an :class:`~servecap.distributed.executor.Executor` (serial, a local process pool, or Ray).

(Not :mod:`servecap.app.sweep`, which is the vectorised closed-form plan over a cross product.)

A sweep file names a base fleet and workload (a mapping, or a path relative to the sweep file)
and ``axes``: dotted paths into them with the values to try, e.g.::

    fleet: examples/fleet-simple.yaml
    workload: {arrival: {kind: poisson, rate_per_s: 20}, num_requests: 2000}
    seed: 0
    mode: grid                  # every combination (zip: the i-th value of each axis together)
    axes:
      fleet.pools.0.replicas: [4, 6, 8]
      fleet.router: [round-robin, least-outstanding]
      workload.arrival.rate_per_s: [20, 40]

Every point is validated before anything runs (one line naming ``axes.<path>`` and the value);
each runs as a task (:func:`run_point`, a top-level function any executor can ship), and the
same seed gives the same result whichever executor runs it (a test pins it).
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from servecap.app.limits import WorkLimits
from servecap.distributed.executor import Executor
from servecap.errors import ServecapError, from_validation_error
from servecap.files import dumps_json
from servecap.progress import ProgressFn
from servecap.results import RecordColumns, RequestRecord, RunSummary, records_from_columns


class SweepFile(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)

    fleet: dict[str, Any] | str
    workload: dict[str, Any] | str
    seed: int = Field(default=0, ge=0)
    mode: Literal["grid", "zip"] = "grid"
    axes: dict[str, list[Any]] = Field(min_length=1)
    label: str = ""


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One run: the axes' values and the fleet and workload mappings they give."""

    index: int
    values: dict[str, Any]
    fleet: dict[str, Any]
    workload: dict[str, Any]
    seed: int
    base_dir: str | None


@dataclass(frozen=True, slots=True)
class PointResult:
    values: dict[str, Any]
    row: dict[str, Any]  # the figures a table shows
    summary: RunSummary
    # the per-request outcomes as columns (numpy arrays): a worker ships them back to the parent
    # many times cheaper than a list of records (3.8 MB pickled and 0.5 s for 60,000 records)
    columns: RecordColumns
    model: str

    @property
    def records(self) -> list[RequestRecord]:
        """Per-request records (the shared results schema), built from the columns."""
        return records_from_columns(self.columns)


MAX_POINTS = 10_000


def load_sweep_file(path: Path | str) -> SweepFile:
    from servecap.files import load_document

    raw = load_document(path, "sweep", fmt="yaml")  # JSON is YAML too
    return sweep_from_dict(raw)


def sweep_from_dict(raw: dict[str, Any]) -> SweepFile:
    try:
        return SweepFile.model_validate(raw)
    except ValidationError as err:
        raise from_validation_error(err, "sweep") from None


def _mapping(value: dict[str, Any] | str, field: str, base_dir: Path | None) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    from servecap.files import load_document

    path = Path(value) if base_dir is None or Path(value).is_absolute() else base_dir / value
    raw: dict[str, Any] = load_document(path, field, fmt="yaml")  # JSON is YAML too
    return raw


def set_path(root: dict[str, Any], path: str, value: Any) -> None:
    """Set ``root[a][b][0][c] = value`` for ``path`` ``"a.b.0.c"`` (the last key may be new;
    every key before it must exist)."""
    parts = path.split(".")
    node: Any = root
    for i, p in enumerate(parts[:-1]):
        if isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        elif isinstance(node, dict) and p in node:
            node = node[p]
        else:
            raise ServecapError(f"axes.{path}", ".".join(parts[: i + 1]), "no such key in the base file")
    last = parts[-1]
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ServecapError(f"axes.{path}", last, "no such key in the base file")


def sweep_points(sf: SweepFile, base_dir: Path | None = None, limits: WorkLimits | None = None) -> list[SweepPoint]:
    """Every point of the sweep, validated and its work sized against ``limits`` (default: the
    CLI's; no simulation yet)."""
    from servecap.app.fleet import build_fleet, fleet_from_dict
    from servecap.app.limits import check_fleet_work, cli_limits
    from servecap.workload import workload_from_dict

    base = {
        "fleet": _mapping(sf.fleet, "sweep.fleet", base_dir),
        "workload": _mapping(sf.workload, "sweep.workload", base_dir),
    }
    names = list(sf.axes)
    for name in names:
        if name.split(".")[0] not in base:
            raise ServecapError(f"axes.{name}", name, "must start with 'fleet.' or 'workload.'")
        if not sf.axes[name]:
            raise ServecapError(f"axes.{name}", [], "give at least one value")
    if sf.mode == "zip":
        lengths = {len(v) for v in sf.axes.values()}
        if len(lengths) != 1:
            raise ServecapError("sweep.axes", sorted(lengths), "mode zip needs axes of one length")
        combos = list(zip(*sf.axes.values(), strict=True))
    else:
        # the grid's size from the axes' lengths, before one point of it is built
        n_points = math.prod(len(v) for v in sf.axes.values())
        if n_points > MAX_POINTS:
            shape = " x ".join(f"{len(v):,}" for v in sf.axes.values())
            raise ServecapError("sweep.axes", f"{shape} = {n_points:,} points", f"at most {MAX_POINTS:,} points")
        combos = list(itertools.product(*sf.axes.values()))
    if len(combos) > MAX_POINTS:
        raise ServecapError("sweep.axes", len(combos), f"at most {MAX_POINTS:,} points")
    points = []
    for i, combo in enumerate(combos):
        doc = copy.deepcopy(base)
        values = dict(zip(names, combo, strict=True))
        for name, v in values.items():
            set_path(doc, name, v)
        try:
            fleet = fleet_from_dict(doc["fleet"])
            workload = workload_from_dict(doc["workload"])
            check_fleet_work(fleet, workload, limits or cli_limits())
            build_fleet(fleet, base_dir)  # names, plans: what the run would refuse
        except ServecapError as err:
            raise ServecapError(err.field, err.value, f"{err.problem} (sweep point {i}: {_label(values)})") from None
        points.append(
            SweepPoint(i, values, doc["fleet"], doc["workload"], sf.seed, None if base_dir is None else str(base_dir))
        )
    return points


def run_point(point: SweepPoint) -> PointResult:
    """One fleet simulation (a top-level function: executors ship it to workers)."""
    from servecap.app.fleet import FleetSimulateRequest, fleet_from_dict, fleet_simulate
    from servecap.workload import workload_from_dict

    request = FleetSimulateRequest(
        fleet=fleet_from_dict(point.fleet), workload=workload_from_dict(point.workload), seed=point.seed
    )
    response, result = fleet_simulate(request, base_dir=None if point.base_dir is None else Path(point.base_dir))
    s = result.summary
    row: dict[str, Any] = {
        "requests": s.num_requests,
        "completed": s.completed,
        "throughput_req_s": s.throughput_req_s,
        "ttft_p50_s": s.ttft_s.p50,
        "ttft_p99_s": s.ttft_s.p99,
        "tpot_p99_s": s.tpot_s.p99,
        "slo_attainment": s.slo_attainment,
        "goodput_req_s": s.goodput_req_s,
        "cost_usd": response.cost_usd,  # over the run's simulated time: compare $/hour across points
        "usd_per_hour": response.cost_usd / (response.horizon_s / 3600.0) if response.horizon_s > 0 else None,
        "usd_per_million_tokens": response.usd_per_million_tokens,
        "outcomes": dict(response.outcomes),
    }
    model = ",".join(sorted({str(p.get("model", "")) for p in point.fleet.get("pools", [])}))
    return PointResult(point.values, row, s, result.columns, model)


@dataclass(frozen=True, slots=True)
class SweepRun:
    points: list[SweepPoint]
    results: list[PointResult | None]  # None: the point failed (its error in ``errors``)
    errors: dict[int, str]
    executor: str


def run_sweep(points: list[SweepPoint], executor: Executor, *, progress: ProgressFn | None = None) -> SweepRun:
    outcomes = executor.map(run_point, points, progress=progress)
    results: list[PointResult | None] = []
    errors: dict[int, str] = {}
    for o in outcomes:
        results.append(o.value)
        if not o.ok:
            errors[o.index] = o.error or "failed"
    return SweepRun(points, results, errors, executor.name)


def rows_json(run: SweepRun) -> str:
    out = []
    for p, r in zip(run.points, run.results, strict=True):
        out.append(
            {"index": p.index, "values": p.values, "error": run.errors.get(p.index), **({} if r is None else r.row)}
        )
    return dumps_json({"executor": run.executor, "points": out})


def _label(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
