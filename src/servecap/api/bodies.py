"""Request bodies of the HTTP API: each is its use case's request (``app/``), or a thin subclass
that adds what only HTTP needs: no file paths, and caps that keep one request from exhausting
the server (``MAX_SIM_REQUESTS``, ``MAX_USERS``). pydantic models with ``extra="forbid"`` (an
unknown key is a 400 naming it); defaults and help are the request's, so the OpenAPI schema
shows the CLI's defaults.
"""

from __future__ import annotations

import math
from collections.abc import Sized
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic.json_schema import SkipJsonSchema

from servecap.app.compare import CompareRequest
from servecap.app.flags import flag_help
from servecap.app.plan import PlanRequest
from servecap.app.request_fields import DeploymentFields
from servecap.app.simulate_request import CapacityRequest, SimulateRequest
from servecap.errors import ServecapError

MAX_SIM_REQUESTS = 200_000
MAX_USERS = 100_000
_T = TypeVar("_T")
MAX_DEPTH = 32


def _p(name: str) -> str | None:
    return flag_help(PlanRequest, name)


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


def capped(owner: type[BaseModel], name: str, **caps: Any) -> Any:
    """``owner``'s field ``name`` (its default, help and bounds) with the API's ``caps`` added
    (``le=``, ``max_length=``): a body redeclares a field only to cap it, never to restate it."""
    return FieldInfo.merge_field_infos(owner.model_fields[name], Field(**caps))


class _HttpDeployment(BaseModel):
    """The API's caps on the deployment fields, and no GPU file."""

    model: str | None = capped(DeploymentFields, "model", max_length=200)
    gpu: str | None = capped(DeploymentFields, "gpu", max_length=100)
    num_gpus: int | None = capped(DeploymentFields, "num_gpus", le=1024)
    tp: int | None = capped(DeploymentFields, "tp", le=1024)
    pp: int = capped(DeploymentFields, "pp", le=64)
    weights_dtype: str | None = capped(DeploymentFields, "weights_dtype", max_length=20)
    kv_cache_dtype: str = capped(DeploymentFields, "kv_cache_dtype", max_length=20)
    max_model_len: int | None = capped(DeploymentFields, "max_model_len", le=16_777_216)
    block_size: int | None = capped(DeploymentFields, "block_size", le=1024)
    max_num_seqs: int | None = capped(DeploymentFields, "max_num_seqs", le=1_000_000)
    max_num_batched_tokens: int | None = capped(DeploymentFields, "max_num_batched_tokens", le=16_777_216)
    rope_scaling: str | None = capped(DeploymentFields, "rope_scaling", max_length=300)

    @field_validator("gpu_file", "calibration", "workload", check_fields=False)
    @classmethod
    def _no_paths(cls, v: object) -> None:
        if v is not None:
            raise ValueError("file paths are not accepted over HTTP")
        return None


class DeploymentBody(_HttpDeployment, DeploymentFields):
    """The deployment fields of a request over HTTP (``model`` may be a catalog id or an uploaded
    config's ``upload:<id>``; file paths are not accepted over HTTP)."""


_PLAN = PlanRequest()


class PlanBody(DeploymentBody):
    """``servecap plan``'s request as flat JSON: :class:`~servecap.app.plan.PlanRequest`'s fields,
    defaults and help (read from it: ``plan`` stays free of pydantic, so its request is a
    dataclass and this body its schema), with the API's bounds."""

    prompt_tokens: int = Field(default=_PLAN.prompt_tokens, ge=1, le=16_777_216, description=_p("prompt_tokens"))
    output_tokens: int = Field(default=_PLAN.output_tokens, ge=1, le=16_777_216, description=_p("output_tokens"))
    turns: int = Field(default=_PLAN.turns, ge=1, le=1000, description=_p("turns"))
    duty_cycle: float | None = Field(default=_PLAN.duty_cycle, gt=0, le=1, description=_p("duty_cycle"))
    think_time_s: float | None = Field(default=_PLAN.think_time_s, ge=0, le=86_400, description=_p("think_time_s"))
    request_interval_s: float | None = Field(
        default=_PLAN.request_interval_s, gt=0, le=86_400, description=_p("request_interval_s")
    )
    ttft_slo_ms: float | None = Field(default=_PLAN.ttft_slo_ms, gt=0, description=_p("ttft_slo_ms"))
    tpot_slo_ms: float | None = Field(default=_PLAN.tpot_slo_ms, gt=0, description=_p("tpot_slo_ms"))
    no_slo: bool = Field(default=_PLAN.no_slo, description=_p("no_slo"))
    price_per_hour: float | None = Field(default=_PLAN.price_per_hour, gt=0, description=_p("price_per_hour"))
    purchase_price: float | None = Field(default=_PLAN.purchase_price, gt=0, description=_p("purchase_price"))
    peak_users: int | None = Field(default=_PLAN.peak_users, ge=1, le=100_000_000, description=_p("peak_users"))
    peak_tok_s: float | None = Field(default=_PLAN.peak_tok_s, gt=0, description=_p("peak_tok_s"))
    step_model: Literal["auto", "roofline", "operations"] = Field(default="auto", description=_p("step_model"))
    explain_step: bool = Field(default=_PLAN.explain_step, description=_p("explain_step"))
    explain_batch: int | None = Field(default=_PLAN.explain_batch, ge=1, le=1_000_000, description=_p("explain_batch"))

    def request(self, model_path: str | None = None) -> PlanRequest:
        """The plan request (``model_path``: an uploaded model resolved to its file)."""
        return PlanRequest(
            deployment=self.flags(model_path),
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            turns=self.turns,
            duty_cycle=self.duty_cycle,
            think_time_s=self.think_time_s,
            request_interval_s=self.request_interval_s,
            ttft_slo_ms=self.ttft_slo_ms,
            tpot_slo_ms=self.tpot_slo_ms,
            no_slo=self.no_slo,
            price_per_hour=self.price_per_hour,
            purchase_price=self.purchase_price,
            peak_users=self.peak_users,
            peak_tok_s=self.peak_tok_s,
            step_model=self.step_model,
            explain_step=self.explain_step,
            explain_batch=self.explain_batch,
        )


_COMPARE_CAPS = {"gpus": 64, "counts": 8, "weights_dtypes": 6, "kv_dtypes": 4, "gpu_prices": 64}


class CompareBody(CompareRequest):
    """``servecap compare``'s request over HTTP: no GPU or calibration files, and at most
    :data:`_COMPARE_CAPS` items per list (the candidates are their product)."""

    gpu_file: SkipJsonSchema[None] = None
    calibration: SkipJsonSchema[None] = None

    @field_validator(*_COMPARE_CAPS)
    @classmethod
    def _capped(cls, v: Sized | None, info: ValidationInfo) -> Sized | None:
        cap = _COMPARE_CAPS[str(info.field_name)]
        if v is not None and len(v) > cap:
            raise ValueError(f"at most {cap} items over HTTP")
        return v


class _HttpRun(_HttpDeployment):
    """The API's caps on one simulated run (``MAX_SIM_REQUESTS``, ``MAX_USERS``, a day, the
    request shape) over the request's own fields, and no file paths."""

    rate: float | None = capped(SimulateRequest, "rate", le=100_000)
    users: int | None = capped(SimulateRequest, "users", le=MAX_USERS)
    think_time_s: float | None = capped(SimulateRequest, "think_time_s", le=86_400)
    prompt_tokens: int = capped(SimulateRequest, "prompt_tokens", le=16_777_216)
    output_tokens: int = capped(SimulateRequest, "output_tokens", le=16_777_216)
    prompt_sigma: float | None = capped(SimulateRequest, "prompt_sigma", le=5)
    output_sigma: float | None = capped(SimulateRequest, "output_sigma", le=5)
    cv: float | None = capped(SimulateRequest, "cv", le=100)
    num_requests: int | None = capped(SimulateRequest, "num_requests", le=MAX_SIM_REQUESTS)
    duration_s: float | None = capped(SimulateRequest, "duration_s", le=86_400)
    seed: int = capped(SimulateRequest, "seed", le=2**32 - 1)


class SimulateBody(_HttpRun, SimulateRequest):
    """``servecap simulate``'s request over HTTP: an open loop at ``rate`` req/s, or ``users``
    chat users (a workload is ``POST /api/v1/fleet/simulate``'s)."""


class CapacityBody(_HttpRun, CapacityRequest):
    """``servecap capacity``'s request over HTTP: search the most users (``closed_loop``) or
    req/s within the SLOs."""


class UploadBody(BaseModel):
    """A model's ``config.json`` (its JSON object, as the hub ships it)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    config: dict[str, object]
    name: str | None = Field(default=None, max_length=100)

    @field_validator("config")
    @classmethod
    def _plain(cls, v: dict[str, object]) -> dict[str, object]:
        return plain_tree(v, "config")
