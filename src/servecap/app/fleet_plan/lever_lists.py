"""The planner's levers as the interfaces list them (``GET /api/v1/fleet/plan/levers``; the web
page fills its lever list and default selection from it): one place, the lever table."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from servecap.planning.levers import DEFAULT_LEVERS, LEVERS


class LeverLists(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    levers: list[str]  # every lever a plan may name
    default_levers: list[str]  # those a plan without ``levers`` runs


def lever_lists() -> LeverLists:
    """Every lever of the planner, and the ones it runs by default."""
    return LeverLists(levers=list(LEVERS), default_levers=list(DEFAULT_LEVERS))
