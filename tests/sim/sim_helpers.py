"""Planned deployments for the simulator tests."""

from __future__ import annotations

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import Plan, plan
from servecap.specs import RequestShape


def make_plan(
    model: str = "meta-llama/Llama-3.1-8B",
    gpu: str = "H100",
    *,
    request: RequestShape | None = None,
    **engine: object,
) -> Plan:
    kw: dict[str, object] = {"max_model_len": 4096}
    kw.update(engine)
    dep = build_deployment(resolve_model(model), lookup_gpu(gpu), **kw)  # type: ignore[arg-type]
    return plan(dep, request=request or RequestShape(512, 128))
