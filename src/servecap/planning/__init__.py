"""The fleet planner's search: from a workload, SLOs and candidate GPUs to the cheapest fleet
that meets them, with its autoscaler and the levers tried on it (docs/fleet-plan.md).

- :mod:`~servecap.planning.model`: the request, the answer and the evaluation of one fleet;
- :mod:`~servecap.planning.run`: the steps (sizing each candidate, scoring, the winner, the ramp);
- :mod:`~servecap.planning.levers`: what is tried on the winner, and why a lever is ruled out;
- :mod:`~servecap.planning.pd`: the prefill/decode split lever;
- :mod:`~servecap.planning.doc`: the planned fleet as a fleet file.

The use case (``servecap fleet plan``: the work limits, the flags, the files written) is
:mod:`servecap.app.fleet_plan`.
"""
