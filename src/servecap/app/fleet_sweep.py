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
    seeds: 3                    # each point on seeds 0, 1, 2; their sketches merged (optional)
    percentiles: sketch         # auto | exact | sketch (as fleet simulate; seeds > 1 need sketches)

Every point is validated before anything runs (one line naming ``axes.<path>`` and the value);
each runs as a task (:func:`run_point`, a top-level function any executor can ship), and the
same seed gives the same result whichever executor runs it (a test pins it).

Sketches merge: a point run on the streaming path ships its
:class:`~servecap.results.sketch_set.RunSketches` back as a dict (any executor pickles it); with
``seeds: N`` each (point, seed) is one task and the point's summary comes from the seeds' merged
sketches (percentiles from the merged sketch, counters added, durations and costs summed), and
:func:`merge_points` pools every point's sketches into one summary (the whole sweep and each
pool). The merge is in seed and point order, so every executor gives the same figures.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import TypedDict

from servecap.app.limits import WorkLimits
from servecap.distributed.executor import Executor
from servecap.errors import ServecapError, from_validation_error
from servecap.json_object import JsonObject  # the sweep file's base fleet and workload, a point's axis values
from servecap.progress import ProgressFn
from servecap.results import RecordColumns, RequestRecord, RunSummary, records_from_columns
from servecap.results.sketch_set import RunSketches

MAX_SEEDS = 1_000
PercentileMode = Literal["auto", "exact", "sketch"]


class PointRow(TypedDict, total=False):
    """The figures a table shows for one point (``seeds`` and the TTFT spread: a merged point)."""

    requests: int
    completed: int
    throughput_req_s: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    slo_attainment: float | None
    goodput_req_s: float | None
    cost_usd: float  # over the run's simulated time: compare $/hour across points
    usd_per_hour: float | None
    usd_per_million_tokens: float | None
    outcomes: dict[str, int]
    seeds: list[int]
    ttft_p99_s_by_seed: list[float | None]


class SweepFile(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)

    fleet: JsonObject | str
    workload: JsonObject | str
    seed: int = Field(default=0, ge=0)
    # each point runs on seeds seed, seed + 1, ..., seed + seeds - 1; their sketches merge
    seeds: int = Field(default=1, ge=1, le=MAX_SEEDS)
    # as fleet simulate: "sketch" streams every point into mergeable sketches (seeds > 1 do)
    percentiles: PercentileMode = "auto"
    mode: Literal["grid", "zip"] = "grid"
    axes: dict[str, list[object]] = Field(min_length=1)
    label: str = ""

    @property
    def sketched(self) -> bool:
        """Whether every point streams into sketches (asked for, or needed to merge seeds)."""
        return self.percentiles == "sketch" or self.seeds > 1


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One run: the axes' values and the fleet and workload mappings they give."""

    index: int
    values: JsonObject
    fleet: JsonObject
    workload: JsonObject
    seed: int  # the seed this task runs (the first of ``seeds`` for the point itself)
    base_dir: str | None
    seeds: tuple[int, ...] = ()  # every seed of the point (empty: just ``seed``)
    percentiles: PercentileMode = "auto"

    @property
    def all_seeds(self) -> tuple[int, ...]:
        return self.seeds or (self.seed,)


@dataclass(frozen=True, slots=True)
class PointResult:
    values: JsonObject
    row: PointRow
    summary: RunSummary
    # the per-request outcomes as columns (numpy arrays): a worker ships them back to the parent
    # many times cheaper than a list of records (3.8 MB pickled and 0.5 s for 60,000 records);
    # empty for a run that streamed (its ``sketches`` instead)
    columns: RecordColumns
    model: str
    # a streaming run's mergeable accumulators, RunSketches.to_dict() (plain data: any executor
    # ships it); None for an exact run
    sketches: JsonObject | None = None
    horizon_s: float = 0.0  # simulated time billed (summed over merged seeds)
    seeds: tuple[int, ...] = ()

    @property
    def records(self) -> list[RequestRecord]:
        """Per-request records (the shared results schema), built from the columns."""
        return records_from_columns(self.columns)


MAX_POINTS = 10_000


def load_sweep_file(path: Path | str) -> SweepFile:
    from servecap.files import load_document

    raw = load_document(path, "sweep", fmt="yaml")  # JSON is YAML too
    return sweep_from_dict(raw)


def sweep_from_dict(raw: Mapping[str, object]) -> SweepFile:
    try:
        sf = SweepFile.model_validate(raw)
    except ValidationError as err:
        raise from_validation_error(err, "sweep") from None
    if sf.seeds > 1 and sf.percentiles == "exact":
        raise ServecapError(
            "sweep.seeds", sf.seeds, "seeds merge through sketches; percentiles: exact keeps no sketches"
        )
    return sf


def with_overrides(sf: SweepFile, *, seeds: int | None = None, percentiles: PercentileMode | None = None) -> SweepFile:
    """``sf`` with the command line's ``--seeds`` / ``--sketch`` / ``--exact`` in place of the
    file's (validated again)."""
    raw = sf.model_dump()
    if seeds is not None:
        raw["seeds"] = seeds
    if percentiles is not None:
        raw["percentiles"] = percentiles
    return sweep_from_dict(raw)


def _mapping(value: JsonObject | str, field: str, base_dir: Path | None) -> JsonObject:
    if isinstance(value, dict):
        return value
    from servecap.files import load_document

    path = Path(value) if base_dir is None or Path(value).is_absolute() else base_dir / value
    raw: JsonObject = load_document(path, field, fmt="yaml")  # JSON is YAML too
    return raw


def set_path(root: JsonObject, path: str, value: object) -> None:
    """Set ``root[a][b][0][c] = value`` for ``path`` ``"a.b.0.c"`` (the last key may be new;
    every key before it must exist)."""
    parts = path.split(".")
    node: object = root
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
    CLI's; no simulation yet). A sketched sweep (``percentiles: sketch`` or ``seeds`` > 1) checks
    that every point can stream."""
    from servecap.app.fleet_simulate import FleetSimulateRequest, use_sketches
    from servecap.app.limits import check_fleet_work, cli_limits
    from servecap.fleet.file_schema import build_fleet, fleet_from_dict
    from servecap.workload import workload_from_dict

    base: JsonObject = {
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
    if len(combos) * sf.seeds > MAX_POINTS:
        runs = f"{len(combos):,} points x {sf.seeds:,} seeds"
        raise ServecapError("sweep.seeds", runs, f"at most {MAX_POINTS:,} runs (points x seeds)")
    points = []
    for i, combo in enumerate(combos):
        doc = copy.deepcopy(base)
        values: JsonObject = dict(zip(names, combo, strict=True))
        for name, v in values.items():
            set_path(doc, name, v)
        try:
            fleet_doc, workload_doc = _section(doc, "fleet"), _section(doc, "workload")
            fleet = fleet_from_dict(fleet_doc)
            workload = workload_from_dict(workload_doc)
            check_fleet_work(fleet, workload, limits or cli_limits(), streaming=sf.sketched)
            spec, _ = build_fleet(fleet, base_dir)  # names, plans: what the run would refuse
            if sf.sketched:  # raises where the point cannot stream (closed loop, gateway, ...)
                use_sketches(FleetSimulateRequest(fleet=fleet, workload=workload, percentiles="sketch"), spec, [])
        except ServecapError as err:
            raise ServecapError(err.field, err.value, f"{err.problem} (sweep point {i}: {_label(values)})") from None
        points.append(
            SweepPoint(
                i,
                values,
                fleet_doc,
                workload_doc,
                sf.seed,
                None if base_dir is None else str(base_dir),
                seeds=tuple(range(sf.seed, sf.seed + sf.seeds)),
                percentiles="sketch" if sf.sketched else sf.percentiles,
            )
        )
    return points


def run_point(point: SweepPoint) -> PointResult:
    """One fleet simulation on ``point.seed`` (a top-level function: executors ship it to
    workers); a streaming run sends its sketches back as a dict."""
    from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate
    from servecap.fleet.file_schema import fleet_from_dict
    from servecap.workload import workload_from_dict

    request = FleetSimulateRequest(
        fleet=fleet_from_dict(point.fleet),
        workload=workload_from_dict(point.workload),
        seed=point.seed,
        percentiles=point.percentiles,
    )
    response, result = fleet_simulate(request, base_dir=None if point.base_dir is None else Path(point.base_dir))
    row = _row(result.summary, response.cost_usd, response.horizon_s, response.usd_per_million_tokens)
    row["outcomes"] = dict(response.outcomes)
    model = ",".join(sorted({p.model for p in request.fleet.pools}))
    sketches = None if result.sketches is None else result.sketches.to_dict()
    return PointResult(
        point.values, row, result.summary, result.columns, model, sketches, response.horizon_s, (point.seed,)
    )


def _row(s: RunSummary, cost_usd: float, horizon_s: float, usd_per_million_tokens: float | None) -> PointRow:
    return {
        "requests": s.num_requests,
        "completed": s.completed,
        "throughput_req_s": s.throughput_req_s,
        "ttft_p50_s": s.ttft_s.p50,
        "ttft_p99_s": s.ttft_s.p99,
        "tpot_p99_s": s.tpot_s.p99,
        "slo_attainment": s.slo_attainment,
        "goodput_req_s": s.goodput_req_s,
        "cost_usd": cost_usd,  # over the run's simulated time: compare $/hour across points
        "usd_per_hour": cost_usd / (horizon_s / 3600.0) if horizon_s > 0 else None,
        "usd_per_million_tokens": usd_per_million_tokens,
    }


def merge_sketches(dicts: list[JsonObject]) -> RunSketches:
    """One RunSketches holding every one of ``dicts``' requests, merged in the given order."""
    out = RunSketches.from_dict(dicts[0])
    for d in dicts[1:]:
        out.merge(RunSketches.from_dict(d))
    return out


def merge_seeds(parts: list[PointResult]) -> PointResult:
    """One point's seeds as one result: the merged sketches' summary (percentiles from the merged
    sketch; counters, durations, simulated time and cost added), so throughput and $/hour are
    those of the seeds run back to back."""
    if len(parts) == 1:
        return parts[0]
    dicts = [p.sketches for p in parts]
    if any(d is None for d in dicts):
        raise ServecapError("seeds", len(parts), "merging seeds needs sketches (a streaming run)")
    sk = merge_sketches([d for d in dicts if d is not None])
    duration = sum(p.summary.duration_s for p in parts)
    horizon = sum(p.horizon_s for p in parts)
    cost = sum(p.row["cost_usd"] for p in parts)
    summary = _engine_figures(sk.total.summary(duration), [p.summary for p in parts])
    tokens = sk.total.prompt_tokens_completed + sk.total.output_tokens_completed
    row = _row(summary, cost, horizon, cost / tokens * 1e6 if tokens else None)
    outcomes: dict[str, int] = {}
    for p in parts:
        for k, v in p.row.get("outcomes", {}).items():
            outcomes[k] = outcomes.get(k, 0) + int(v)
    row["outcomes"] = outcomes
    seeds = tuple(s for p in parts for s in p.seeds)
    row["seeds"] = list(seeds)
    row["ttft_p99_s_by_seed"] = [p.summary.ttft_s.p99 for p in parts]  # the seeds' spread
    first = parts[0]
    return PointResult(first.values, row, summary, first.columns, first.model, sk.to_dict(), horizon, seeds)


def _engine_figures(merged: RunSummary, parts: list[RunSummary]) -> RunSummary:
    """The engines' figures, which the sketches do not hold, combined over the seeds:
    preemptions added, the deepest queue, KV use weighted by duration, the prefix-cache hit
    rate weighted by prompt tokens."""

    def weighted(values: list[float | None], weights: list[float]) -> float | None:
        pairs = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None and w > 0]
        total = sum(w for _, w in pairs)
        return sum(v * w for v, w in pairs) / total if total > 0 else None

    kv = weighted([p.mean_kv_utilization for p in parts], [p.duration_s for p in parts])
    return dataclasses.replace(
        merged,
        preemptions=sum(p.preemptions for p in parts),
        max_queue_depth=max((p.max_queue_depth for p in parts if p.max_queue_depth is not None), default=None),
        mean_kv_utilization=kv,
        prefix_cache_hit_rate=weighted([p.prefix_cache_hit_rate for p in parts], [p.prompt_tokens for p in parts]),
    )


@dataclass(frozen=True, slots=True)
class SweepRun:
    points: list[SweepPoint]
    results: list[PointResult | None]  # None: the point failed (its error in ``errors``)
    errors: dict[int, str]
    executor: str


def run_sweep(points: list[SweepPoint], executor: Executor, *, progress: ProgressFn | None = None) -> SweepRun:
    """Every (point, seed) as one task; each point's seeds merged (:func:`merge_seeds`) in seed
    order. A point fails when one of its seeds does (the first failing seed's error)."""
    tasks = [(i, dataclasses.replace(p, seed=s)) for i, p in enumerate(points) for s in p.all_seeds]
    outcomes = executor.map(run_point, [t for _, t in tasks], progress=progress)
    parts: list[list[PointResult]] = [[] for _ in points]
    errors: dict[int, str] = {}
    for (i, task), o in zip(tasks, outcomes, strict=True):
        p = points[i]
        if not o.ok or o.value is None:
            if p.index not in errors:
                errors[p.index] = (o.error or "failed") if len(p.all_seeds) == 1 else f"seed {task.seed}: {o.error}"
            continue
        parts[i].append(o.value)
    results: list[PointResult | None] = []
    for p, got in zip(points, parts, strict=True):
        if p.index in errors:
            results.append(None)
            continue
        try:
            results.append(merge_seeds(got))
        except (ServecapError, ValueError) as exc:
            errors[p.index] = str(exc)
            results.append(None)
    return SweepRun(points, results, errors, executor.name)


@dataclass(frozen=True, slots=True)
class SweepMerge:
    """Every streamed point's requests pooled: the summary of the merged sketches over the
    points' summed durations, and per pool."""

    points: int
    summary: RunSummary
    by_pool: dict[str, RunSummary]


def merge_points(run: SweepRun) -> SweepMerge | None:
    """The whole sweep's merged summary (None unless every point that ran streamed, or when their
    sketches do not merge: TTFT windows of different lengths)."""
    done = [r for r in run.results if r is not None]
    if not done or any(r.sketches is None for r in done):
        return None
    try:
        sk = merge_sketches([r.sketches for r in done if r.sketches is not None])
    except ValueError:  # points with different ttft_window_s
        return None
    dur = sum(r.summary.duration_s for r in done)
    by_pool = {name: s.summary(dur) for name, s in sorted(sk.groups["pool"].items())}
    return SweepMerge(len(done), sk.total.summary(dur), by_pool)


def _section(doc: JsonObject, name: str) -> JsonObject:
    """The sweep point's ``fleet`` or ``workload`` mapping (an axis may have replaced it whole)."""
    value = doc[name]
    if not isinstance(value, dict):
        raise ServecapError(f"axes.{name}", value, "must be a mapping")
    return value


def _label(values: JsonObject) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
