"""The discrete-event simulator: one vLLM-like engine replica under a workload.

- :class:`Engine` — scheduler + paged KV block manager + prefix cache + step-time model;
- :func:`engine_setup_from_plan` — the engine of a planned deployment;
- :func:`simulate` — run a workload through an engine, returning a :class:`SimResult`;
- :mod:`servecap.sim.capacity_search` — the largest rate / number of users meeting SLOs, by search.
"""

from servecap.sim.engine import Engine, EngineRequest, EngineStats, StepOutcome
from servecap.sim.setup import EngineSetup, engine_setup_from_plan
from servecap.sim.simulate import SimResult, simulate
from servecap.sim.step_time import StepTimeModel

__all__ = [
    "Engine",
    "EngineRequest",
    "EngineSetup",
    "EngineStats",
    "SimResult",
    "StepOutcome",
    "StepTimeModel",
    "engine_setup_from_plan",
    "simulate",
]
