"""Open-loop request streams from a :class:`WorkloadSpec` and a generator.

Draw order is fixed (arrival times, then prompt lengths, output lengths, prefix membership,
prefix group), so one spec and one seed give one stream, in ``simulate`` and in ``bench`` alike.
"""

from __future__ import annotations

import numpy as np

from servecap.errors import ServecapError
from servecap.workload.agentic_spec import AgenticArrival
from servecap.workload.arrays import RequestArrays
from servecap.workload.arrivals import arrival_times
from servecap.workload.dists import sample_tokens
from servecap.workload.mix import generate_mix
from servecap.workload.popularity import draw_popular
from servecap.workload.request import RequestSpec
from servecap.workload.samples import trace_path
from servecap.workload.sessions import SessionGraph
from servecap.workload.spec import MAX_DURATION_S, TraceArrival, WorkloadSpec
from servecap.workload.trace import load_trace

__all__ = ["RequestArrays", "generate_arrays", "generate_requests"]


def generate_arrays(spec: WorkloadSpec, rng: np.random.Generator) -> RequestArrays:
    """The open-loop stream as columns."""
    if spec.tenants is not None:
        return generate_mix(spec, rng)
    if spec.arrival is None:
        raise ServecapError("workload.arrival", None, "closed-loop workloads are driven by ClosedLoopUsers")
    if isinstance(spec.arrival, TraceArrival):
        if _is_sessions(spec.arrival):
            raise ServecapError(
                "workload.arrival.format",
                "sessions",
                "a sessions trace is replayed closed loop (each request after its parents): simulate, fleet "
                "simulate and fleet plan replay it; this command takes open-loop traces only",
            )
        return trace_arrays(spec.arrival, num_requests=spec.num_requests, duration_s=spec.duration_s)
    if isinstance(spec.arrival, AgenticArrival):
        from servecap.workload.agentic import generate_agentic

        arrays = generate_agentic(spec.arrival, rng)
        keep = np.ones(len(arrays), dtype=bool)
        if spec.duration_s is not None:
            keep &= arrays.arrival_s < spec.duration_s
        idx = np.flatnonzero(keep)[: spec.num_requests]
        return arrays if len(idx) == len(arrays) else arrays.take(idx)
    assert spec.prompt_tokens is not None and spec.output_tokens is not None
    times = arrival_times(spec.arrival, rng, num_requests=spec.num_requests, duration_s=spec.duration_s)
    n = len(times)
    prompt = sample_tokens(spec.prompt_tokens, rng, n)
    output = sample_tokens(spec.output_tokens, rng, n)
    group = np.full(n, -1, dtype=np.int64)
    ptok = np.zeros(n, dtype=np.int64)
    if spec.prefix is not None:
        member = rng.uniform(0.0, 1.0, n) < spec.prefix.share
        which = draw_popular(rng, spec.prefix.groups, spec.prefix.zipf_s, n)
        group = np.where(member, which, -1).astype(np.int64)
        ptok = np.where(member, spec.prefix.tokens, 0).astype(np.int64)
        prompt = prompt + ptok  # prompt_tokens in the spec counts the tokens after the prefix
    return RequestArrays(times.astype(np.float64), prompt, output, group, ptok)


def trace_arrays(
    arrival: TraceArrival, *, num_requests: int | None = None, duration_s: float | None = None
) -> RequestArrays:
    """A trace's requests: the window ``start_s <= t < end_s`` of its clock shifted to 0, times
    multiplied by ``time_scale``, then cut at ``duration_s`` (scaled time) and ``num_requests``."""
    trace = load_trace(trace_path(arrival.path), arrival.format, trace_block_tokens=arrival.trace_block_tokens)
    t = trace.arrival_s
    after_start = t >= arrival.start_s
    in_window = after_start if arrival.end_s is None else after_start & (t < arrival.end_s)
    arr = (t - arrival.start_s) * arrival.time_scale
    keep = in_window if duration_s is None else in_window & (arr < duration_s)
    idx = np.flatnonzero(keep)
    if num_requests is not None:
        idx = idx[:num_requests]
    if not len(idx):  # named by the bound that emptied it
        field: str
        value: float | None
        if not after_start.any():
            field, value = "start_s", arrival.start_s
        elif not in_window.any():
            field, value = "end_s", arrival.end_s
        else:
            field, value = "duration_s", duration_s
        window = f"[{arrival.start_s:g}, {'end' if arrival.end_s is None else format(arrival.end_s, 'g')}) s"
        raise ServecapError(
            "workload." + (field if field == "duration_s" else "arrival." + field),
            value,
            f"no request of {trace_path(arrival.path).name} ({len(trace)} requests from {float(t[0]):g} to "
            f"{float(t[-1]):g} s) falls in the window {window}"
            + ("" if field != "duration_s" else f" before {duration_s:g} s of scaled time"),
        )
    last_s = float(arr[idx[-1]])
    if last_s > MAX_DURATION_S:
        raise ServecapError(
            "workload.arrival.time_scale",
            arrival.time_scale,
            f"the trace's last request would arrive at {last_s:.3g} s, more than a year ({MAX_DURATION_S:,.0f} s): "
            "a smaller time scale or a window",
        )
    full = RequestArrays(
        arr,
        trace.prompt_tokens,
        trace.output_tokens,
        trace.prefix_group,
        trace.prefix_tokens,
        hash_ids=trace.hash_ids,
        hash_offsets=trace.hash_offsets,
        trace_block_tokens=trace.trace_block_tokens,
    )
    return full if len(idx) == len(full) else full.take(idx)


def is_session_trace(spec: WorkloadSpec) -> bool:
    """Whether the workload replays a sessions trace (``format: auto`` reads the file's first line)."""
    return isinstance(spec.arrival, TraceArrival) and _is_sessions(spec.arrival)


def _is_sessions(arrival: TraceArrival) -> bool:
    if arrival.format == "auto":
        from servecap.workload.sessions import starts_as_sessions

        return starts_as_sessions(trace_path(arrival.path))
    return arrival.format == "sessions"


def session_graph(spec: WorkloadSpec) -> SessionGraph | None:
    """The sessions trace a workload replays (its window and time scale applied), or None when
    it is not one."""
    arrival = spec.arrival
    if not isinstance(arrival, TraceArrival) or not _is_sessions(arrival):
        return None
    from servecap.workload.sessions import load_sessions

    graph = load_sessions(trace_path(arrival.path), trace_block_tokens=arrival.trace_block_tokens)
    graph = graph.scaled(arrival.time_scale, arrival.start_s, arrival.end_s)
    if not len(graph):
        raise ServecapError("workload.arrival.start_s", arrival.start_s, "no session starts in the window")
    if max(graph.arrival_s) > MAX_DURATION_S:
        raise ServecapError(
            "workload.arrival.time_scale", arrival.time_scale, "sessions would start more than a year in"
        )
    return graph


def generate_requests(spec: WorkloadSpec, rng: np.random.Generator) -> list[RequestSpec]:
    """The open-loop stream: requests sorted by arrival, ids 0, 1, 2, ... in that order."""
    return generate_arrays(spec, rng).to_requests()
