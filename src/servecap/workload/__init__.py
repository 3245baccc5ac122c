"""Workloads: arrival processes (incl. time-varying rates), lengths, shared prefixes, tenants and
classes, and closed-loop users.

Shared by the simulator and the load generator: one :class:`WorkloadSpec` and one seed give one
request stream in both. See docs/workload.md.
"""

from servecap.workload.arrival_trace import ArrivalTrace
from servecap.workload.closed_loop import ClosedLoopUsers
from servecap.workload.dists import mean as dist_mean
from servecap.workload.dists import sample, sample_tokens
from servecap.workload.generate import RequestArrays, generate_arrays, generate_requests
from servecap.workload.load import load_workload, workload_from_dict, workload_from_flags
from servecap.workload.mix import TrafficClass, traffic_classes
from servecap.workload.rate import arrival_rate, workload_rate
from servecap.workload.request import RequestSpec, block_keys, prefix_block_keys
from servecap.workload.schedule import integrated_rate, rate_at
from servecap.workload.spec import WorkloadSpec
from servecap.workload.trace import load_trace

__all__ = [
    "ArrivalTrace",
    "ClosedLoopUsers",
    "RequestArrays",
    "RequestSpec",
    "TrafficClass",
    "WorkloadSpec",
    "arrival_rate",
    "block_keys",
    "dist_mean",
    "generate_arrays",
    "generate_requests",
    "integrated_rate",
    "load_trace",
    "load_workload",
    "prefix_block_keys",
    "rate_at",
    "sample",
    "sample_tokens",
    "traffic_classes",
    "workload_from_dict",
    "workload_from_flags",
    "workload_rate",
]
