"""An open-loop traffic source that holds a bounded slice of the stream: a streaming run.

:class:`ChunkedSource` serves requests from chunks of :class:`~servecap.workload.RequestArrays`
(request ``i`` is row ``i`` of the concatenated chunks) and keeps a chunk only while some of its
requests have not been looked up by the run's accumulator (:meth:`ChunkedSource.take`): requests
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
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from servecap.sim.server import ArrivingRequest
from servecap.sim.traffic import OpenLoopRequest, TrafficSource
from servecap.workload import RequestArrays, WorkloadSpec, generate_arrays
from servecap.workload.arrivals import diurnal_rate
from servecap.workload.dists import sample_tokens
from servecap.workload.popularity import draw_popular
from servecap.workload.spec import ConstantArrival, DiurnalArrival, GammaArrival, PoissonArrival

CHUNK_REQUESTS = 65_536
_INF = float("inf")


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
    rate = getattr(spec.arrival, "rate_per_s", None)
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


@dataclass(slots=True)
class _Chunk:
    start: int  # the id of its first request
    arrays: RequestArrays
    left: int  # requests not yet taken by the accumulator


class ChunkedSource(TrafficSource):
    """Open-loop requests from chunks; ``take(ids)`` returns their columns and lets go of
    chunks whose requests were all taken."""

    def __init__(self, chunks: Iterator[RequestArrays], expected_requests: int = 0) -> None:
        self._chunks = chunks
        self._expected = expected_requests
        self._live: list[_Chunk] = []
        self.tenant_names: tuple[str, ...] = ()
        self.class_names: tuple[str, ...] = ()
        self.issued = 0  # requests handed out so far
        self.last_arrival_s = 0.0
        self._times: list[float] = [_INF]
        self._i = 0
        self._base = 0  # the id of the current chunk's first request
        self._load()

    def _load(self) -> None:
        a = next(self._chunks, None)
        while a is not None and len(a) == 0:
            a = next(self._chunks, None)
        if a is None:
            self._times = [_INF]
            self._i = 0
            return
        if not self._live:
            self.tenant_names, self.class_names = a.tenant_names, a.class_names
        self._base = self.issued
        self._live.append(_Chunk(self._base, a, len(a)))
        self._arrival: list[float] = a.arrival_s.tolist()
        self._prompt: list[int] = a.prompt_tokens.tolist()
        self._output: list[int] = a.output_tokens.tolist()
        self._group: list[int] = a.prefix_group.tolist()
        self._ptok: list[int] = a.prefix_tokens.tolist()
        sessions: list[int] = a.session_id.tolist()
        self._session: list[int] | None = sessions if any(s >= 0 for s in sessions) else None
        self._times = [*self._arrival, _INF]
        self._i = 0

    def next_arrival_s(self) -> float:
        return self._times[self._i]

    def pop(self) -> ArrivingRequest:
        i = self._i
        self._i = i + 1
        g = self._group[i]
        s = -1 if self._session is None else self._session[i]
        t = self._arrival[i]
        req = OpenLoopRequest(
            self._base + i,
            t,
            self._prompt[i],
            self._output[i],
            None if g < 0 else g,
            0 if g < 0 else self._ptok[i],
            None if s < 0 else s,
        )
        self.issued += 1
        self.last_arrival_s = t
        if self._i == len(self._arrival):
            self._load()
        return req

    def on_finished(self, request_id: int, t_s: float) -> None:
        return None

    def expected_requests(self) -> int:
        return self._expected

    @property
    def live_chunks(self) -> int:
        return len(self._live)

    def take(self, ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], RequestArrays]:
        """The rows of requests ``ids`` (each taken once), as ``(positions, rows)``: row ``j``
        of ``rows`` is request ``ids[positions[j]]``. Chunks all of whose requests were taken,
        are let go."""
        pos_parts: list[NDArray[np.int64]] = []
        row_parts: list[RequestArrays] = []
        for c in self._live:
            rel = ids - c.start
            mine = np.flatnonzero((rel >= 0) & (rel < len(c.arrays)))
            if mine.size:
                pos_parts.append(mine)
                row_parts.append(c.arrays.take(rel[mine]))
                c.left -= int(mine.size)
        self._live = [c for c in self._live if c.left > 0]  # all taken: all issued long ago
        if not row_parts:
            empty = np.zeros(0, dtype=np.int64)
            return empty, RequestArrays(np.zeros(0), empty, empty, empty, empty)
        if len(row_parts) == 1:
            return pos_parts[0], row_parts[0]
        return np.concatenate(pos_parts), _concat(row_parts)


def _concat(parts: list[RequestArrays]) -> RequestArrays:
    first = parts[0]
    return RequestArrays(
        np.concatenate([p.arrival_s for p in parts]),
        np.concatenate([p.prompt_tokens for p in parts]),
        np.concatenate([p.output_tokens for p in parts]),
        np.concatenate([p.prefix_group for p in parts]),
        np.concatenate([p.prefix_tokens for p in parts]),
        tenant=np.concatenate([p.tenant for p in parts]),
        request_class=np.concatenate([p.request_class for p in parts]),
        tenant_names=first.tenant_names,
        class_names=first.class_names,
    )
