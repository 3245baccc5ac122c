"""Measurement: a streaming load generator for OpenAI-compatible servers (one transport
interface, :mod:`servecap.measure.transport`), its self-checks and the calibration that fits
the step-time model to measured runs. Runs are stored by :mod:`servecap.results.store`.

Sibling of :mod:`servecap.sim` (the two never import each other); both share
:mod:`servecap.workload` (the request stream) and :mod:`servecap.results` (the summary).
"""
