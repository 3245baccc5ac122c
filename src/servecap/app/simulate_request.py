"""The requests of ``simulate`` and ``capacity``: every setting of a run, its default and its
help, in one place.

The CLI's options read their defaults and help from these fields (``cli/fields.py``), the HTTP
bodies are these models (``api/bodies.py`` adds the API's size caps and refuses file paths), and
the OpenAPI schema and the web forms read the defaults from the schema. The request shape and the
load read theirs from :class:`~servecap.app.flags.StreamFlags` and
:class:`~servecap.app.flags.LoadFlags` (the dataclasses ``bench`` and ``fleet simulate`` share).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, cast

from pydantic import Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from servecap.app.flags import LoadFlags, StreamFlags, flag_help
from servecap.app.request_fields import DeploymentFields
from servecap.core.kv_tier_settings import check_modes_need_tiers
from servecap.fleet.kv_tier_fields import CpuKvGib, KvLoadField, KvStoreField, RemoteKvTib, SsdKvGib
from servecap.workload.spec_parts import TraceArrival

ArrivalName = Literal["poisson", "gamma", "constant"]
PolicyName = Literal["fcfs", "priority"]
_S = StreamFlags()
_L = LoadFlags()
CAPACITY_DURATION_S = 600.0
"""A capacity search with chat users runs this long when no duration is given."""


def _s(name: str) -> str | None:
    return flag_help(StreamFlags, name)


def _l(name: str) -> str | None:
    return flag_help(LoadFlags, name)


class SimulateRequest(DeploymentFields):
    """``servecap simulate``: one replica under an open loop at ``rate`` req/s, ``users`` chat
    users, or (locally) a workload file."""

    rate: float | None = Field(default=_L.rate, gt=0, description=_l("rate"))
    users: int | None = Field(default=_L.users, ge=1, description=_l("users"))
    think_time_s: float | None = Field(default=_L.think_time_s, ge=0, description=_l("think_time_s"))
    turns: int | None = Field(
        default=None, ge=1, le=1000, description="Turns per chat; each turn resends the history (default 1)."
    )
    prompt_tokens: int = Field(default=_S.prompt_tokens, ge=1, description=_s("prompt_tokens"))
    output_tokens: int = Field(default=_S.output_tokens, ge=1, description=_s("output_tokens"))
    prompt_sigma: float | None = Field(default=_S.prompt_sigma, ge=0, description=_s("prompt_sigma"))
    output_sigma: float | None = Field(default=_S.output_sigma, ge=0, description=_s("output_sigma"))
    arrival: ArrivalName = Field(default=cast(ArrivalName, _S.arrival), description=_s("arrival"))
    cv: float | None = Field(default=_S.cv, gt=0, description=_s("cv"))
    num_requests: int | None = Field(default=_L.num_requests, ge=1, description=_l("num_requests"))
    duration_s: float | None = Field(default=_L.duration_s, gt=0, description=_l("duration_s"))
    ttft_slo_ms: float | None = Field(default=None, gt=0, description="TTFT SLO in ms (per request, for goodput).")
    tpot_slo_ms: float | None = Field(default=None, gt=0, description="TPOT SLO in ms (per request, for goodput).")
    no_prefix_caching: bool = Field(
        default=False, description="Disable prefix caching (vLLM's --no-enable-prefix-caching is the same flag)."
    )
    max_waiting: int | None = Field(
        default=None, ge=0, description="Waiting-queue limit; requests beyond it are rejected."
    )
    policy: PolicyName = Field(default="fcfs", description="Scheduling policy.")
    cpu_kv_gib: CpuKvGib = None
    ssd_kv_gib: SsdKvGib = None
    remote_kv_tib: RemoteKvTib = None
    kv_load: KvLoadField = "layerwise"
    kv_store: KvStoreField = "on-evict"
    seed: int = Field(default=0, ge=0, description="Random seed (same seed, same run).")
    step_model: Literal["auto", "roofline", "operations"] = Field(
        default="auto",
        description="Step times: auto (the model the corpus's training rows favour for this model class, GPU "
        "vendor and engine; docs/validation.md), roofline (one max(memory, compute) per step) or operations "
        "(the sum of the step's operations, measured kernel tables where they cover them).",
    )
    calibration: SkipJsonSchema[Path | None] = Field(
        default=None, description="Calibration file from `servecap calibrate`."
    )
    workload: SkipJsonSchema[Path | None] = Field(
        default=None, description="Workload file (YAML/JSON; see docs/workload.md)."
    )
    trace: TraceArrival | None = Field(
        default=None,
        description="Replay a trace (servecap, Mooncake, Azure or BurstGPT; over HTTP only the shipped "
        "sample:<name> traces): its format, window and time scale (docs/workload.md, Traces).",
    )

    @model_validator(mode="after")
    def _modes_need_tiers(self) -> SimulateRequest:
        check_modes_need_tiers("", self.kv_load, self.kv_store, self.cpu_kv_gib, self.ssd_kv_gib, self.remote_kv_tib)
        return self

    def stream(self) -> StreamFlags:
        """The request shape, as ``bench`` and ``fleet simulate`` take it."""
        return StreamFlags(
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            prompt_sigma=self.prompt_sigma,
            output_sigma=self.output_sigma,
            arrival=self.arrival,
            cv=self.cv,
        )

    def load(self) -> LoadFlags:
        """The load and the run's length."""
        return LoadFlags(
            rate=self.rate,
            users=self.users,
            think_time_s=self.think_time_s,
            duration_s=self.duration_s,
            num_requests=self.num_requests,
        )

    def has_slo(self) -> bool:
        return self.ttft_slo_ms is not None or self.tpot_slo_ms is not None


class CapacityRequest(SimulateRequest):
    """``servecap capacity``: the most chat users (``closed_loop``) or req/s one replica serves
    within p99 SLOs (the default interactive SLO when none is given); ``target`` users or req/s
    also get the replicas they need. ``rate``, ``users`` and ``max_waiting`` are the search's own
    and ignored here (the HTTP body has always accepted them)."""

    ttft_slo_ms: float | None = Field(
        default=None, gt=0, description="TTFT SLO in ms (p99; default: the interactive SLO, 2000 ms / 100 ms)."
    )
    tpot_slo_ms: float | None = Field(
        default=None, gt=0, description="TPOT SLO in ms (p99; default: the interactive SLO, 2000 ms / 100 ms)."
    )
    closed_loop: bool = Field(default=True, description="Search chat users (closed loop), else req/s (open loop).")
    target: float | None = Field(default=None, gt=0, description="Users or req/s to size replicas for.")
