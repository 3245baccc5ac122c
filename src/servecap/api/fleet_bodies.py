"""The HTTP bodies of ``fleet simulate`` and ``fleet plan``: the use cases' own input models
(:class:`~servecap.app.fleet_simulate.FleetSimulateInput`, :class:`~servecap.planning.model.FleetPlanInput`)
with the HTTP-only restriction on a file-shaped body: nested at most ``MAX_DEPTH`` deep, every
number finite (:func:`~servecap.api.bodies.plain_tree`)."""

from __future__ import annotations

from typing import Literal

from pydantic import ValidationInfo, field_validator

from servecap.api.bodies import plain_tree
from servecap.app.fleet_simulate import FleetSimulateInput
from servecap.planning.model import FleetPlanInput


class FleetSimulateBody(FleetSimulateInput):
    """``servecap fleet simulate``: a fleet file and a workload file, as JSON objects (the same
    keys the YAML files take; docs/fleet.md, docs/workload.md). ``fidelity`` is ``fleet simulate
    --fidelity``: ``full`` (the discrete-event simulation) or ``cache-replay`` (a block-hash trace
    sample streamed through the cache replay, api/cache_replay_job.py)."""

    fidelity: Literal["full", "cache-replay"] = "full"

    @field_validator("fleet", "workload")
    @classmethod
    def _plain(cls, v: dict[str, object], info: ValidationInfo) -> dict[str, object]:
        return plain_tree(v, str(info.field_name))


class FleetPlanBody(FleetPlanInput):
    """``servecap fleet plan``: a plan file as a JSON object (the keys the YAML file takes;
    docs/fleet.md, "Planning a fleet")."""

    @field_validator("plan")
    @classmethod
    def _plain(cls, v: dict[str, object]) -> dict[str, object]:
        return plain_tree(v, "plan")
