"""Open-loop streams of tenants and classes (``tenants:`` in the workload file).

Draw order is fixed, so one spec and one seed give one stream: for each arrival stream (the
workload's shared ``arrival`` first, then each tenant with its own, in file order) its times and
the (tenant, class) of each request; then, class by class in file order, prompt lengths, output
lengths, prefix membership and group, and repeats; then, tenant by tenant, session ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from servecap.errors import ServecapError
from servecap.workload.agentic_spec import AgenticArrival
from servecap.workload.arrays import RequestArrays
from servecap.workload.arrivals import arrival_times
from servecap.workload.dists import AnyDist, sample_tokens
from servecap.workload.mix_spec import ClassSpec, TenantSpec
from servecap.workload.popularity import draw_popular
from servecap.workload.spec import Arrival, PrefixSpec, TraceArrival, WorkloadSpec


@dataclass(frozen=True, slots=True)
class TrafficClass:
    """One (tenant, class) pair: its priority and SLO targets ``(metric, percentile, max_s)``."""

    tenant: str
    name: str
    priority: int
    slo_targets: tuple[tuple[str, float, float], ...]


def traffic_classes(spec: WorkloadSpec) -> tuple[TrafficClass, ...]:
    """The workload's (tenant, class) pairs in file order (none without ``tenants``)."""
    return tuple(
        TrafficClass(
            tenant=t.name,
            name=c.name,
            priority=t.priority if c.priority is None else c.priority,
            slo_targets=() if c.slo is None else c.slo.targets(),
        )
        for t in spec.tenants or []
        for c in t.classes
    )


def generate_mix(spec: WorkloadSpec, rng: np.random.Generator) -> RequestArrays:
    """The stream of a workload with ``tenants``, sorted by arrival."""
    assert spec.tenants is not None
    tenants = spec.tenants
    pairs = [(ti, ci) for ti, t in enumerate(tenants) for ci in range(len(t.classes))]
    times, pair = _arrivals(spec, tenants, pairs, rng)
    n = len(times)
    prompt = np.zeros(n, dtype=np.int64)
    output = np.zeros(n, dtype=np.int64)
    group = np.full(n, -1, dtype=np.int64)
    ptok = np.zeros(n, dtype=np.int64)
    dup = np.full(n, -1, dtype=np.int64)
    prio = np.zeros(n, dtype=np.int64)
    group_off = spec.prefix.groups if spec.prefix is not None else 0  # 0..: the shared top-level groups
    dup_off = 0
    class_names: list[str] = []
    class_code = np.zeros(len(pairs), dtype=np.int64)
    for k, (ti, ci) in enumerate(pairs):
        t, c = tenants[ti], tenants[ti].classes[ci]
        if c.name not in class_names:
            class_names.append(c.name)
        class_code[k] = class_names.index(c.name)
        rows = np.flatnonzero(pair == k)
        prefix, off = (spec.prefix, 0) if c.prefix is None else (c.prefix, group_off)
        if c.prefix is not None:
            group_off += c.prefix.groups
        cols = _draw_class(spec, c, prefix, off, rng, len(rows))
        p, o, g, pt = cols
        if c.repeats is not None and len(rows) > 0:
            rep = rng.uniform(0.0, 1.0, len(rows)) < c.repeats.rate
            q = draw_popular(rng, c.repeats.groups, c.repeats.zipf_s, len(rows))
            used, inv = np.unique(q[rep], return_inverse=True)
            qp, qo, qg, qt = _draw_class(spec, c, prefix, off, rng, len(used))
            p[rep], o[rep], g[rep], pt[rep] = qp[inv], qo[inv], qg[inv], qt[inv]
            d = np.full(len(rows), -1, dtype=np.int64)
            d[rep] = dup_off + q[rep]
            dup[rows] = d
            dup_off += c.repeats.groups
        prompt[rows], output[rows], group[rows], ptok[rows] = p + pt, o, g, pt
        prio[rows] = t.priority if c.priority is None else c.priority
    tenant_of_pair = np.array([ti for ti, _ in pairs], dtype=np.int64)
    tenant = tenant_of_pair[pair]
    session = np.full(n, -1, dtype=np.int64)
    session_off = 0
    for ti, t in enumerate(tenants):
        if t.sessions is None:
            continue
        rows = np.flatnonzero(tenant == ti)
        session[rows] = session_off + draw_popular(rng, t.sessions.count, t.sessions.zipf_s, len(rows))
        session_off += t.sessions.count
    return RequestArrays(
        times,
        prompt,
        output,
        group,
        ptok,
        tenant,
        class_code[pair],
        session,
        dup,
        prio,
        tuple(t.name for t in tenants),
        tuple(class_names),
    )


def _arrivals(
    spec: WorkloadSpec, tenants: list[TenantSpec], pairs: list[tuple[int, int]], rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Arrival times, sorted, and the index into ``pairs`` of each request."""
    streams: list[tuple[Arrival | None, list[int], NDArray[np.float64]]] = []
    shared = [k for k, (ti, _) in enumerate(pairs) if tenants[ti].arrival is None]
    if shared:
        total = sum(_share(tenants[ti]) for ti in {pairs[k][0] for k in shared})
        shares = [
            _share(tenants[pairs[k][0]]) / total * _class_weight(tenants[pairs[k][0]], pairs[k][1]) for k in shared
        ]
        streams.append((spec.arrival, shared, np.array(shares)))
    for ti, t in enumerate(tenants):
        if t.arrival is not None:
            ks = [k for k, (tj, _) in enumerate(pairs) if tj == ti]
            streams.append((t.arrival, ks, np.array([_class_weight(t, pairs[k][1]) for k in ks])))
    all_t: list[NDArray[np.float64]] = []
    all_k: list[NDArray[np.int64]] = []
    for arrival, ks, w in streams:
        assert arrival is not None and not isinstance(arrival, TraceArrival | AgenticArrival)
        # one stream may end early (a schedule that drops to zero) while the others fill the count
        ts = arrival_times(
            arrival, rng, num_requests=spec.num_requests, duration_s=spec.duration_s, strict=len(streams) == 1
        )
        which = rng.choice(len(ks), size=len(ts), p=w / w.sum())
        all_t.append(ts.astype(np.float64))
        all_k.append(np.asarray(ks, dtype=np.int64)[which])
    times = np.concatenate(all_t)
    pair = np.concatenate(all_k)
    order = np.argsort(times, kind="stable")
    if spec.num_requests is not None:
        if spec.duration_s is None and len(order) < spec.num_requests:
            raise ServecapError(
                "workload.num_requests",
                spec.num_requests,
                f"every tenant's rate schedule drops to zero after {len(order)} requests; give duration_s",
            )
        order = order[: spec.num_requests]
    return times[order], pair[order]


def _share(t: TenantSpec) -> float:
    return 1.0 if t.share is None else t.share


def _class_weight(t: TenantSpec, ci: int) -> float:
    return t.classes[ci].share / sum(c.share for c in t.classes)


def _draw_class(
    spec: WorkloadSpec, c: ClassSpec, prefix: PrefixSpec | None, group_off: int, rng: np.random.Generator, m: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """``m`` draws of (new prompt tokens, output tokens, prefix group or -1, prefix tokens)."""
    pd: AnyDist | None = c.prompt_tokens if c.prompt_tokens is not None else spec.prompt_tokens
    od: AnyDist | None = c.output_tokens if c.output_tokens is not None else spec.output_tokens
    assert pd is not None and od is not None  # checked by the schema
    p = sample_tokens(pd, rng, m)
    o = sample_tokens(od, rng, m)
    g = np.full(m, -1, dtype=np.int64)
    pt = np.zeros(m, dtype=np.int64)
    if prefix is not None and m > 0:
        member = rng.uniform(0.0, 1.0, m) < prefix.share
        which = draw_popular(rng, prefix.groups, prefix.zipf_s, m)
        g = np.where(member, group_off + which, -1).astype(np.int64)
        pt = np.where(member, prefix.tokens, 0).astype(np.int64)
    return p, o, g, pt
