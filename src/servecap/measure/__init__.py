"""Measurement: a streaming load generator for OpenAI-compatible servers, its results store,
self-checks and the calibration that fits the step-time model to measured runs.

Sibling of :mod:`servecap.sim` (the two never import each other); both share
:mod:`servecap.workload` (the request stream) and :mod:`servecap.results` (the summary).
"""
