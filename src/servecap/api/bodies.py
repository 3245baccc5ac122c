"""Request bodies of the HTTP API: the CLI's flags as JSON fields (same names, same meaning).

pydantic models with ``extra="forbid"`` (an unknown key is a 400 naming it) and bounds that keep
one request from exhausting the server (``MAX_SIM_REQUESTS``); each converts to the use case's
own request in one place.
"""

from __future__ import annotations

import math
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from servecap.app.flags import DeploymentFlags, StreamFlags
from servecap.errors import ServecapError

MAX_SIM_REQUESTS = 200_000
MAX_USERS = 100_000
_T = TypeVar("_T")
MAX_DEPTH = 32
"""Nesting of a file-shaped body (fleet, workload, plan, config): the deepest real one is < 10."""


def plain_tree(value: _T, root: str) -> _T:
    """A JSON tree as a file-shaped body may hold it: nested at most :data:`MAX_DEPTH` deep and
    every number finite (NaN and infinity are refused naming their key). Walked without
    recursion, so no nesting can exhaust the stack. Raises :class:`ServecapError` (which pydantic
    passes through) naming the place, e.g. ``plan.traffic.peak_rps``."""
    stack: list[tuple[Any, str, int]] = [(value, root, 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ServecapError(where, "[...]", f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, float) and not math.isfinite(node):
            raise ServecapError(where, str(node), "must be a finite number")
        if isinstance(node, dict):
            stack.extend((v, f"{where}.{k}", depth + 1) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(node))
    return value


class DeploymentBody(BaseModel):
    """The deployment flags of ``servecap plan`` (``model`` may be a catalog id or an uploaded
    config's ``upload:<id>``; file paths are not accepted over HTTP)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str | None = Field(default=None, max_length=200)
    gpu: str | None = Field(default=None, max_length=100)
    num_gpus: int | None = Field(default=None, ge=1, le=1024)
    tp: int | None = Field(default=None, ge=1, le=1024)
    pp: int = Field(default=1, ge=1, le=64)
    weights_dtype: str | None = Field(default=None, max_length=20)
    kv_cache_dtype: str = Field(default="auto", max_length=20)
    max_model_len: int | None = Field(default=None, ge=1, le=16_777_216)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    kv_cache_memory_bytes: int | None = Field(default=None, ge=1)
    block_size: int | None = Field(default=None, ge=1, le=1024)
    max_num_seqs: int | None = Field(default=None, ge=1, le=1_000_000)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=16_777_216)
    rope_scaling: str | None = Field(default=None, max_length=300)
    engine: Literal["vllm", "sglang", "trtllm", "trtllm-max-utilization"] = "vllm"

    def flags(self, model_path: str | None = None) -> DeploymentFlags:
        data = self.model_dump(include=set(DeploymentBody.model_fields))
        if model_path is not None:
            data["model"] = model_path
        return DeploymentFlags(**data)


class PlanBody(DeploymentBody):
    prompt_tokens: int = Field(default=1024, ge=1, le=16_777_216)
    output_tokens: int = Field(default=128, ge=1, le=16_777_216)
    turns: int = Field(default=1, ge=1, le=1000)
    duty_cycle: float | None = Field(default=None, gt=0, le=1)
    think_time_s: float | None = Field(default=None, ge=0, le=86_400)
    ttft_slo_ms: float | None = Field(default=None, gt=0)
    tpot_slo_ms: float | None = Field(default=None, gt=0)
    no_slo: bool = False
    price_per_hour: float | None = Field(default=None, gt=0)
    purchase_price: float | None = Field(default=None, gt=0)
    peak_users: int | None = Field(default=None, ge=1, le=100_000_000)
    peak_tok_s: float | None = Field(default=None, gt=0)


class CompareBody(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str = Field(default="meta-llama/Llama-3.1-70B", max_length=200)
    gpus: list[str] | None = Field(default=None, max_length=64)
    counts: list[int] = Field(default=[1, 2, 4, 8], min_length=1, max_length=8)
    weights_dtypes: list[str] = Field(default=["auto", "fp8", "int4"], min_length=1, max_length=6)
    kv_dtypes: list[str] = Field(default=["auto", "fp8"], min_length=1, max_length=4)
    max_model_len: int | None = Field(default=None, ge=1, le=16_777_216)
    prompt_tokens: int = Field(default=1024, ge=1, le=16_777_216)
    output_tokens: int = Field(default=128, ge=1, le=16_777_216)
    duty_cycle: float | None = Field(default=None, gt=0, le=1)  # None: from request_interval_s
    request_interval_s: float | None = Field(default=None, gt=0, le=86_400)  # None: 30 s (app/defaults.py)
    ttft_slo_ms: float | None = Field(default=None, gt=0)
    tpot_slo_ms: float | None = Field(default=None, gt=0)
    price_per_hour: float | None = Field(default=None, gt=0)
    gpu_prices: dict[str, float] = Field(default={}, max_length=64)


class SimulateBody(DeploymentBody):
    """``servecap simulate``'s flags: an open loop at ``rate`` req/s, or ``users`` chat users."""

    rate: float | None = Field(default=None, gt=0, le=100_000)
    users: int | None = Field(default=None, ge=1, le=MAX_USERS)
    think_time_s: float | None = Field(default=None, ge=0, le=86_400)
    turns: int | None = Field(default=None, ge=1, le=1000)
    prompt_tokens: int = Field(default=1024, ge=1, le=16_777_216)
    output_tokens: int = Field(default=128, ge=1, le=16_777_216)
    prompt_sigma: float | None = Field(default=None, ge=0, le=5)
    output_sigma: float | None = Field(default=None, ge=0, le=5)
    arrival: Literal["poisson", "gamma", "constant"] = "poisson"
    cv: float | None = Field(default=None, gt=0, le=100)
    num_requests: int | None = Field(default=None, ge=1, le=MAX_SIM_REQUESTS)
    duration_s: float | None = Field(default=None, gt=0, le=86_400)
    ttft_slo_ms: float | None = Field(default=None, gt=0)
    tpot_slo_ms: float | None = Field(default=None, gt=0)
    no_prefix_caching: bool = False
    max_waiting: int | None = Field(default=None, ge=0)
    policy: Literal["fcfs", "priority"] = "fcfs"
    seed: int = Field(default=0, ge=0, le=2**32 - 1)

    def stream(self) -> StreamFlags:
        return StreamFlags(
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            prompt_sigma=self.prompt_sigma,
            output_sigma=self.output_sigma,
            arrival=self.arrival,
            cv=self.cv,
        )


class CapacityBody(SimulateBody):
    """``servecap capacity``: search the most users (``closed_loop``) or req/s within the SLOs."""

    closed_loop: bool = True
    target: float | None = Field(default=None, gt=0)


class UploadBody(BaseModel):
    """A model's ``config.json`` (its JSON object, as the hub ships it)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    config: dict[str, object]
    name: str | None = Field(default=None, max_length=100)

    @field_validator("config")
    @classmethod
    def _plain(cls, v: dict[str, object]) -> dict[str, object]:
        return plain_tree(v, "config")


class FleetSimulateBody(BaseModel):
    """``servecap fleet simulate``: a fleet file and a workload file, as JSON objects (the same
    keys the YAML files take; docs/fleet.md, docs/workload.md)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    fleet: dict[str, object]
    workload: dict[str, object]
    seed: int = Field(default=0, ge=0, le=2**32 - 1)

    @field_validator("fleet", "workload")
    @classmethod
    def _plain(cls, v: dict[str, object], info: ValidationInfo) -> dict[str, object]:
        return plain_tree(v, str(info.field_name))


class FleetPlanBody(BaseModel):
    """``servecap fleet plan``: a plan file as a JSON object (the keys the YAML file takes;
    docs/fleet.md, "Planning a fleet")."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    plan: dict[str, object]

    @field_validator("plan")
    @classmethod
    def _plain(cls, v: dict[str, object]) -> dict[str, object]:
        return plain_tree(v, "plan")
