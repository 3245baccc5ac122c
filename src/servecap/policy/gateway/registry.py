"""The gateway's policy registries, one ``dict[str, type]`` per axis, and a maker that turns an
unknown name into one clear error."""

from __future__ import annotations

from typing import Any

from servecap.errors import ServecapError, did_you_mean
from servecap.policy.gateway.cache import ExactCache, SemanticCache
from servecap.policy.gateway.routing import ByClass, ByPromptLength, ByShare

CACHES: dict[str, type] = {"exact": ExactCache, "semantic": SemanticCache}
MODEL_ROUTERS: dict[str, type] = {"class": ByClass, "prompt_length": ByPromptLength, "share": ByShare}
AXES: dict[str, dict[str, type]] = {"cache": CACHES, "routing": MODEL_ROUTERS}


def make(axis: str, name: str, **settings: Any) -> Any:
    """An instance of policy ``name`` of ``axis`` (``cache``, ``routing``) with ``settings``."""
    registry = AXES.get(axis)
    if registry is None:
        raise ServecapError("gateway", axis, "unknown policy axis" + did_you_mean(axis, AXES))
    cls = registry.get(name)
    if cls is None:
        raise ServecapError(
            f"gateway.{axis}.kind",
            name,
            f"unknown {axis} policy; one of {', '.join(registry)}" + did_you_mean(name, registry),
        )
    try:
        return cls(**settings)
    except TypeError as err:
        raise ServecapError(f"gateway.{axis}", name, f"bad settings ({err})") from None
