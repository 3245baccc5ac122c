"""The registered policies and their defaults, as the interfaces list them (``GET
/api/v1/policies``; the web pages fill their router and autoscaler lists from it, the CLI's
choices read the same registries): one place, so no list or default is written twice."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from servecap.policy.autoscalers import AUTOSCALERS, DEFAULT_AUTOSCALER, PRESETS
from servecap.policy.routers import DEFAULT_ROUTER, ROUTERS


class PolicyLists(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    routers: list[str]
    default_router: str
    autoscalers: list[str]  # an autoscaler's ``policy``
    default_autoscaler: str
    presets: list[str]  # an autoscaler's ``preset``
    default_preset: str


def policy_lists() -> PolicyLists:
    """Every registered router, autoscaler policy and autoscaler preset, with the defaults."""
    return PolicyLists(
        routers=list(ROUTERS),
        default_router=DEFAULT_ROUTER,
        autoscalers=list(AUTOSCALERS),
        default_autoscaler=DEFAULT_AUTOSCALER,
        presets=list(PRESETS),
        default_preset=AUTOSCALERS[DEFAULT_AUTOSCALER].default_preset,
    )
