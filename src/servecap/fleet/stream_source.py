"""An open-loop traffic source that holds a bounded slice of the stream: a streaming run.

:class:`~servecap.sim.traffic.ChunkedSource` (kept with the other sources, compiled) serves
requests from chunks of :class:`~servecap.workload.RequestArrays` (request ``i`` is row ``i`` of
the concatenated chunks) and keeps a chunk only while some of its
requests have not been looked up by the run's accumulator (``ChunkedSource.take``): requests
end a few seconds to minutes after they arrive, so a handful of chunks are alive at any time,
whatever the length of the run.

:func:`draw_chunks` draws an open-loop workload chunk by chunk (arrival times continue from the
last one; lengths and prefixes as :func:`~servecap.workload.generate_arrays` draws them, per
chunk) for the synthetic arrivals (constant, Poisson, gamma, diurnal by thinning, Lewis and
Shedler 1979). Its stream is its own: one spec and one seed give one stream, but not the rows
``generate_arrays`` draws at once (the draws are taken in another order). Traffic mixes,
schedules and traces are drawn whole and served in chunks (their memory then grows with the run).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from servecap.sim.traffic import ChunkedSource as ChunkedSource
from servecap.workload import RequestArrays, WorkloadSpec, generate_arrays
from servecap.workload.arrivals import diurnal_rate
from servecap.workload.dists import sample_tokens
from servecap.workload.popularity import draw_popular
from servecap.workload.spec import ConstantArrival, DiurnalArrival, GammaArrival, PoissonArrival
from servecap.workload.spec_parts import mean_rate_per_s

CHUNK_REQUESTS = 65_536


def chunked(arrays: RequestArrays, size: int = CHUNK_REQUESTS) -> Iterator[RequestArrays]:
    """An already drawn stream in chunks of ``size`` rows (views, name tables kept)."""
    for lo in range(0, len(arrays), size):
        yield arrays.take(np.arange(lo, min(lo + size, len(arrays)), dtype=np.int64))


def streams_in_chunks(spec: WorkloadSpec) -> bool:
    """Whether :func:`draw_chunks` draws ``spec`` chunk by chunk (else it draws it whole)."""
    return (
        spec.tenants is None
        and isinstance(spec.arrival, ConstantArrival | PoissonArrival | GammaArrival | DiurnalArrival)
        and spec.prompt_tokens is not None
        and spec.output_tokens is not None
    )


def expected_horizon_s(spec: WorkloadSpec) -> float | None:
    """When the last request should arrive: ``duration_s``, or ``num_requests`` at the mean rate."""
    if spec.duration_s is not None:
        return spec.duration_s
    rate = mean_rate_per_s(spec.arrival)
    if rate is not None and spec.num_requests is not None:
        return float(spec.num_requests / rate)
    return None


def draw_chunks(spec: WorkloadSpec, rng: np.random.Generator, size: int = CHUNK_REQUESTS) -> Iterator[RequestArrays]:
    """The open-loop stream of ``spec`` in chunks (see the module doc)."""
    if not streams_in_chunks(spec):
        yield from chunked(generate_arrays(spec, rng), size)
        return
    arrival = spec.arrival
    assert isinstance(arrival, ConstantArrival | PoissonArrival | GammaArrival | DiurnalArrival)
    assert spec.prompt_tokens is not None and spec.output_tokens is not None
    left = spec.num_requests
    last = 0.0
    k = 0  # requests drawn so far (constant arrivals: the i-th at i / rate)
    while left is None or left > 0:
        n = size if left is None else min(size, left)
        times = _times(arrival, rng, n, last, k)
        if spec.duration_s is not None:
            times = times[times < spec.duration_s]
        n = len(times)
        if n == 0:
            return
        last = float(times[-1])
        k += n
        prompt = sample_tokens(spec.prompt_tokens, rng, n)
        output = sample_tokens(spec.output_tokens, rng, n)
        group = np.full(n, -1, dtype=np.int64)
        ptok = np.zeros(n, dtype=np.int64)
        if spec.prefix is not None:
            member = rng.uniform(0.0, 1.0, n) < spec.prefix.share
            which = draw_popular(rng, spec.prefix.groups, spec.prefix.zipf_s, n)
            group = np.where(member, which, -1).astype(np.int64)
            ptok = np.where(member, spec.prefix.tokens, 0).astype(np.int64)
            prompt = prompt + ptok
        yield RequestArrays(times, prompt, output, group, ptok)
        if left is not None:
            left -= n


def _times(
    arrival: ConstantArrival | PoissonArrival | GammaArrival | DiurnalArrival,
    rng: np.random.Generator,
    n: int,
    last_s: float,
    k: int,
) -> NDArray[np.float64]:
    """``n`` arrival times after ``last_s`` (the ``k``-th request onwards)."""
    rate = arrival.rate_per_s
    if isinstance(arrival, ConstantArrival):
        return np.arange(k, k + n, dtype=np.float64) / rate
    if isinstance(arrival, PoissonArrival):
        out: NDArray[np.float64] = last_s + np.cumsum(rng.exponential(1.0 / rate, n))
        return out
    if isinstance(arrival, GammaArrival):
        shape = 1.0 / arrival.cv**2
        return last_s + np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), n))
    # diurnal, by thinning: candidates at the peak rate, each kept with probability rate(t) / peak
    r = arrival.peak_to_trough
    peak = rate * (1.0 + (r - 1.0) / (r + 1.0))
    kept: list[NDArray[np.float64]] = []
    count = 0
    while count < n:
        cand = last_s + np.cumsum(rng.exponential(1.0 / peak, n))
        keep = rng.uniform(0.0, 1.0, n) * peak < diurnal_rate(arrival, cand)
        last_s = float(cand[-1])
        kept.append(cand[keep])
        count += int(keep.sum())
    return np.concatenate(kept)[:n]
