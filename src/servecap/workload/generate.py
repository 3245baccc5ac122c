"""Open-loop request streams from a :class:`WorkloadSpec` and a generator.

Draw order is fixed (arrival times, then prompt lengths, output lengths, prefix membership,
prefix group), so one spec and one seed give one stream, in ``simulate`` and in ``bench`` alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from servecap.errors import ServecapError
from servecap.workload.arrivals import arrival_times
from servecap.workload.dists import sample_tokens
from servecap.workload.request import RequestSpec
from servecap.workload.spec import TraceArrival, WorkloadSpec
from servecap.workload.trace import load_trace


@dataclass(frozen=True, slots=True)
class RequestArrays:
    """An open-loop stream as columns (what the simulator reads; one row per request)."""

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    prefix_group: NDArray[np.int64]  # -1: none
    prefix_tokens: NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.arrival_s)

    def to_requests(self) -> list[RequestSpec]:
        groups = self.prefix_group.tolist()
        return [
            RequestSpec(
                request_id=i,
                arrival_s=a,
                prompt_tokens=p,
                output_tokens=o,
                prefix_group=None if g < 0 else g,
                prefix_tokens=t if g >= 0 else 0,
            )
            for i, (a, p, o, g, t) in enumerate(
                zip(
                    self.arrival_s.tolist(),
                    self.prompt_tokens.tolist(),
                    self.output_tokens.tolist(),
                    groups,
                    self.prefix_tokens.tolist(),
                    strict=True,
                )
            )
        ]


def generate_arrays(spec: WorkloadSpec, rng: np.random.Generator) -> RequestArrays:
    """The open-loop stream as columns."""
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
        which = rng.integers(0, spec.prefix.groups, n)
        group = np.where(member, which, -1).astype(np.int64)
        ptok = np.where(member, spec.prefix.tokens, 0).astype(np.int64)
        prompt = prompt + ptok  # prompt_tokens in the spec counts the tokens after the prefix
    return RequestArrays(times.astype(np.float64), prompt, output, group, ptok)


def generate_requests(spec: WorkloadSpec, rng: np.random.Generator) -> list[RequestSpec]:
    """The open-loop stream: requests sorted by arrival, ids 0, 1, 2, ... in that order."""
    return generate_arrays(spec, rng).to_requests()
