"""Open-loop request streams from a :class:`WorkloadSpec` and a generator.

Draw order is fixed (arrival times, then prompt lengths, output lengths, prefix membership,
prefix group), so one spec and one seed give one stream, in ``simulate`` and in ``bench`` alike.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from servecap.errors import ServecapError
from servecap.workload.arrays import RequestArrays
from servecap.workload.arrivals import arrival_times
from servecap.workload.dists import sample_tokens
from servecap.workload.mix import generate_mix
from servecap.workload.popularity import draw_popular
from servecap.workload.request import RequestSpec
from servecap.workload.spec import TraceArrival, WorkloadSpec
from servecap.workload.trace import load_trace

__all__ = ["RequestArrays", "generate_arrays", "generate_requests"]


def generate_arrays(spec: WorkloadSpec, rng: np.random.Generator) -> RequestArrays:
    """The open-loop stream as columns."""
    if spec.tenants is not None:
        return generate_mix(spec, rng)
    if spec.arrival is None:
        raise ServecapError("workload.arrival", None, "closed-loop workloads are driven by ClosedLoopUsers")
    if isinstance(spec.arrival, TraceArrival):
        trace = load_trace(Path(spec.arrival.path))
        arr = trace.arrival_s * spec.arrival.time_scale
        keep = np.ones(len(arr), dtype=bool)
        if spec.duration_s is not None:
            keep &= arr < spec.duration_s
        idx = np.flatnonzero(keep)
        if spec.num_requests is not None:
            idx = idx[: spec.num_requests]
        return RequestArrays(
            arr[idx],
            trace.prompt_tokens[idx],
            trace.output_tokens[idx],
            trace.prefix_group[idx],
            trace.prefix_tokens[idx],
        )
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


def generate_requests(spec: WorkloadSpec, rng: np.random.Generator) -> list[RequestSpec]:
    """The open-loop stream: requests sorted by arrival, ids 0, 1, 2, ... in that order."""
    return generate_arrays(spec, rng).to_requests()
