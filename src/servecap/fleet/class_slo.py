"""Per-class SLO attainment of a fleet run: each (tenant, class) of the workload scored against
its own percentile targets (``slo: {ttft_s: {p99: 1.0}}`` in the workload file) with
:func:`servecap.results.slo_report.slo_report`.

Groups are named ``tenant/class``; a workload without tenants is one group, ``all``. A class
without targets takes ``default`` (none: it is not scored).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from servecap.results.slo_report import GroupResult, Target, slo_report
from servecap.results.summary import RecordColumns
from servecap.workload import RequestArrays, WorkloadSpec, traffic_classes

Pair = tuple[str, str]  # (tenant, class); ("", "") without tenants


def group_name(pair: Pair) -> str:
    return f"{pair[0]}/{pair[1]}" if pair[0] else "all"


def class_targets(spec: WorkloadSpec, default: Sequence[Target] = ()) -> dict[Pair, tuple[Target, ...]]:
    """Each (tenant, class)'s targets: its own, else ``default`` (pairs with neither are left out)."""
    pairs = traffic_classes(spec)
    if not pairs:
        return {("", ""): tuple(default)} if default else {}
    out = {(p.tenant, p.name): tuple(p.slo_targets or default) for p in pairs}
    return {k: v for k, v in out.items() if v}


def class_groups(
    arrays: RequestArrays, pairs: Sequence[Pair], mask: NDArray[np.bool_] | None = None
) -> dict[str, NDArray[np.int64]]:
    """Row indices of each pair's requests (within ``mask`` when given)."""
    keep = np.ones(len(arrays.arrival_s), dtype=bool) if mask is None else mask
    groups: dict[str, NDArray[np.int64]] = {}
    for pair in pairs:
        if pair == ("", ""):
            groups["all"] = np.flatnonzero(keep)
            continue
        ti = arrays.tenant_names.index(pair[0]) if pair[0] in arrays.tenant_names else -2
        ci = arrays.class_names.index(pair[1]) if pair[1] in arrays.class_names else -2
        groups[group_name(pair)] = np.flatnonzero(keep & (arrays.tenant == ti) & (arrays.request_class == ci))
    return groups


def class_slo_report(
    columns: RecordColumns, arrays: RequestArrays, spec: WorkloadSpec, default: Sequence[Target] = ()
) -> tuple[GroupResult, ...]:
    """Score a run's requests (``columns``, rows as ``arrays``) per class against its targets."""
    targets = class_targets(spec, default)
    groups = class_groups(arrays, list(targets))
    return slo_report(columns, groups, {group_name(p): t for p, t in targets.items()})
