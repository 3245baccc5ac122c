"""The sweep use case (``servecap sweep SWEEP.yaml``): a typed request in, the run and a typed
response (``--json``) out.

:class:`SweepRequest` names the sweep file and where the points run (its defaults written once
here; the CLI's options read them); :func:`run_sweep_request` loads the file, applies the
overrides, validates every point and runs them (:mod:`servecap.app.fleet_sweep`);
:func:`sweep_response` is the answer: one row per point and, for a streamed sweep, every point
merged. There is no HTTP endpoint: a sweep reads files by path next to the sweep file and runs
on a process pool or a Ray cluster, which a server should not be asked to start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from servecap.app.fleet_sweep import (
    SweepFile,
    SweepRun,
    load_sweep_file,
    merge_points,
    run_sweep,
    sweep_points,
    with_overrides,
)
from servecap.files import dumps_json
from servecap.json_object import JsonObject
from servecap.progress import ProgressFn
from servecap.results import summary_to_json_dict

SweepExecutor = Literal["serial", "process", "ray"]


class SweepRequest(BaseModel):
    """A sweep file and where its points run (``seeds``/``sketch``: the file's, overridden)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sweep_file: Path
    executor: SweepExecutor = "process"
    workers: int | None = Field(default=None, ge=1)
    ray_address: str | None = None
    seeds: int | None = Field(default=None, ge=1)
    sketch: bool = False


class SweepPointOut(BaseModel):
    """One point: its axes' values, its error (None when it ran) and, when it ran, its figures
    (``seeds`` and ``ttft_p99_s_by_seed`` only for a point of several seeds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int
    values: JsonObject
    error: str | None
    requests: int | None = None
    completed: int | None = None
    throughput_req_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    slo_attainment: float | None = None
    goodput_req_s: float | None = None
    cost_usd: float | None = None
    usd_per_hour: float | None = None
    usd_per_million_tokens: float | None = None
    outcomes: dict[str, int] | None = None
    seeds: list[int] | None = None
    ttft_p99_s_by_seed: list[float | None] | None = None


class SweepMergedOut(BaseModel):
    """Every streamed point's requests pooled: the summary over the points' summed durations,
    and per pool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    points: int
    summary: JsonObject
    by_pool: dict[str, JsonObject]


class SweepResponse(BaseModel):
    """``servecap sweep --json``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    executor: str
    points: list[SweepPointOut]
    merged: SweepMergedOut | None

    def to_json(self) -> str:
        """The JSON the CLI prints: a point's absent figures left out, non-finite numbers null."""
        return dumps_json(self.model_dump(mode="json", exclude_unset=True))


def load_request_file(request: SweepRequest) -> SweepFile:
    """The sweep file with the request's ``seeds`` and ``sketch`` in place of its own."""
    return with_overrides(
        load_sweep_file(request.sweep_file), seeds=request.seeds, percentiles="sketch" if request.sketch else None
    )


def run_sweep_request(request: SweepRequest, sf: SweepFile, progress: ProgressFn | None = None) -> SweepRun:
    """Every point of ``sf`` (the request's file, :func:`load_request_file`) validated, then run
    on the request's executor."""
    from servecap.distributed import make_executor

    # the executor first: a malformed or unreachable Ray address, an absurd worker count, is
    # refused before the points are built
    ex = make_executor(request.executor, workers=request.workers, ray_address=request.ray_address)
    try:
        points = sweep_points(sf, request.sweep_file.resolve().parent)
        return run_sweep(points, ex, progress=progress)
    finally:
        ex.close()


def sweep_response(run: SweepRun) -> SweepResponse:
    """The answer of a sweep run: one row per point, the merged summary of a streamed sweep."""
    points = [
        SweepPointOut(index=p.index, values=p.values, error=run.errors.get(p.index), **({} if r is None else r.row))
        for p, r in zip(run.points, run.results, strict=True)
    ]
    m = merge_points(run)
    merged = None
    if m is not None:
        merged = SweepMergedOut(
            points=m.points,
            summary=summary_to_json_dict(m.summary),
            by_pool={k: summary_to_json_dict(v) for k, v in m.by_pool.items()},
        )
    return SweepResponse(executor=run.executor, points=points, merged=merged)
