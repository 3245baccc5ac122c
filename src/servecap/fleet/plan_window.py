"""The windows the fleet planner simulates instead of a whole day.

**Peak window** (sizes the replica count). The traffic held steady at its peak rate (each
tenant at its rate at the moment the total peaks), for ``warmup_s + measure_s``; only requests
arriving after the warm-up are scored.

- *Warm-up*: an empty fleet fills its batches within a few answer times (Little's law: the
  requests in a replica reach ``rate x E2E`` after about one E2E), so the first
  ``max(30 s, 3 x the closed-form E2E)`` are discarded; a fleet that cannot keep up never
  settles, and its queue (and p99) only grows, so it fails anyway.
- *Length*: a percentile estimate is as good as the number of samples beyond it. A q-th
  percentile target of a class whose share of traffic is ``s`` needs ``tail / (1 - q/100) / s``
  requests for ``tail`` samples in its tail (the count beyond the percentile is binomial: with
  ``tail = 50`` its standard deviation is ``sqrt(50) ~ 7``, 14%; by hand a p99 target of a class
  with 15% of the traffic needs 50 / 0.01 / 0.15 = 33,334 requests). ``measure_s`` = that many
  requests at the peak rate, at least ``min_measure_s`` (30 s of arrivals at the peak).

**Ramp window** (sizes the autoscaler): the ``window_s`` of the day where the rate rises most,
``argmax_t rate(t + window_s) - rate(t)`` on a one-minute grid; the fleet starts it with the
replicas the scale-ahead floor gives at its start, ready, and must meet the SLOs through it.

The windows are workloads of their own: each arrival is replaced by a piecewise-constant
schedule sampled from the original curve every ``step_s`` (constant for the peak window), so the
tenants, classes, lengths and prefixes stay those of the file.

**Trace window** (a replayed trace, ``arrival: {kind: trace}``): the trace itself, as its window,
time scale and request cut keep it, is the window: every request is scored (no warm-up: a
replay starts as the trace did, with an empty fleet and a cold prefix cache), and its rate is
the trace's busiest minute (the most arrivals in any 60 s of its scaled clock, over 60 s; over
its span when shorter). A trace has no rate curve to scale: its rate changes with its
``time_scale``.

A **sessions trace** (parent/child edges, tool gaps: :mod:`servecap.workload.sessions`) is
replayed closed loop in every simulation (a child after its parents end), so its issue times
depend on the fleet; the window reads its *nominal* times instead (:func:`session_arrays`: a
root at its arrival, a child ``delay_s`` after the latest of its parents' nominal times, i.e.
as if every request were answered at once), the earliest each request can be issued: the
busiest minute over them is an upper bound on the rate any fleet sees.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from servecap.errors import ServecapError
from servecap.workload import RequestArrays, WorkloadSpec, generate_arrays, workload_from_dict, workload_rate
from servecap.workload.agentic_spec import AgenticArrival
from servecap.workload.generate import session_graph
from servecap.workload.schedule_spec import ScheduleArrival

DAY_S = 86_400.0
RateFn = Callable[[NDArray[np.float64]], NDArray[np.float64]]


@dataclass(frozen=True, slots=True)
class Window:
    workload: WorkloadSpec
    start_s: float  # where the window sits in the original day
    duration_s: float
    warmup_s: float  # requests arriving before this are not scored
    rate_start_req_s: float
    rate_end_req_s: float
    peak_rate_req_s: float


def _arrival_kinds(spec: WorkloadSpec) -> list[Any]:
    arrivals = [spec.arrival] + [t.arrival for t in spec.tenants or []]
    return [a for a in arrivals if a is not None]


def check_open_loop(spec: WorkloadSpec) -> None:
    if spec.users is not None:
        raise ServecapError("traffic.workload.users", spec.users.count, "the fleet planner takes open-loop traffic")
    if is_trace(spec):
        return
    for a in _arrival_kinds(spec):
        if a.kind == "trace":
            raise ServecapError(
                "traffic.workload.tenants.arrival", a.kind, "a trace is the whole traffic: give it as the one arrival"
            )


def is_trace(spec: WorkloadSpec) -> bool:
    """A replayed trace as the whole traffic (the planner scores the trace itself)."""
    return spec.tenants is None and spec.arrival is not None and spec.arrival.kind == "trace"


def busiest_rate(arrival_s: NDArray[np.float64], minute_s: float = 60.0) -> float:
    """The most arrivals in any ``minute_s`` of ``arrival_s`` (sorted), over ``minute_s``; over the
    span (first to last arrival) when it is shorter. By hand: arrivals at 0, 1, 2, 100 s: 3 in
    [0, 60), so 3 / 60 = 0.05 req/s; at 0, 5, 10 s (span 10 s): 3 / 10 = 0.3 req/s."""
    t = np.asarray(arrival_s, dtype=np.float64)
    if len(t) < 2:
        raise ServecapError("traffic.workload.arrival", len(t), "a trace to plan for needs at least 2 requests")
    span = float(t[-1] - t[0])
    if not span > 0:
        raise ServecapError("traffic.workload.arrival", span, "the trace's requests all arrive at once (span 0 s)")
    if span <= minute_s:
        return len(t) / span
    ends = np.searchsorted(t, t + minute_s, side="left")
    return float(np.max(ends - np.arange(len(t)))) / minute_s


def session_arrays(spec: WorkloadSpec) -> RequestArrays | None:
    """A sessions trace's requests as columns at their nominal times (module doc), in the order
    of those times (None: ``spec`` replays no sessions trace). For the window's rate, lengths
    and scoring only: the simulations replay the graph itself
    (:func:`servecap.workload.generate.is_session_trace`)."""
    graph = session_graph(spec)
    if graph is None:
        return None
    nominal = [0.0] * len(graph)
    for i, parents in enumerate(graph.parents):  # every parent comes before its children
        nominal[i] = max(nominal[p] for p in parents) + graph.delay_s[i] if parents else graph.arrival_s[i]
    order = np.argsort(np.asarray(nominal), kind="stable")
    n = len(graph)
    return RequestArrays(
        np.asarray(nominal, dtype=np.float64)[order],
        np.asarray(graph.prompt_tokens, dtype=np.int64)[order],
        np.asarray(graph.output_tokens, dtype=np.int64)[order],
        np.full(n, -1, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
    )


def window_arrays(spec: WorkloadSpec, rng: np.random.Generator) -> RequestArrays:
    """The window's requests as columns: drawn (:func:`generate_arrays`), or a sessions trace's
    at their nominal times (:func:`session_arrays`)."""
    nominal = session_arrays(spec)
    return nominal if nominal is not None else generate_arrays(spec, rng)


def trace_window(spec: WorkloadSpec) -> Window:
    """A replayed trace as the planner's window (see the module): all of it scored."""
    arrays = window_arrays(spec, np.random.default_rng(0))  # a trace draws nothing
    peak = busiest_rate(arrays.arrival_s)
    duration = float(arrays.arrival_s[-1]) + 1e-9
    return Window(spec, 0.0, duration, 0.0, peak, peak, peak)


def scaled(spec: WorkloadSpec, factor: float) -> WorkloadSpec:
    """Every arrival's rate times ``factor`` (a schedule's ``scale``, a process's ``rate_per_s``)."""
    if not factor > 0 or not math.isfinite(factor):
        raise ServecapError("traffic", factor, "the rate scale must be a positive number")

    def one(a: Any) -> Any:
        if a is None:
            return None
        if isinstance(a, ScheduleArrival):
            return a.model_copy(update={"scale": a.scale * factor})
        if isinstance(a, AgenticArrival):
            return a.model_copy(update={"session_rate_per_s": a.session_rate_per_s * factor})
        return a.model_copy(update={"rate_per_s": a.rate_per_s * factor})

    tenants = None
    if spec.tenants is not None:
        tenants = [t.model_copy(update={"arrival": one(t.arrival)}) for t in spec.tenants]
    return spec.model_copy(update={"arrival": one(spec.arrival), "tenants": tenants})


def rate_fn(spec: WorkloadSpec) -> RateFn:
    return lambda t: workload_rate(spec, np.asarray(t, dtype=np.float64))


def grid(horizon_s: float, step_s: float = 60.0) -> NDArray[np.float64]:
    return np.arange(0.0, horizon_s, step_s)


def peak_of(spec: WorkloadSpec, horizon_s: float = DAY_S) -> tuple[float, float]:
    """``(time, rate)`` of the highest rate on a 10-s grid over the horizon."""
    t = grid(horizon_s, 10.0)
    r = workload_rate(spec, t)
    i = int(np.argmax(r))
    return float(t[i]), float(r[i])


def steepest_ramp(rate: RateFn, horizon_s: float, window_s: float, step_s: float = 60.0) -> float:
    """The start of the ``window_s`` with the largest rise ``rate(t + window_s) - rate(t)``."""
    t = grid(max(step_s, horizon_s - window_s + step_s), step_s)
    rise = rate(t + window_s) - rate(t)
    return float(t[int(np.argmax(rise))])


def _tenant_rates(spec: WorkloadSpec, t: NDArray[np.float64]) -> list[tuple[int | None, NDArray[np.float64]]]:
    """``(tenant index or None for the shared arrival, rate at t)`` for every arrival."""
    if spec.tenants is None:
        return [(None, workload_rate(spec, t))]
    out: list[tuple[int | None, NDArray[np.float64]]] = []
    shared = [x for x in spec.tenants if x.arrival is None]
    if shared:
        assert spec.arrival is not None
        from servecap.workload import arrival_rate

        out.append((None, arrival_rate(spec.arrival, t)))
    for i, x in enumerate(spec.tenants):
        if x.arrival is not None:
            out.append((i, workload_rate(spec, t, tenant=x.name)))
    return out


def _schedule(times: NDArray[np.float64], rates: NDArray[np.float64]) -> dict[str, Any]:
    steps = [{"start_s": float(s), "rate_per_s": max(0.0, float(r))} for s, r in zip(times, rates, strict=True)]
    return {"kind": "schedule", "rate": {"kind": "piecewise", "steps": steps}}


def window_workload(
    spec: WorkloadSpec, start_s: float, duration_s: float, *, steady: bool, step_s: float = 30.0
) -> WorkloadSpec:
    """``spec`` from ``start_s`` for ``duration_s``: each arrival a piecewise schedule sampled
    every ``step_s`` (``steady``: held at its rate at ``start_s``)."""
    times = np.array([0.0]) if steady else grid(duration_s, step_s)
    raw = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw.pop("num_requests", None)
    raw["duration_s"] = duration_s
    if isinstance(spec.arrival, AgenticArrival) and spec.tenants is None:
        # agent sessions at a steady rate (no curve to follow): enough sessions to fill the window
        a = spec.arrival
        raw["arrival"]["sessions"] = max(1, min(1_000_000, math.ceil(a.session_rate_per_s * duration_s)))
        return workload_from_dict(raw)
    for who, rates in _tenant_rates(spec, start_s + times + (0.0 if steady else step_s / 2)):
        sched = _schedule(times, rates)
        if who is None:
            raw["arrival"] = sched
        else:
            raw["tenants"][who]["arrival"] = sched
    return workload_from_dict(raw)


def class_shares(spec: WorkloadSpec, at_s: float) -> dict[tuple[str, str], float]:
    """Each (tenant, class)'s share of the traffic at ``at_s`` (one pair ``("", "")`` without tenants)."""
    if spec.tenants is None:
        return {("", ""): 1.0}
    t = np.array([at_s])
    total = float(workload_rate(spec, t)[0]) or 1.0
    out: dict[tuple[str, str], float] = {}
    for x in spec.tenants:
        tr = float(workload_rate(spec, t, tenant=x.name)[0])
        cs = sum(c.share for c in x.classes)
        for c in x.classes:
            out[(x.name, c.name)] = tr / total * c.share / cs
    return out


def measure_requests(
    shares: dict[tuple[str, str], float], percentile_by_pair: dict[tuple[str, str], float], tail: int
) -> int:
    """Requests to score so every class's strictest percentile has ``tail`` samples beyond it."""
    need = 0.0
    for pair, q in percentile_by_pair.items():
        s = shares.get(pair, 0.0)
        if s > 0 and q < 100:
            need = max(need, tail / (1 - q / 100) / s)
    return math.ceil(need)


def peak_window(
    spec: WorkloadSpec,
    *,
    horizon_s: float,
    e2e_s: float,
    percentile_by_pair: dict[tuple[str, str], float],
    tail: int = 50,
    min_measure_s: float = 30.0,
    max_requests: int = 200_000,
) -> Window:
    """The steady peak window (see the module)."""
    t_peak, peak = peak_of(spec, horizon_s)
    if not peak > 0:
        raise ServecapError("traffic", peak, "the peak rate must be > 0 requests/s")
    warmup = max(30.0, 3.0 * e2e_s)
    n = min(max_requests, measure_requests(class_shares(spec, t_peak), percentile_by_pair, tail))
    measure = max(min_measure_s, n / peak)
    w = window_workload(spec, t_peak, warmup + measure, steady=True)
    return Window(w, t_peak, warmup + measure, warmup, peak, peak, peak)


def ramp_window(spec: WorkloadSpec, *, horizon_s: float, window_s: float, warmup_s: float = 0.0) -> Window:
    rate = rate_fn(spec)
    t0 = steepest_ramp(rate, horizon_s, window_s)
    w = window_workload(spec, t0, window_s, steady=False)
    r = rate(np.array([t0, t0 + window_s]))
    return Window(w, t0, window_s, warmup_s, float(r[0]), float(r[1]), float(max(r)))
