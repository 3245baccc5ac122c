"""The one free-form JSON object alias (use cases, the planner, the exporters).

``JsonObject`` is a JSON object whose shape belongs to someone else: a run summary in
``summary_to_json_dict`` form (typed in :mod:`servecap.results`), a stored run's settings (the
flags it was run with, as written at the time), a deployment's ``DeploymentFlags`` settings, plan's ``--json`` answer (plan stays free of
pydantic: no response model).
Readers narrow its values with ``isinstance`` rather than trusting them.
"""

from __future__ import annotations

JsonObject = dict[str, object]

__all__ = ["JsonObject"]
