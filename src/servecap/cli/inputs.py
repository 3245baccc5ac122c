"""The request, SLO and cost validators, for the commands that import them from the CLI."""

from servecap.app.inputs import cost_inputs, request_shape, slo_from_ms

__all__ = ["cost_inputs", "request_shape", "slo_from_ms"]
