"""The deployment settings as request fields: the flat JSON of ``simulate``, ``capacity`` and
``plan`` requests (the HTTP bodies are these models).

Defaults and help are read from :class:`~servecap.app.flags.DeploymentFlags`, where they are
written once (``servecap plan`` reads them there without importing pydantic); the bounds here
are what makes a value meaningful (a positive count), the HTTP bodies add the API's size caps. File paths (``gpu_file``) are a local interface's: they are left out of the JSON
schema, and the HTTP bodies refuse them (``api/bodies.py``).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import SkipJsonSchema

from servecap.app.flags import DeploymentFlags, LoadFlags, StreamFlags, flag_help
from servecap.errors import from_validation_error

_M = TypeVar("_M", bound=BaseModel)
EngineName = Literal["vllm", "sglang", "trtllm", "trtllm-max-utilization"]
A2aMode = Literal["auto", "normal", "low_latency"]
SpecMethod = Literal["mtp", "eagle", "eagle3", "draft", "ngram"]


def _d(name: str) -> str | None:
    return flag_help(DeploymentFlags, name)


_D = DeploymentFlags()


class DeploymentFields(BaseModel):
    """The deployment flags as JSON fields (``model`` may be a catalog id, a ``config.json`` path
    or, over HTTP, an uploaded config's ``upload:<id>``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str | None = Field(default=_D.model, description=_d("model"))
    gpu: str | None = Field(default=_D.gpu, description=_d("gpu"))
    num_gpus: int | None = Field(default=_D.num_gpus, ge=1, description=_d("num_gpus"))
    tp: int | None = Field(default=_D.tp, ge=1, description=_d("tp"))
    pp: int = Field(default=_D.pp, ge=1, description=_d("pp"))
    weights_dtype: str | None = Field(default=_D.weights_dtype, description=_d("weights_dtype"))
    kv_cache_dtype: str = Field(default=_D.kv_cache_dtype, description=_d("kv_cache_dtype"))
    max_model_len: int | None = Field(default=_D.max_model_len, ge=1, description=_d("max_model_len"))
    gpu_memory_utilization: float | None = Field(
        default=_D.gpu_memory_utilization, gt=0, le=1, description=_d("gpu_memory_utilization")
    )
    kv_cache_memory_bytes: int | None = Field(
        default=_D.kv_cache_memory_bytes, ge=1, description=_d("kv_cache_memory_bytes")
    )
    block_size: int | None = Field(default=_D.block_size, ge=1, description=_d("block_size"))
    max_num_seqs: int | None = Field(default=_D.max_num_seqs, ge=1, description=_d("max_num_seqs"))
    max_num_batched_tokens: int | None = Field(
        default=_D.max_num_batched_tokens, ge=1, description=_d("max_num_batched_tokens")
    )
    rope_scaling: str | None = Field(default=_D.rope_scaling, description=_d("rope_scaling"))
    engine: EngineName = Field(default=cast(EngineName, _D.engine), description=_d("engine"))
    dp: int = Field(default=_D.dp, ge=1, le=1024, description=_d("dp"))
    ep: int = Field(default=_D.ep, ge=1, le=4096, description=_d("ep"))
    nodes: int | None = Field(default=_D.nodes, ge=1, le=4096, description=_d("nodes"))
    gpus_per_node: int | None = Field(default=_D.gpus_per_node, ge=1, le=72, description=_d("gpus_per_node"))
    redundant_experts: int = Field(default=_D.redundant_experts, ge=0, le=4096, description=_d("redundant_experts"))
    expert_skew: float = Field(default=_D.expert_skew, ge=0.0, le=4.0, description=_d("expert_skew"))
    a2a_mode: A2aMode = Field(default=cast(A2aMode, _D.a2a_mode), description=_d("a2a_mode"))
    two_batch_overlap: bool = Field(default=_D.two_batch_overlap, description=_d("two_batch_overlap"))
    speculative: SpecMethod | None = Field(default=None, description=_d("speculative"))
    num_speculative_tokens: int | None = Field(
        default=_D.num_speculative_tokens, ge=1, le=16, description=_d("num_speculative_tokens")
    )
    spec_acceptance: str | None = Field(
        default=_D.spec_acceptance, min_length=1, max_length=200, description=_d("spec_acceptance")
    )
    draft_model: str | None = Field(default=_D.draft_model, min_length=1, max_length=500, description=_d("draft_model"))
    gpu_file: SkipJsonSchema[Path | None] = Field(default=_D.gpu_file, description=_d("gpu_file"))

    def flags(self, model_path: str | None = None) -> DeploymentFlags:
        """The deployment as :func:`~servecap.app.flags.deployment_from_flags` takes it
        (``model_path``: an uploaded model resolved to its file, in place of ``model``)."""
        return DeploymentFlags(
            model=model_path if model_path is not None else self.model,
            gpu=self.gpu,
            gpu_file=self.gpu_file,
            num_gpus=self.num_gpus,
            tp=self.tp,
            pp=self.pp,
            weights_dtype=self.weights_dtype,
            kv_cache_dtype=self.kv_cache_dtype,
            max_model_len=self.max_model_len,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_memory_bytes=self.kv_cache_memory_bytes,
            block_size=self.block_size,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            rope_scaling=self.rope_scaling,
            engine=self.engine,
            dp=self.dp,
            ep=self.ep,
            nodes=self.nodes,
            gpus_per_node=self.gpus_per_node,
            redundant_experts=self.redundant_experts,
            expert_skew=self.expert_skew,
            a2a_mode=self.a2a_mode,
            two_batch_overlap=self.two_batch_overlap,
            speculative=self.speculative,
            num_speculative_tokens=self.num_speculative_tokens,
            spec_acceptance=self.spec_acceptance,
            draft_model=self.draft_model,
        )


def values_of(flags: DeploymentFlags | StreamFlags | LoadFlags) -> dict[str, object]:
    """A flags dataclass's fields as request values (``{**values_of(d), **values_of(s)}``)."""
    return {f.name: getattr(flags, f.name) for f in fields(flags)}


def validated(cls: type[_M], values: dict[str, object]) -> _M:
    """``cls`` from keyword values (a CLI's flags); a bad value is one :class:`ServecapError`
    naming the field, as the HTTP API reports it."""
    try:
        return cls.model_validate(values)
    except ValidationError as err:
        raise from_validation_error(err) from None
