"""The ``export`` use case's request and response: a fleet file or plan in, one target's
configuration out.

Defaults live here once: ``servecap export TARGET --help`` and the HTTP API's schema read them
from :class:`ExportOptions`. The request carries the file's bytes and its name (the name's
suffix gives the format and the header names it), so the CLI (a file it read) and the HTTP
API (a file's text in the body) answer alike; the server never opens ``name``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from servecap.files import MAX_DOC_BYTES

DEFAULT_IMAGE = "vllm/vllm-openai:latest"
DEFAULT_PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
DEFAULT_API_BASE = "http://{pool}:8000/v1"

ExportTarget = Literal["ray-serve", "keda", "kserve", "production-stack", "litellm", "kv-tiers"]


class ExportOptions(BaseModel):
    """Every target's knobs; a target ignores the ones it does not read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    replicas: int | None = Field(default=None, description="Replicas of a PLAN.json's deployment (default 1).")
    namespace: str | None = Field(default=None, description="Kubernetes namespace of the objects (default: none set).")
    image: str = Field(default=DEFAULT_IMAGE, description="vLLM server image.")
    prometheus_url: str = Field(default=DEFAULT_PROMETHEUS, description="Prometheus the autoscaler queries.")
    api_base: str = Field(
        default=DEFAULT_API_BASE,
        description="Each deployment's URL; {pool} is the pool's name, {replica} (fixed-size pools) lists every replica.",
    )
    session_key: str = Field(default="x-user-id", description="Header the session router hashes.")
    import_path: str | None = Field(
        default=None,
        description="Your own vLLM Serve app (called with model and engine_kwargs) instead of Ray Serve LLM.",
    )
    deployment_name: str = Field(
        default="VLLMDeployment", description="The deployment in --import-path's app that gets the replicas and GPUs."
    )


class ExportRequest(ExportOptions):
    """One target's configuration from one file: a fleet file (pools, autoscaler, router,
    gateway) or a ``servecap plan --json`` object."""

    target: ExportTarget
    name: str = Field(
        min_length=1,
        max_length=4096,
        description="The file's name: its suffix (.yaml, .yml, .json) gives the format; the header names it.",
    )
    content: Annotated[bytes, WithJsonSchema({"type": "string", "maxLength": MAX_DOC_BYTES})] = Field(
        max_length=MAX_DOC_BYTES, description="The file's contents (UTF-8 text)."
    )


class ExportResponse(BaseModel):
    """The configuration's text (provenance header, then the YAML) and what it could not say."""

    model_config = ConfigDict(extra="forbid")

    target: ExportTarget
    text: str
    warnings: list[str]


def option_default(name: str) -> object:
    """:class:`ExportOptions`' default for ``name`` (what the CLI's options show)."""
    return ExportOptions.model_fields[name].default


__all__ = [
    "DEFAULT_API_BASE",
    "DEFAULT_IMAGE",
    "DEFAULT_PROMETHEUS",
    "ExportOptions",
    "ExportRequest",
    "ExportResponse",
    "ExportTarget",
    "option_default",
]
