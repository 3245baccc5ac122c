"""``servecap export TARGET FLEET.yaml|PLAN.json``: the configuration of the systems users already
run, written from a fleet file or a plan (docs/export.md); the targets' builders are :mod:`servecap.export`.

:func:`export_file` answers an :class:`~servecap.export.request.ExportRequest` (the file's
name and bytes, the target, its options) with an
:class:`~servecap.export.request.ExportResponse`; :func:`export` reads a path. Both parse
the file (:mod:`~servecap.export.source`), build the target's document (one small module
per target) and return its text, with the provenance header, and the warnings: every setting
the target cannot express is named there, never dropped in silence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servecap.errors import ServecapError, did_you_mean
from servecap.export.request import ExportOptions, ExportRequest, ExportResponse

if TYPE_CHECKING:  # the targets load when one is built (reading the request's defaults loads none)
    from servecap.export.keda import KedaObject
    from servecap.export.kserve import InferenceService
    from servecap.export.litellm import LitellmConfig
    from servecap.export.pd import PdConfig
    from servecap.export.production_stack import StackValues
    from servecap.export.ray_serve import RayServeConfig
    from servecap.export.source import ExportInput

    ExportDocument = (
        RayServeConfig | list[KedaObject] | list[InferenceService] | StackValues | LitellmConfig | dict[str, Any]
    )
    """The document(s) a target writes: one mapping, or a list of Kubernetes objects."""

TARGETS: dict[str, str] = {
    "ray-serve": "Ray Serve config (Ray Serve LLM apps with autoscaling_config)",
    "keda": "Kubernetes Deployment + Service for vLLM and a KEDA ScaledObject",
    "kserve": "KServe InferenceService (Hugging Face runtime, vLLM backend, KEDA autoscaling)",
    "production-stack": "vLLM production-stack Helm values",
    "litellm": "LiteLLM proxy config.yaml",
    "kv-tiers": "KV tiers: vLLM native offloading flags, LMCache settings (YAML, env), KServe kvCacheOffloading",
}


@dataclass(frozen=True, slots=True)
class ExportResult:
    target: str
    text: str
    data: ExportDocument
    warnings: tuple[str, ...] = field(default_factory=tuple)


def export_file(req: ExportRequest) -> ExportResponse:
    """``req.target``'s configuration for the file ``req`` carries."""
    from servecap.export.source import parse_source

    inp = parse_source(req.name, req.content, replicas=req.replicas)
    result = build(req.target, inp, req)
    return ExportResponse(target=req.target, text=result.text, warnings=list(result.warnings))


def load_source(path: Path | str, *, replicas: int | None = None) -> ExportInput:
    """Read ``path``: a ``.json`` holding a ``servecap plan --json`` object, a fleet file
    (``.yaml``/``.yml``/``.json`` with ``pools``, as ``fleet plan --out`` writes it), or a
    ``servecap fleet plan --json`` object (its ``fleet_file``). ``replicas`` sets a plan's
    replica count (:func:`servecap.export.source.parse_source` parses what was read)."""
    from servecap.export.source import parse_source
    from servecap.files import read_bytes

    path = Path(path)
    return parse_source(str(path), read_bytes(path, "file"), replicas=replicas)


def export_pd(path: Path | str, *, port: int = 8000) -> tuple[PdConfig, list[str]]:
    """``export pd``: read the P/D fleet file at ``path`` (its layout checked as it is read,
    fleet.pd_spec.check_pd_layout) and give its servers' and routers' command lines."""
    from servecap.export.pd import pd_config
    from servecap.fleet.file_schema import load_fleet_file

    return pd_config(load_fleet_file(path), load_source(path), port=port)


def export(target: str, path: Path | str, options: ExportOptions | None = None) -> ExportResult:
    """Read ``path`` and write ``target``'s configuration."""
    if target not in TARGETS:
        raise ServecapError(
            "target", target, f"unknown export target; one of {', '.join(TARGETS)}" + did_you_mean(target, TARGETS)
        )
    return build(target, load_source(path, replicas=(options or ExportOptions()).replicas), options)


YAML_WIDTH = 1 << 30
"""No folding: a long value (a vLLM command line in ``export pd``) stays on one line, as a
person would paste it (PyYAML folds plain scalars at ``width``, 80 by default)."""


def build(target: str, inp: ExportInput, options: ExportOptions | None = None) -> ExportResult:
    """``target``'s document for an already-read input."""
    import yaml

    from servecap.export.source import policy_warnings

    o = options or ExportOptions()
    warnings: list[str] = policy_warnings(inp)
    header = inp.source.header(target)
    data: ExportDocument
    if target == "ray-serve":
        from servecap.export.ray_serve import ray_serve_config

        data = ray_serve_config(inp, warnings, import_path=o.import_path, deployment_name=o.deployment_name)
    elif target == "keda":
        from servecap.export.keda import keda_manifests

        data = keda_manifests(inp, warnings, namespace=o.namespace, image=o.image, prometheus_url=o.prometheus_url)
    elif target == "kserve":
        from servecap.export.kserve import inference_services

        data = inference_services(inp, warnings, namespace=o.namespace, prometheus_url=o.prometheus_url)
    elif target == "production-stack":
        from servecap.export.production_stack import stack_values

        repo, _, tag = o.image.rpartition(":") if ":" in o.image.rsplit("/", 1)[-1] else (o.image, "", "latest")
        data = stack_values(inp, warnings, repository=repo, tag=tag, session_key=o.session_key)
    elif target == "litellm":
        from servecap.export.litellm import litellm_config, tenant_comments

        data = litellm_config(inp, warnings, api_base=o.api_base)
        header = header + tenant_comments(inp, warnings)
    elif target == "kv-tiers":
        from servecap.export.kv_tiers import kv_tier_documents

        data = kv_tier_documents(inp, warnings)
    else:
        raise ServecapError("target", target, f"unknown export target; one of {', '.join(TARGETS)}")
    comment = "".join(f"# {line}\n" for line in header)
    if isinstance(data, list):
        body = yaml.safe_dump_all(data, sort_keys=False, width=YAML_WIDTH)
    else:
        body = yaml.safe_dump(data, sort_keys=False, width=YAML_WIDTH)
    return ExportResult(target, comment + body, data, tuple(warnings))


__all__ = [
    "TARGETS",
    "ExportOptions",
    "ExportRequest",
    "ExportResponse",
    "ExportResult",
    "build",
    "export",
    "export_file",
]
