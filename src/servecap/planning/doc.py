"""The fleet files the planner writes: the fleets it simulates (sent to workers as values) and
the chosen one it answers with (``fleet_file``, for ``servecap fleet simulate --fleet``).

Typed dictionaries of the fleet file's keys (docs/fleet.md) that the planner sets; each is
validated by :func:`servecap.fleet.file_schema.fleet_from_dict` before a simulation. The cold start
and the gateway are sections the planner copies from a request or a lever as they are.
"""

from __future__ import annotations

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from servecap.json_object import JsonObject

Section = JsonObject
"""A fleet-file section copied as it is (a cold-start model's or a gateway's keys)."""

_STRICT = ConfigDict(extra="forbid")  # a key a response's fleet file does not declare is an error, not dropped


@with_config(_STRICT)
class ScheduleDoc(TypedDict):
    at_s: float
    min_replicas: int


@with_config(_STRICT)
class PredictiveDoc(TypedDict):
    req_s_per_replica: float
    lead_s: float
    step_s: float
    headroom: float


@with_config(_STRICT)
class AutoscalerDoc(TypedDict, total=False):
    preset: str
    target: float
    interval_s: float
    min_replicas: int
    max_replicas: int
    predictive: PredictiveDoc
    schedule: list[ScheduleDoc]


@with_config(_STRICT)
class PoolDoc(TypedDict, total=False):
    name: str
    model: str
    gpu: str
    replicas: int
    kv_cache_dtype: str
    cold_start: str | Section
    tp: int
    weights_dtype: str
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    price_per_gpu_hour: float
    role: str
    autoscaler: AutoscalerDoc
    dp: int
    ep: int
    redundant_experts: int
    two_batch_overlap: bool
    speculative: str
    cpu_kv_gib: float
    remote_kv_tib: float


@with_config(_STRICT)
class KvLinkDoc(TypedDict):
    kind: str


@with_config(_STRICT)
class PdRouterDoc(TypedDict):
    """A P/D fleet's router as the fleet file writes it: a policy per side."""

    prefill: str
    decode: str


@with_config(_STRICT)
class FleetDoc(TypedDict, total=False):
    pools: list[PoolDoc]
    router: str
    gateway: Section
    pd_router: str | PdRouterDoc  # a preset's name, or a policy per side
    kv_link: KvLinkDoc
