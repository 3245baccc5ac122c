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
